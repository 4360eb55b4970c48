variable "cluster_name" {
  description = "Cluster whose karpenter.sh/discovery tags the node classes select subnets and security groups by, unless a class names its own selector tags."
  type        = string
  validation {
    condition     = can(regex("^[0-9A-Za-z][A-Za-z0-9_-]{0,99}$", var.cluster_name))
    error_message = "cluster_name must be an EKS cluster name: 1-100 letters, digits, hyphens and underscores."
  }
}

variable "node_classes" {
  description = <<-EOT
    EC2NodeClasses by name. Each gives the node IAM role or an existing instance profile (one of them), the AMI alias
    (al2023@latest unless set), the tags that select subnets and security groups (karpenter.sh/discovery = cluster_name
    unless set), the root volume size, tags for instances, and user data.
  EOT
  type = map(object({
    role                         = optional(string)
    instance_profile             = optional(string)
    ami_alias                    = optional(string, "al2023@latest")
    subnet_selector_tags         = optional(map(string))
    security_group_selector_tags = optional(map(string))
    root_volume_size             = optional(string)
    tags                         = optional(map(string), {})
    user_data                    = optional(string)
  }))
  default = {}
  validation {
    condition     = alltrue([for name, c in var.node_classes : (c.role == null) != (c.instance_profile == null)])
    error_message = "Each node class needs exactly one of role and instance_profile."
  }
  validation {
    condition     = alltrue([for name, c in var.node_classes : can(regex("^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", name))])
    error_message = "node_classes keys are object names: lower-case letters, digits and hyphens."
  }
  validation {
    condition     = alltrue([for name, c in var.node_classes : can(regex("^(al2023|bottlerocket|al2|windows2019|windows2022)@", c.ami_alias))])
    error_message = "ami_alias must be <family>@<version> with family al2023, bottlerocket, al2, windows2019 or windows2022 (such as al2023@latest)."
  }
}

variable "node_pools" {
  description = <<-EOT
    NodePools by name. node_class names a key of node_classes or an existing EC2NodeClass. labels and taints go on every
    node; requirements constrain instances (keys such as karpenter.sh/capacity-type, kubernetes.io/arch,
    karpenter.k8s.aws/instance-family, node.kubernetes.io/instance-type); limits cap the pool (cpu, memory); disruption
    says when nodes may be consolidated and how many at a time.
  EOT
  type = map(object({
    node_class  = string
    weight      = optional(number)
    labels      = optional(map(string), {})
    annotations = optional(map(string), {})
    taints = optional(list(object({
      key    = string
      value  = optional(string)
      effect = string
    })), [])
    startup_taints = optional(list(object({
      key    = string
      value  = optional(string)
      effect = string
    })), [])
    requirements = optional(list(object({
      key        = string
      operator   = string
      values     = optional(list(string))
      min_values = optional(number)
    })), [])
    expire_after             = optional(string, "720h")
    termination_grace_period = optional(string)
    limits                   = optional(map(string), {})
    disruption = optional(object({
      consolidation_policy = optional(string, "WhenEmptyOrUnderutilized")
      consolidate_after    = optional(string, "1m")
      budgets = optional(list(object({
        nodes    = string
        schedule = optional(string)
        duration = optional(string)
        reasons  = optional(list(string))
      })), [{ nodes = "10%" }])
    }), {})
  }))
  default = {}
  validation {
    condition     = alltrue([for name, p in var.node_pools : can(regex("^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", name))])
    error_message = "node_pools keys are object names: lower-case letters, digits and hyphens."
  }
  validation {
    condition = alltrue(flatten([for name, p in var.node_pools : [
      for t in concat(p.taints, p.startup_taints) : contains(["NoSchedule", "PreferNoSchedule", "NoExecute"], t.effect)
    ]]))
    error_message = "A taint's effect must be NoSchedule, PreferNoSchedule or NoExecute."
  }
  validation {
    condition = alltrue(flatten([for name, p in var.node_pools : [
      for r in p.requirements : contains(["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"], r.operator)
    ]]))
    error_message = "A requirement's operator must be In, NotIn, Exists, DoesNotExist, Gt or Lt."
  }
  validation {
    condition     = alltrue([for name, p in var.node_pools : contains(["WhenEmpty", "WhenEmptyOrUnderutilized"], p.disruption.consolidation_policy)])
    error_message = "disruption.consolidation_policy must be WhenEmpty or WhenEmptyOrUnderutilized."
  }
  validation {
    condition     = alltrue([for name, p in var.node_pools : p.weight == null ? true : (p.weight >= 1 && p.weight <= 100)])
    error_message = "A pool's weight must be from 1 to 100."
  }
}
