# Node expiry for upgrades: every node is replaced within a week (picking up the newest
# AMI of its alias), drained respecting PodDisruptionBudgets (workload.yaml) and forced
# after a day at most. Consolidation and drift replace one node at a time, and never
# during business hours.
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
    general = {
      node_class = "default"
      requirements = [
        { key = "karpenter.k8s.aws/instance-category", operator = "In", values = ["c", "m", "r"] },
      ]
      expire_after             = var.expire_after
      termination_grace_period = "24h"
      disruption = {
        consolidation_policy = "WhenEmptyOrUnderutilized"
        consolidate_after    = "5m"
        budgets = [
          { nodes = "1" },
          { nodes = "0", schedule = "0 9 * * mon-fri", duration = "8h", reasons = ["Underutilized", "Drifted"] },
        ]
      }
    }
  }
}
