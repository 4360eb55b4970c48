variable "cluster_name" {
  description = "Name of the EKS cluster."
  type        = string
}

variable "region" {
  description = "AWS region of the cluster."
  type        = string
  default     = "us-west-2"
}

variable "kubeconfig_path" {
  description = "Kubeconfig of the cluster."
  type        = string
  default     = "~/.kube/config"
}

variable "oidc_provider_arn" {
  description = "The cluster's IAM OIDC provider for IRSA; null for EKS Pod Identity."
  type        = string
  default     = null
}

variable "subnet_ids" {
  description = "Private subnets nodes launch in."
  type        = list(string)
}

variable "security_group_ids" {
  description = "Security groups of the nodes (the cluster's node security group)."
  type        = list(string)
}

variable "consolidate_after" {
  description = "How long a node may be empty or underused before it is consolidated."
  type        = string
  default     = "1m"
}

variable "expire_after" {
  description = "How long a node may live before it is replaced; changing it drifts every node of the pool (terraform plan shows the impact)."
  type        = string
  default     = "720h"
}

variable "controller_image" {
  description = "The controller image; null deploys the one released with the provider. A provider built from source has none: set the image built from the repository's Dockerfile."
  type        = string
  default     = null
}
