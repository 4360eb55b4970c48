# Spot and on-demand over arm64 and amd64 in one pool: Dovetail picks the cheapest offering
# that fits (spot when there is one, on-demand otherwise) and stops at 100 CPUs.
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
  kubernetes {
    config_path = var.kubeconfig_path
  }
}

module "node_pools" {
  source       = "../../modules/node-pools"
  cluster_name = var.cluster_name

  node_classes = {
    default = { role = var.node_role_name }
  }
  node_pools = {
    mixed = {
      node_class = "default"
      requirements = [
        { key = "karpenter.sh/capacity-type", operator = "In", values = ["spot", "on-demand"] },
        { key = "kubernetes.io/arch", operator = "In", values = ["arm64", "amd64"] },
        { key = "karpenter.k8s.aws/instance-category", operator = "In", values = ["c", "m", "r"] },
        # Spot needs choice: keep at least ten instance types in every launch.
        { key = "node.kubernetes.io/instance-type", operator = "Exists", min_values = 10 },
      ]
      limits = { cpu = var.cpu_limit }
    }
  }
}
