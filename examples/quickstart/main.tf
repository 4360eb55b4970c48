# Quickstart: everything a cluster needs for Dovetail in one module call — node and
# controller IAM roles, the interruption queue, discovery tags, the controller, and a
# default EC2NodeClass and NodePool (spot and on-demand, amd64 and arm64).
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
  # `aws eks update-kubeconfig --name <cluster>` writes this file; or set host,
  # cluster_ca_certificate and exec { command = "aws" ... } as in the provider docs.
  kubernetes {
    config_path = var.kubeconfig_path
  }
}

module "dovetail" {
  source = "../../modules/dovetail"

  cluster_name       = var.cluster_name
  region             = var.region
  oidc_provider_arn  = var.oidc_provider_arn
  subnet_ids         = var.subnet_ids
  security_group_ids = var.security_group_ids
  # Lets consolidation replace a spot node with a cheaper spot node, not only delete it.
  controller = {
    image         = var.controller_image
    feature_gates = { SpotToSpotConsolidation = true }
  }
  default_node_pool = {
    capacity_types    = ["spot", "on-demand"]
    architectures     = ["amd64", "arm64"]
    consolidate_after = var.consolidate_after
    expire_after      = var.expire_after
  }
}
