output "node_role_name" {
  description = "Admit this role to the cluster with an EKS access entry of type EC2_LINUX."
  value       = module.dovetail.node_role_name
}

output "controller_role_arn" {
  description = "The controller's IAM role; with Pod Identity, associate it with dovetail/dovetail."
  value       = module.dovetail.controller_role_arn
}

output "interruption_queue_name" {
  description = "The SQS queue interruption events arrive on."
  value       = module.dovetail.interruption_queue_name
}

output "node_pool_name" {
  description = "The default NodePool."
  value       = module.dovetail.node_pool_name
}
