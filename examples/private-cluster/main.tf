# A private cluster (no internet route): VPC endpoints for every AWS API the nodes and
# the controller call, the controller in isolated-VPC mode (embedded prices, since the
# Pricing API has no endpoint), and node classes naming an instance profile made here
# (IAM has no endpoint either). Mirror the controller image into ECR first.
terraform {
  required_version = ">= 1.5"
  required_providers {
    dovetail = {
      source  = "dovetail-sh/dovetail"
      version = ">= 0.1.0"
    }
  }
}

provider "dovetail" {
  aws {
    region = var.region
  }
  kubernetes {
    config_path = var.kubeconfig_path
  }
}

module "private_cluster" {
  source = "../../modules/private-cluster"

  cluster_name        = var.cluster_name
  region              = var.region
  vpc_id              = var.vpc_id
  endpoint_subnet_ids = var.subnet_ids
  node_subnet_ids     = var.subnet_ids
  route_table_ids     = var.route_table_ids
  security_group_ids  = var.security_group_ids
  controller_image    = var.controller_image
}
