variable "cluster_name" {
  description = "Name of the EKS cluster."
  type        = string
}

variable "region" {
  description = "AWS region of the cluster."
  type        = string
  default     = "us-west-2"
}

variable "oidc_provider_arn" {
  description = "The cluster's IAM OIDC provider, for IRSA."
  type        = string
}

variable "subnet_ids" {
  description = "Private subnets nodes launch in."
  type        = list(string)
}

variable "security_group_ids" {
  description = "Security groups of the nodes."
  type        = list(string)
}
