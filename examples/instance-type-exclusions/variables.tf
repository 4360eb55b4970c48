variable "region" {
  description = "AWS region of the cluster: its instance types are listed."
  type        = string
  default     = "us-west-2"
}

variable "cluster_name" {
  description = "Name of the EKS cluster; its karpenter.sh/discovery tags select subnets and security groups."
  type        = string
}

variable "node_role_name" {
  description = "The node IAM role (modules/dovetail's node_role_name output)."
  type        = string
}

variable "kubeconfig_path" {
  description = "Kubeconfig of the cluster, where Dovetail is installed."
  type        = string
  default     = "~/.kube/config"
}

