# GPU nodes only for pods that ask for them: the pool's nodes carry the nvidia.com/gpu
# taint, so only pods that tolerate it (workload.yaml) land there, and they request a GPU.
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
    gpu = { role = var.node_role_name, root_volume_size = "100Gi" }
  }
  node_pools = {
    gpu = {
      node_class = "gpu"
      labels     = { "example.com/accelerator" = "nvidia" }
      taints     = [{ key = "nvidia.com/gpu", value = "true", effect = "NoSchedule" }]
      requirements = [
        { key = "karpenter.k8s.aws/instance-gpu-manufacturer", operator = "In", values = ["nvidia"] },
        { key = "karpenter.k8s.aws/instance-family", operator = "In", values = ["g5", "g6", "g6e", "p4d", "p5"] },
        { key = "karpenter.sh/capacity-type", operator = "In", values = ["on-demand"] },
      ]
      # GPUs are dear: no more than eight at once, and idle nodes go after five minutes.
      limits     = { "nvidia.com/gpu" = "8" }
      disruption = { consolidation_policy = "WhenEmpty", consolidate_after = "5m" }
    }
  }
}
