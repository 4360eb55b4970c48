output "vpc_endpoint_ids" {
  description = "Endpoint ID per service, s3 included."
  value       = dovetail_vpc_endpoints.this.endpoint_ids
}

output "vpc_endpoint_security_group_id" {
  description = "Security group of the interface endpoints (HTTPS from the VPC)."
  value       = dovetail_vpc_endpoints.this.security_group_id
}

output "instance_profile_name" {
  description = "The instance profile the default EC2NodeClass names."
  value       = module.dovetail.instance_profile_name
}

output "node_role_name" {
  description = "The node IAM role."
  value       = module.dovetail.node_role_name
}

output "controller_role_arn" {
  description = "The controller's IAM role."
  value       = module.dovetail.controller_role_arn
}

output "interruption_queue_name" {
  description = "The interruption queue."
  value       = module.dovetail.interruption_queue_name
}
