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
  description = "Kubeconfig of the cluster (reached from inside the VPC, or through a bastion or VPN)."
  type        = string
  default     = "~/.kube/config"
}

variable "vpc_id" {
  description = "The cluster's VPC."
  type        = string
}

variable "subnet_ids" {
  description = "The private subnets: nodes launch in them and the interface endpoints get an address in each."
  type        = list(string)
}

variable "route_table_ids" {
  description = "Route tables of the private subnets, for the S3 gateway endpoint."
  type        = list(string)
}

variable "security_group_ids" {
  description = "Security groups of the nodes."
  type        = list(string)
}

variable "controller_image" {
  description = "The controller image mirrored into ECR, such as <account>.dkr.ecr.<region>.amazonaws.com/dovetail-controller:v0.1.0; null keeps the public one released with the provider (a provider built from source has none)."
  type        = string
  default     = null
}
