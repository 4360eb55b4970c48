# IRSA: trusted by the cluster's OIDC provider for the controller's service account.
resource "dovetail_controller_role" "this" {
  name                   = "DovetailController-demo"
  cluster_name           = "demo"
  region                 = "us-west-2"
  account_id             = "123456789012"
  node_role_arn          = dovetail_node_role.this.arn
  interruption_queue_arn = dovetail_interruption_queue.this.arn
  oidc_provider_arn      = aws_iam_openid_connect_provider.eks.arn
}
