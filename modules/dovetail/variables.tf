variable "cluster_name" {
  description = "Name of the EKS cluster. Instances, the discovery tags and IAM conditions use it."
  type        = string
  validation {
    condition     = can(regex("^[0-9A-Za-z][A-Za-z0-9_-]{0,99}$", var.cluster_name))
    error_message = "cluster_name must be an EKS cluster name: 1-100 letters, digits, hyphens and underscores, starting with a letter or digit."
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
  description = "API server URL that nodes join. Null reads it from EKS DescribeCluster at controller start."
  type        = string
  default     = null
  validation {
    condition     = var.cluster_endpoint == null || can(regex("^https?://", var.cluster_endpoint))
    error_message = "cluster_endpoint must be a URL starting with https:// (such as aws_eks_cluster.this.endpoint)."
  }
}

variable "oidc_provider_arn" {
  description = "The cluster's IAM OIDC provider. Set it for IAM Roles for Service Accounts; leave null for EKS Pod Identity, which create_pod_identity_association sets up."
  type        = string
  default     = null
  validation {
    condition     = var.oidc_provider_arn == null || can(regex("^arn:aws[a-z-]*:iam::[0-9]{12}:oidc-provider/.+", var.oidc_provider_arn))
    error_message = "oidc_provider_arn must be an IAM OIDC provider ARN: arn:aws:iam::<account>:oidc-provider/oidc.eks.<region>.amazonaws.com/id/<id>."
  }
}

variable "node_role_arn" {
  description = "ARN of an existing node IAM role, with create_node_role = false: such as terraform-aws-eks//modules/karpenter's node_iam_role_arn, whose role the running nodes use (docs/guides/switch-from-karpenter.md). Its name, path and partition come from the ARN."
  type        = string
  default     = null
  validation {
    condition     = var.node_role_arn == null || can(regex("^arn:aws[a-z-]*:iam::[0-9]{12}:role/([A-Za-z0-9+=,.@_/-]+/)?[A-Za-z0-9+=,.@_-]{1,64}$", var.node_role_arn))
    error_message = "node_role_arn must be an IAM role ARN, such as arn:aws:iam::123456789012:role/Karpenter-my-cluster-2024."
  }
}

variable "account_id" {
  description = "AWS account of the cluster, for the controller policy's ARNs. Null asks STS."
  type        = string
  default     = null
  validation {
    condition     = var.account_id == null || can(regex("^[0-9]{12}$", var.account_id))
    error_message = "account_id must be 12 digits."
  }
}

variable "subnet_ids" {
  description = "Subnets nodes launch in; tagged karpenter.sh/discovery = cluster_name. Empty when they are tagged already."
  type        = list(string)
  default     = []
  validation {
    condition     = alltrue([for s in var.subnet_ids : can(regex("^subnet-[0-9a-f]+$", s))])
    error_message = "subnet_ids must be subnet IDs (subnet-...)."
  }
}

variable "security_group_ids" {
  description = "Security groups of the nodes; tagged karpenter.sh/discovery = cluster_name. Empty when they are tagged already."
  type        = list(string)
  default     = []
  validation {
    condition     = alltrue([for s in var.security_group_ids : can(regex("^sg-[0-9a-f]+$", s))])
    error_message = "security_group_ids must be security group IDs (sg-...)."
  }
}

variable "create_node_role" {
  description = "Create the node IAM role (and instance profile). False uses an existing role: node_role_arn, or node_role_name with account_id."
  type        = bool
  default     = true
}

variable "node_role_name" {
  description = "Name of the node IAM role; null means DovetailNode-<cluster_name>."
  type        = string
  default     = null
  validation {
    condition     = var.node_role_name == null || can(regex("^[A-Za-z0-9+=,.@_-]{1,64}$", var.node_role_name))
    error_message = "node_role_name must be an IAM role name: up to 64 letters, digits and +=,.@_- characters."
  }
}

variable "create_controller_role" {
  description = "Create the controller's IAM role with its least-privilege policy."
  type        = bool
  default     = true
}

variable "controller_role_arn" {
  description = "An existing controller role, used for IRSA when create_controller_role is false."
  type        = string
  default     = null
  validation {
    condition     = var.controller_role_arn == null || can(regex("^arn:aws[a-z-]*:iam::[0-9]{12}:role/.+", var.controller_role_arn))
    error_message = "controller_role_arn must be an IAM role ARN."
  }
}

variable "create_interruption_queue" {
  description = "Create the SQS queue and EventBridge rules for spot interruptions, rebalances and maintenance, and have the controller drain nodes ahead of them."
  type        = bool
  default     = true
}

variable "create_discovery_tags" {
  description = "Tag subnet_ids and security_group_ids with karpenter.sh/discovery."
  type        = bool
  default     = true
}

variable "install_controller" {
  description = "Install the CRDs and the controller in the cluster. False when they are deployed another way (such as `dovetail render` under GitOps); the CRDs must then exist before the default node pool is applied."
  type        = bool
  default     = true
}

variable "controller" {
  description = "Settings of the controller: namespace, image, replicas, log level, feature gates, isolated VPC (no Pricing API), AWS endpoint overrides, whether to wait for the rollout, keep_crds_on_destroy (destroying the controller keeps the CRDs, and so every NodePool, NodeClaim and node, for Karpenter to take over: docs/guides/rollback.md), values (further Helm chart values as YAML documents, e.g. yamlencode({ tolerations = [...] }), named like Karpenter's chart), and node_costs: what each node costs beyond its instance when plans are compared (root_volume_price_per_gib_month, public_ipv4_price_per_hour, node_overhead_price_per_hour, fewer_nodes_tolerance; unset ones keep the controller's AWS defaults)."
  type = object({
    namespace        = optional(string, "dovetail")
    image            = optional(string)
    replicas         = optional(number, 2)
    log_level        = optional(string, "info")
    feature_gates    = optional(map(bool), {})
    isolated_vpc     = optional(bool, false)
    aws_endpoints    = optional(map(string), {})
    wait_for_rollout = optional(bool, true)
    values           = optional(list(string), [])
    # Destroying the controller keeps the CRDs and every NodePool, EC2NodeClass,
    # NodeClaim and node: for going back to Karpenter (docs/guides/rollback.md).
    keep_crds_on_destroy = optional(bool, false)
    node_costs = optional(object({
      root_volume_price_per_gib_month = optional(number)
      public_ipv4_price_per_hour      = optional(number)
      node_overhead_price_per_hour    = optional(number)
      fewer_nodes_tolerance           = optional(number)
    }), {})
  })
  default = {}
  validation {
    condition     = contains(["debug", "info", "error"], var.controller.log_level)
    error_message = "controller.log_level must be debug, info or error."
  }
  validation {
    condition     = var.controller.replicas >= 1 && floor(var.controller.replicas) == var.controller.replicas
    error_message = "controller.replicas must be a whole number of at least 1."
  }
}

variable "create_default_node_class" {
  description = "Create the EC2NodeClass \"default\" (AL2023, the discovery-tagged subnets and security groups)."
  type        = bool
  default     = true
}

variable "node_class_uses_instance_profile" {
  description = "Give the default EC2NodeClass the node role's instance profile instead of the role, so the controller never calls IAM (private clusters: IAM has no VPC endpoint). Needs create_node_role."
  type        = bool
  default     = false
}

variable "create_default_node_pool" {
  description = "Create the NodePool \"default\" over the default EC2NodeClass."
  type        = bool
  default     = true
}

variable "default_node_pool" {
  description = "Shape of the default NodePool: capacity types, architectures, instance categories, the pool's CPU limit, how long a node may be empty or underused before consolidation, and its maximum age."
  type = object({
    capacity_types      = optional(list(string), ["on-demand"])
    architectures       = optional(list(string), ["amd64"])
    instance_categories = optional(list(string), ["c", "m", "r"])
    cpu_limit           = optional(string, "1000")
    consolidate_after   = optional(string, "1m")
    expire_after        = optional(string, "720h")
  })
  default = {}
  validation {
    condition     = length(var.default_node_pool.capacity_types) > 0 && alltrue([for c in var.default_node_pool.capacity_types : contains(["spot", "on-demand", "reserved"], c)])
    error_message = "default_node_pool.capacity_types must list spot, on-demand or reserved."
  }
  validation {
    condition     = length(var.default_node_pool.architectures) > 0 && alltrue([for a in var.default_node_pool.architectures : contains(["amd64", "arm64"], a)])
    error_message = "default_node_pool.architectures must list amd64 or arm64."
  }
  validation {
    condition     = can(regex("^([0-9]+(s|m|h))+$", var.default_node_pool.consolidate_after))
    error_message = "default_node_pool.consolidate_after must be a duration such as 30s, 1m or 1h."
  }
  validation {
    condition     = var.default_node_pool.expire_after == "Never" || can(regex("^([0-9]+(s|m|h))+$", var.default_node_pool.expire_after))
    error_message = "default_node_pool.expire_after must be a duration such as 720h, or Never."
  }
}

variable "tags" {
  description = "Tags on the IAM roles, the interruption queue and its EventBridge rules the module creates (terraform-aws-eks//modules/karpenter's tags)."
  type        = map(string)
  default     = {}
}

variable "iam_role_path" {
  description = "IAM path of the controller role (as in terraform-aws-eks//modules/karpenter)."
  type        = string
  default     = "/"
  validation {
    condition     = can(regex("^/([!-~]*/)?$", var.iam_role_path))
    error_message = "iam_role_path must begin and end with /, such as /dovetail/."
  }
}

variable "iam_role_permissions_boundary_arn" {
  description = "Permissions boundary of the controller role (as in terraform-aws-eks//modules/karpenter)."
  type        = string
  default     = null
  validation {
    condition     = var.iam_role_permissions_boundary_arn == null || can(regex("^arn:aws[a-z-]*:iam::(aws|[0-9]{12}):policy/.+", var.iam_role_permissions_boundary_arn))
    error_message = "iam_role_permissions_boundary_arn must be an IAM policy ARN."
  }
}

variable "node_iam_role_path" {
  description = "IAM path of the node role and its instance profile (as in terraform-aws-eks//modules/karpenter)."
  type        = string
  default     = "/"
  validation {
    condition     = can(regex("^/([!-~]*/)?$", var.node_iam_role_path))
    error_message = "node_iam_role_path must begin and end with /, such as /dovetail/."
  }
}

variable "node_iam_role_permissions_boundary" {
  description = "Permissions boundary of the node role (as in terraform-aws-eks//modules/karpenter)."
  type        = string
  default     = null
  validation {
    condition     = var.node_iam_role_permissions_boundary == null || can(regex("^arn:aws[a-z-]*:iam::(aws|[0-9]{12}):policy/.+", var.node_iam_role_permissions_boundary))
    error_message = "node_iam_role_permissions_boundary must be an IAM policy ARN."
  }
}

variable "queue_name" {
  description = "Name of the interruption queue; null means <cluster_name>-dovetail (the input is named as in terraform-aws-eks//modules/karpenter, whose default is Karpenter-<cluster_name>)."
  type        = string
  default     = null
  validation {
    condition     = var.queue_name == null || can(regex("^[A-Za-z0-9_-]{1,30}$", var.queue_name))
    error_message = "queue_name must be 1-30 letters, digits, - or _ (the rule names add up to 34 characters)."
  }
}

variable "queue_managed_sse_enabled" {
  description = "Encrypt the interruption queue with SQS-managed keys when no queue_kms_master_key_id is given."
  type        = bool
  default     = true
}

variable "queue_kms_master_key_id" {
  description = "KMS key that encrypts the interruption queue instead (key ARN, key ID, alias name or alias ARN); the controller role is granted kms:Decrypt on it through SQS."
  type        = string
  default     = null
}

variable "queue_kms_data_key_reuse_period_seconds" {
  description = "How long SQS reuses a data key of queue_kms_master_key_id (60-86400)."
  type        = number
  default     = null
  validation {
    condition     = var.queue_kms_data_key_reuse_period_seconds == null ? true : (var.queue_kms_data_key_reuse_period_seconds >= 60 && var.queue_kms_data_key_reuse_period_seconds <= 86400)
    error_message = "queue_kms_data_key_reuse_period_seconds must be between 60 and 86400."
  }
}

variable "iam_role_name" {
  description = "Name of the controller role; null means DovetailController-<cluster_name> (the input is named as in terraform-aws-eks//modules/karpenter, whose default is a KarpenterController- name prefix)."
  type        = string
  default     = null
  validation {
    condition     = var.iam_role_name == null || can(regex("^[\\w+=,.@-]{1,64}$", var.iam_role_name))
    error_message = "iam_role_name must be 1-64 letters, digits or +=,.@_-."
  }
}

variable "iam_role_tags" {
  description = "Tags of the controller role, on top of tags (as in terraform-aws-eks//modules/karpenter)."
  type        = map(string)
  default     = {}
}

variable "node_iam_role_tags" {
  description = "Tags of the node role and its instance profile, on top of tags (as in terraform-aws-eks//modules/karpenter)."
  type        = map(string)
  default     = {}
}

variable "node_iam_role_attach_cni_policy" {
  description = "Attach AmazonEKS_CNI_Policy to the node role; false when the VPC CNI (aws-node) has a role of its own through IRSA or Pod Identity (as in terraform-aws-eks//modules/karpenter)."
  type        = bool
  default     = true
}

variable "node_iam_role_additional_policies" {
  description = "Managed policy ARNs attached to the node role besides the four EKS node policies, by any key (as in terraform-aws-eks//modules/karpenter)."
  type        = map(string)
  default     = {}
  validation {
    condition     = alltrue([for arn in values(var.node_iam_role_additional_policies) : can(regex("^arn:aws[a-z-]*:iam::(aws|[0-9]{12}):policy/.+", arn))])
    error_message = "node_iam_role_additional_policies must map names to IAM policy ARNs, e.g. { cloudwatch = \"arn:aws:iam::aws:policy/CloudWatchAgentServerPolicy\" }."
  }
}

variable "ami_id_ssm_parameter_arns" {
  description = "SSM parameter ARNs the controller may read besides AWS's public /aws/service/* ones, for amiSelectorTerms that name an ssmParameter (as in terraform-aws-eks//modules/karpenter, which replaces the public ones; here both are readable)."
  type        = list(string)
  default     = []
  validation {
    condition     = alltrue([for arn in var.ami_id_ssm_parameter_arns : can(regex("^arn:aws[a-z-]*:ssm:[a-z0-9-*]*:[0-9*]*:parameter/.+$", arn))])
    error_message = "ami_id_ssm_parameter_arns must hold SSM parameter ARNs, e.g. arn:aws:ssm:us-west-2:123456789012:parameter/golden-ami/*."
  }
}

variable "create_access_entry" {
  description = "Create the EKS access entry that lets instances with the node role join the cluster (as in terraform-aws-eks//modules/karpenter). Needs the cluster's authentication mode API or API_AND_CONFIG_MAP; set false when the role is mapped in aws-auth instead."
  type        = bool
  default     = true
}

variable "access_entry_type" {
  description = "Type of the node role's access entry: EC2_LINUX, or EC2_WINDOWS for Windows nodes."
  type        = string
  default     = "EC2_LINUX"

  validation {
    condition     = contains(["EC2_LINUX", "EC2_WINDOWS"], var.access_entry_type)
    error_message = "access_entry_type must be EC2_LINUX or EC2_WINDOWS."
  }
}

variable "create_pod_identity_association" {
  description = "With Pod Identity (oidc_provider_arn null), create the association that gives the controller's ServiceAccount its role (as in terraform-aws-eks//modules/karpenter). The cluster needs the eks-pod-identity-agent add-on."
  type        = bool
  default     = true
}

variable "create_spot_service_linked_role" {
  description = "Make sure the account has EC2's spot service-linked role (AWSServiceRoleForEC2Spot): an account that never ran spot has none, every spot launch fails until it exists, and the controller may not create it. The role is left in the account on destroy."
  type        = bool
  default     = true
}

variable "cluster_ip_family" {
  description = "The cluster's IP family. With ipv6 the node role gets the customer-managed AmazonEKS_CNI_IPv6_Policy (which must exist in the account, as terraform-aws-eks's create_cni_ipv6_iam_policy makes it) instead of AmazonEKS_CNI_Policy; needs account_id."
  type        = string
  default     = "ipv4"

  validation {
    condition     = contains(["ipv4", "ipv6"], var.cluster_ip_family)
    error_message = "cluster_ip_family must be ipv4 or ipv6."
  }
}

variable "iam_role_policies" {
  description = "Further managed policy ARNs attached to the controller role, by any key (as in terraform-aws-eks//modules/karpenter)."
  type        = map(string)
  default     = {}
}

variable "queue_policy_statements" {
  description = "Further statements of the interruption queue's policy, by Sid (the key, unless sid is set), in terraform-aws-eks//modules/karpenter's shape. A statement without resources applies to the queue; effect defaults to Allow."
  type = map(object({
    sid           = optional(string)
    actions       = optional(list(string))
    not_actions   = optional(list(string))
    effect        = optional(string)
    resources     = optional(list(string))
    not_resources = optional(list(string))
    principals = optional(list(object({
      type        = string
      identifiers = list(string)
    })))
    not_principals = optional(list(object({
      type        = string
      identifiers = list(string)
    })))
    condition = optional(list(object({
      test     = string
      values   = list(string)
      variable = string
    })))
  }))
  default = null
}
