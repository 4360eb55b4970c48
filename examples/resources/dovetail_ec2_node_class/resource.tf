resource "dovetail_ec2_node_class" "default" {
  name = "default"
  spec = {
    role                          = dovetail_node_role.this.name
    ami_selector_terms            = [{ alias = "al2023@latest" }]
    subnet_selector_terms         = [{ tags = { "karpenter.sh/discovery" = "demo" } }]
    security_group_selector_terms = [{ tags = { "karpenter.sh/discovery" = "demo" } }]
    block_device_mappings = [{
      device_name = "/dev/xvda"
      ebs         = { volume_size = "50Gi", volume_type = "gp3", encrypted = true }
    }]
    tags = { team = "platform" }
  }
  depends_on = [dovetail_controller.this]
}
