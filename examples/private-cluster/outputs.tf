output "vpc_endpoint_ids" {
  description = "Endpoint ID per service."
  value       = module.private_cluster.vpc_endpoint_ids
}

output "instance_profile_name" {
  description = "The instance profile the default EC2NodeClass names."
  value       = module.private_cluster.instance_profile_name
}
