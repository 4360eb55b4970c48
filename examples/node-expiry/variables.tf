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

variable "expire_after" {
  description = "Longest a node lives before it is replaced."
  type        = string
  default     = "168h"
  validation {
    condition     = can(regex("^([0-9]+(s|m|h))+$", var.expire_after))
    error_message = "expire_after must be a duration such as 168h."
  }
}
