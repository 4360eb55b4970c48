locals {
  discovery = { "karpenter.sh/discovery" = var.cluster_name }
}

resource "dovetail_ec2_node_class" "this" {
  for_each = var.node_classes
  name     = each.key
  spec = {
    role                          = each.value.role
    instance_profile              = each.value.instance_profile
    ami_selector_terms            = [{ alias = each.value.ami_alias }]
    subnet_selector_terms         = [{ tags = coalesce(each.value.subnet_selector_tags, local.discovery) }]
    security_group_selector_terms = [{ tags = coalesce(each.value.security_group_selector_tags, local.discovery) }]
    tags                          = each.value.tags
    user_data                     = each.value.user_data
    block_device_mappings = each.value.root_volume_size == null ? null : [{
      device_name = "/dev/xvda"
      root_volume = true
      ebs         = { volume_size = each.value.root_volume_size, volume_type = "gp3", encrypted = true }
    }]
  }
}

resource "dovetail_node_pool" "this" {
  for_each = var.node_pools
  name     = each.key
  spec = {
    weight = each.value.weight
    template = {
      metadata = { labels = each.value.labels, annotations = each.value.annotations }
      spec = {
        node_class_ref           = { group = "karpenter.k8s.aws", kind = "EC2NodeClass", name = try(dovetail_ec2_node_class.this[each.value.node_class].name, each.value.node_class) }
        taints                   = each.value.taints
        startup_taints           = each.value.startup_taints
        requirements             = each.value.requirements
        expire_after             = each.value.expire_after
        termination_grace_period = each.value.termination_grace_period
      }
    }
    limits     = each.value.limits
    disruption = each.value.disruption
  }
}
