# Excluding instance types: Graviton, but no 16xlarge (64 vCPU) sizes. The region's
# matching types come from dovetail_instance_types, so the exclusion follows new families.
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

data "dovetail_instance_types" "graviton_16xlarge" {
  architectures = ["arm64"]
  vcpus_min     = 64
  vcpus_max     = 64
}

module "node_pools" {
  source       = "../../modules/node-pools"
  cluster_name = var.cluster_name

  node_classes = {
    graviton = { role = var.node_role_name }
  }
  node_pools = {
    graviton = {
      node_class = "graviton"
      requirements = [
        { key = "kubernetes.io/arch", operator = "In", values = ["arm64"] },
        { key = "karpenter.k8s.aws/instance-category", operator = "In", values = ["c", "m", "r"] },
        { key = "node.kubernetes.io/instance-type", operator = "NotIn", values = data.dovetail_instance_types.graviton_16xlarge.names },
      ]
      limits = { cpu = "500" }
    }
  }
}

output "excluded_instance_types" {
  description = "The Graviton 16xlarge types the pool never launches."
  value       = data.dovetail_instance_types.graviton_16xlarge.names
}
