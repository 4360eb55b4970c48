# A cluster with no route to the internet reaches AWS only through VPC endpoints.
# Pricing and IAM have none: the controller uses its embedded prices (isolated_vpc),
# and node classes name an instance profile made here, so it never creates one.
resource "dovetail_vpc_endpoints" "this" {
  vpc_id          = var.vpc_id
  subnet_ids      = var.endpoint_subnet_ids
  route_table_ids = var.route_table_ids
  services        = ["sts", "ssm", "ec2", "sqs", "ecr.api", "ecr.dkr", "eks"]
  tags            = length(var.tags) > 0 ? var.tags : null
}

module "dovetail" {
  source = "../dovetail"

  cluster_name                     = var.cluster_name
  tags                             = var.tags
  region                           = var.region
  cluster_endpoint                 = var.cluster_endpoint
  oidc_provider_arn                = var.oidc_provider_arn
  subnet_ids                       = var.node_subnet_ids
  security_group_ids               = var.security_group_ids
  node_class_uses_instance_profile = true
  default_node_pool                = var.default_node_pool
  controller = {
    isolated_vpc     = true
    image            = var.controller_image
    wait_for_rollout = var.controller_wait_for_rollout
    # Nodes in private subnets have no public IPv4 address to pay for.
    node_costs = { public_ipv4_price_per_hour = 0 }
  }
  # The controller's first AWS calls need the endpoints' private DNS names.
  depends_on = [dovetail_vpc_endpoints.this]
}
