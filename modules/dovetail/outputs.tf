output "node_role_name" {
  description = "The node IAM role (an EKS access entry of type EC2_LINUX must admit it)."
  value       = local.node_role_name
}

output "node_role_arn" {
  description = "ARN of the node role, when this module created it."
  value       = var.create_node_role ? dovetail_node_role.this[0].arn : null
}

output "instance_profile_name" {
  description = "The node role's instance profile, when this module created it."
  value       = var.create_node_role ? dovetail_node_role.this[0].instance_profile_name : null
}

output "controller_role_arn" {
  description = "The controller's IAM role (IRSA annotates the ServiceAccount with it; with Pod Identity, create_pod_identity_association associates it)."
  value       = var.create_controller_role ? dovetail_controller_role.this[0].arn : var.controller_role_arn
}

output "controller_namespace" {
  description = "Namespace the controller runs in."
  value       = var.controller.namespace
}

output "controller_service_account" {
  description = "ServiceAccount the controller runs as."
  value       = local.service_account
}

output "interruption_queue_name" {
  description = "The interruption queue, when created."
  value       = var.create_interruption_queue ? dovetail_interruption_queue.this[0].name : null
}

output "interruption_queue_arn" {
  description = "ARN of the interruption queue, when created."
  value       = var.create_interruption_queue ? dovetail_interruption_queue.this[0].arn : null
}

output "interruption_rule_names" {
  description = "The EventBridge rules that feed the interruption queue."
  value       = var.create_interruption_queue ? dovetail_interruption_queue.this[0].rule_names : []
}

output "node_class_name" {
  description = "The default EC2NodeClass, when created."
  value       = var.create_default_node_class ? dovetail_ec2_node_class.default[0].name : null
}

output "node_pool_name" {
  description = "The default NodePool, when created."
  value       = var.create_default_node_pool ? dovetail_node_pool.default[0].name : null
}

output "node_access_entry_arn" {
  description = "ARN of the node role's EKS access entry, when the module made it."
  value       = var.create_access_entry ? dovetail_node_access_entry.this[0].access_entry_arn : null
}

output "pod_identity_association_id" {
  description = "ID of the controller's Pod Identity association, when the module made it."
  value       = length(dovetail_pod_identity_association.this) > 0 ? dovetail_pod_identity_association.this[0].id : null
}
