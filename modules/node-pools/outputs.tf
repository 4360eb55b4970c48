output "node_class_names" {
  description = "The EC2NodeClasses created, by key."
  value       = { for k, c in dovetail_ec2_node_class.this : k => c.name }
}

output "node_pool_names" {
  description = "The NodePools created, by key."
  value       = { for k, p in dovetail_node_pool.this : k => p.name }
}
