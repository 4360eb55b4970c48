resource "dovetail_controller" "this" {
  cluster_name       = "demo"
  irsa_role_arn      = dovetail_controller_role.this.arn
  interruption_queue = dovetail_interruption_queue.this.name
  feature_gates      = { SpotToSpotConsolidation = true }
}
