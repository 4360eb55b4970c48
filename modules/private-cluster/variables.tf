variable "cluster_name" {
  description = "Name of the EKS cluster."
  type        = string
  validation {
    condition     = can(regex("^[0-9A-Za-z][A-Za-z0-9_-]{0,99}$", var.cluster_name))
    error_message = "cluster_name must be an EKS cluster name: 1-100 letters, digits, hyphens and underscores."
  }
}

variable "region" {
  description = "AWS region of the cluster."
  type        = string
  validation {
    condition     = can(regex("^[a-z]{2}(-[a-z]+)+-[0-9]$", var.region))
    error_message = "region must be an AWS region name such as us-west-2."
  }
}

variable "cluster_endpoint" {
  description = "The cluster's private API server URL. Null reads it from EKS (through the eks endpoint) at controller start."
  type        = string
  default     = null
}

variable "vpc_id" {
  description = "The cluster's VPC, which has no route to the internet."
  type        = string
  validation {
    condition     = can(regex("^vpc-[0-9a-f]+$", var.vpc_id))
    error_message = "vpc_id must be a VPC ID (vpc-...)."
  }
}

variable "endpoint_subnet_ids" {
  description = "Subnets the interface endpoints get an address in, one per zone."
  type        = list(string)
  validation {
    condition     = length(var.endpoint_subnet_ids) > 0 && alltrue([for s in var.endpoint_subnet_ids : can(regex("^subnet-[0-9a-f]+$", s))])
    error_message = "endpoint_subnet_ids must list at least one subnet ID (subnet-...)."
  }
}

variable "route_table_ids" {
  description = "Route tables of the node subnets, for the S3 gateway endpoint (image layers from ECR come from S3)."
  type        = list(string)
  validation {
    condition     = length(var.route_table_ids) > 0 && alltrue([for r in var.route_table_ids : can(regex("^rtb-[0-9a-f]+$", r))])
    error_message = "route_table_ids must list at least one route table ID (rtb-...): without the S3 gateway endpoint nodes cannot pull images."
  }
}

variable "node_subnet_ids" {
  description = "Subnets nodes launch in, tagged for discovery. Empty when they are tagged already."
  type        = list(string)
  default     = []
  validation {
    condition     = alltrue([for s in var.node_subnet_ids : can(regex("^subnet-[0-9a-f]+$", s))])
    error_message = "node_subnet_ids must be subnet IDs (subnet-...)."
  }
}

variable "security_group_ids" {
  description = "Security groups of the nodes, tagged for discovery. Empty when they are tagged already."
  type        = list(string)
  default     = []
  validation {
    condition     = alltrue([for s in var.security_group_ids : can(regex("^sg-[0-9a-f]+$", s))])
    error_message = "security_group_ids must be security group IDs (sg-...)."
  }
}

variable "oidc_provider_arn" {
  description = "The cluster's IAM OIDC provider for IRSA; null for EKS Pod Identity."
  type        = string
  default     = null
  validation {
    condition     = var.oidc_provider_arn == null || can(regex("^arn:aws[a-z-]*:iam::[0-9]{12}:oidc-provider/.+", var.oidc_provider_arn))
    error_message = "oidc_provider_arn must be an IAM OIDC provider ARN."
  }
}

variable "controller_image" {
  description = "The controller image as mirrored into the cluster's ECR (a private cluster cannot pull from ghcr.io). Null keeps the public image released with the provider (a provider built from source has none and needs this)."
  type        = string
  default     = null
  validation {
    condition     = var.controller_image == null || can(regex("^[^\\s]+(:[^\\s]+|@sha256:[0-9a-f]{64})$", var.controller_image))
    error_message = "controller_image must be an image reference with a tag or digest, such as 123456789012.dkr.ecr.us-west-2.amazonaws.com/dovetail-controller:v0.1.0."
  }
}

variable "controller_wait_for_rollout" {
  description = "Wait until the controller's replicas are available."
  type        = bool
  default     = true
}

variable "default_node_pool" {
  description = "Shape of the default NodePool, as in modules/dovetail."
  type = object({
    capacity_types      = optional(list(string), ["on-demand"])
    architectures       = optional(list(string), ["amd64"])
    instance_categories = optional(list(string), ["c", "m", "r"])
    cpu_limit           = optional(string, "1000")
    consolidate_after   = optional(string, "1m")
    expire_after        = optional(string, "720h")
  })
  default = {}
}

variable "tags" {
  description = "Tags on the VPC endpoints, their security group, and what the dovetail module creates (IAM roles, interruption queue and rules)."
  type        = map(string)
  default     = {}
}
