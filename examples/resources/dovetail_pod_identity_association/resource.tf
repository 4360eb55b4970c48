resource "dovetail_pod_identity_association" "this" {
  cluster_name    = "demo"
  namespace       = "dovetail"
  service_account = "dovetail"
  role_arn        = dovetail_controller_role.this.arn
}
