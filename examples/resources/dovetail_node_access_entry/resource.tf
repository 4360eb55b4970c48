resource "dovetail_node_access_entry" "this" {
  cluster_name  = "demo"
  principal_arn = dovetail_node_role.this.arn
}
