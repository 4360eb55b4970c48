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

variable "tags" {
  description = "Tags on every AWS resource."
  type        = map(string)
  default     = {}
}

variable "queue_kms_master_key_id" {
  description = "Customer managed KMS key of the interruption queue; null uses SQS-managed keys."
  type        = string
  default     = null
}

variable "ami_id_ssm_parameter_arns" {
  description = "SSM parameters of your own AMIs that amiSelectorTerms name."
  type        = list(string)
  default     = []
}

variable "controller_additional_policies" {
  description = "Further managed policies for the controller role, by any key."
  type        = map(string)
  default     = {}
}

variable "audit_role_arn" {
  description = "A role allowed to read the interruption queue's settings; null for none."
  type        = string
  default     = null
}
