resource "dovetail_node_role" "this" {
  name                    = "KarpenterNodeRole-demo"
  create_instance_profile = true
}
