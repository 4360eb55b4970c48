# A NodePool per team: nodes carry billing-team=<team> (and so do their instances' cost
# allocation tags); a team's pods choose its pool with nodeAffinity (workload.yaml).
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
    for team in keys(var.teams) : "team-${team}" => { role = var.node_role_name, tags = { "billing-team" = team } }
  }
  node_pools = {
    for team, cpu in var.teams : "team-${team}" => {
      node_class = "team-${team}"
      labels     = { "billing-team" = team }
      requirements = [
        { key = "karpenter.sh/capacity-type", operator = "In", values = ["spot", "on-demand"] },
        { key = "karpenter.k8s.aws/instance-category", operator = "In", values = ["c", "m", "r"] },
      ]
      limits = { cpu = cpu }
    }
  }
}
