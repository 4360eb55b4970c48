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

variable "teams" {
  description = "CPU limit per team: each team gets a NodePool and an EC2NodeClass named team-<team>."
  type        = map(string)
  default     = { analytics = "200", checkout = "100" }
  validation {
    condition     = alltrue([for team, cpu in var.teams : can(regex("^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", team)) && can(tonumber(cpu))])
    error_message = "teams maps lower-case team names to a number of CPUs, such as { analytics = \"200\" }."
  }
}
