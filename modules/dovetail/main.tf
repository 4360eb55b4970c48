locals {
  node_role_name = var.node_role_arn != null ? reverse(split("/", var.node_role_arn))[0] : coalesce(var.node_role_name, "DovetailNode-${var.cluster_name}")
  # The node role's default policies (dovetail_node_role's policy_arns default), kept
  # when node_iam_role_additional_policies adds to them.
  # The VPC CNI's policy is attached to the node role unless the CNI has a role of
  # its own (IRSA or Pod Identity for aws-node), as in terraform-aws-eks.
  # With IPv6 the CNI's policy is the customer-managed one terraform-aws-eks makes.
  cni_policy = var.cluster_ip_family == "ipv6" ? "arn:aws:iam::${coalesce(var.account_id, "000000000000")}:policy/AmazonEKS_CNI_IPv6_Policy" : "arn:aws:iam::aws:policy/AmazonEKS_CNI_Policy"
  node_role_default_policies = concat([for p in ["AmazonEKSWorkerNodePolicy", "AmazonEC2ContainerRegistryReadOnly", "AmazonSSMManagedInstanceCore"] : "arn:aws:iam::aws:policy/${p}"],
  var.node_iam_role_attach_cni_policy ? [local.cni_policy] : [])
  node_role_arn = var.create_node_role ? dovetail_node_role.this[0].arn : coalesce(var.node_role_arn, "arn:aws:iam::${coalesce(var.account_id, "000000000000")}:role${coalesce(var.node_iam_role_path, "/")}${local.node_role_name}")
  # queue_policy_statements in the queue policy's JSON, keys as IAM spells them.
  queue_policy_statements = var.queue_policy_statements == null ? null : [for key, st in var.queue_policy_statements : jsonencode({ for k, v in {
    Sid          = coalesce(st.sid, key)
    Effect       = coalesce(st.effect, "Allow")
    Action       = st.actions
    NotAction    = st.not_actions
    Resource     = st.resources
    NotResource  = st.not_resources
    Principal    = st.principals == null ? null : { for type, ids in { for p in st.principals : p.type => p.identifiers... } : type => flatten(ids) }
    NotPrincipal = st.not_principals == null ? null : { for type, ids in { for p in st.not_principals : p.type => p.identifiers... } : type => flatten(ids) }
    Condition    = st.condition == null ? null : { for test, cs in { for c in st.condition : c.test => c... } : test => { for c in cs : c.variable => c.values } }
  } : k => v if v != null })]
  node_role_tags       = merge(var.tags, var.node_iam_role_tags)
  controller_role_tags = merge(var.tags, var.iam_role_tags)
  # The service account the controller runs as: IRSA trusts it, Pod Identity associates it.
  service_account = "dovetail"
  discovery       = { "karpenter.sh/discovery" = var.cluster_name }
  irsa_role_arn = var.oidc_provider_arn == null ? null : (
    var.create_controller_role ? dovetail_controller_role.this[0].arn : var.controller_role_arn
  )
}

resource "dovetail_node_role" "this" {
  count                   = var.create_node_role ? 1 : 0
  name                    = local.node_role_name
  create_instance_profile = true
  path                    = var.node_iam_role_path
  permissions_boundary    = var.node_iam_role_permissions_boundary
  policy_arns             = length(var.node_iam_role_additional_policies) > 0 || !var.node_iam_role_attach_cni_policy || var.cluster_ip_family == "ipv6" ? distinct(concat(local.node_role_default_policies, values(var.node_iam_role_additional_policies))) : null
  tags                    = length(local.node_role_tags) > 0 ? local.node_role_tags : null

  lifecycle {
    precondition {
      condition     = var.cluster_ip_family == "ipv4" || !var.node_iam_role_attach_cni_policy || var.account_id != null
      error_message = "cluster_ip_family = \"ipv6\" needs account_id: the node role gets the account's AmazonEKS_CNI_IPv6_Policy."
    }
    precondition {
      condition     = var.node_role_arn == null
      error_message = "node_role_arn names an existing node role: set create_node_role = false with it (a role of the same name would be created beside it)."
    }
  }
}

resource "dovetail_interruption_queue" "this" {
  count                             = var.create_interruption_queue ? 1 : 0
  name                              = coalesce(var.queue_name, "${var.cluster_name}-dovetail")
  tags                              = length(var.tags) > 0 ? var.tags : null
  sqs_managed_sse                   = var.queue_kms_master_key_id == null ? var.queue_managed_sse_enabled : false
  kms_master_key_id                 = var.queue_kms_master_key_id
  kms_data_key_reuse_period_seconds = var.queue_kms_master_key_id == null ? null : var.queue_kms_data_key_reuse_period_seconds
  policy_statements                 = local.queue_policy_statements
}

resource "dovetail_controller_role" "this" {
  count                  = var.create_controller_role ? 1 : 0
  name                   = coalesce(var.iam_role_name, "DovetailController-${var.cluster_name}")
  cluster_name           = var.cluster_name
  region                 = var.region
  account_id             = var.account_id
  node_role_arn          = local.node_role_arn
  interruption_queue_arn = var.create_interruption_queue ? dovetail_interruption_queue.this[0].arn : null
  # SQS decrypts the queue's messages with the controller's permissions.
  interruption_queue_kms_key = var.create_interruption_queue ? var.queue_kms_master_key_id : null
  ami_id_ssm_parameter_arns  = length(var.ami_id_ssm_parameter_arns) > 0 ? var.ami_id_ssm_parameter_arns : null
  oidc_provider_arn          = var.oidc_provider_arn
  namespace                  = var.controller.namespace
  service_account            = local.service_account
  path                       = var.iam_role_path
  permissions_boundary       = var.iam_role_permissions_boundary_arn
  tags                       = length(local.controller_role_tags) > 0 ? local.controller_role_tags : null
  policy_arns                = length(var.iam_role_policies) > 0 ? values(var.iam_role_policies) : null

  lifecycle {
    precondition {
      condition     = var.create_node_role || var.account_id != null || var.node_role_arn != null
      error_message = "With create_node_role = false, set node_role_arn (or account_id with node_role_name): the controller's iam:PassRole is scoped to the existing node role's ARN."
    }
  }
}

resource "dovetail_node_access_entry" "this" {
  count         = var.create_access_entry ? 1 : 0
  cluster_name  = var.cluster_name
  principal_arn = local.node_role_arn
  type          = var.access_entry_type
  tags          = length(var.tags) > 0 ? var.tags : null

  lifecycle {
    precondition {
      condition     = var.create_node_role || var.account_id != null || var.node_role_arn != null
      error_message = "With create_node_role = false, set node_role_arn (or account_id with node_role_name): the access entry names the existing node role's ARN."
    }
  }
}

resource "dovetail_pod_identity_association" "this" {
  count           = var.create_pod_identity_association && var.oidc_provider_arn == null && (var.create_controller_role || var.controller_role_arn != null) ? 1 : 0
  cluster_name    = var.cluster_name
  namespace       = var.controller.namespace
  service_account = local.service_account
  role_arn        = var.create_controller_role ? dovetail_controller_role.this[0].arn : var.controller_role_arn
  tags            = length(var.tags) > 0 ? var.tags : null
}

resource "dovetail_spot_service_linked_role" "this" {
  count = var.create_spot_service_linked_role ? 1 : 0
}

resource "dovetail_discovery_tags" "this" {
  count              = var.create_discovery_tags && length(concat(var.subnet_ids, var.security_group_ids)) > 0 ? 1 : 0
  cluster_name       = var.cluster_name
  subnet_ids         = var.subnet_ids
  security_group_ids = var.security_group_ids
}

resource "dovetail_controller" "this" {
  count              = var.install_controller ? 1 : 0
  cluster_name       = var.cluster_name
  cluster_endpoint   = var.cluster_endpoint
  aws_region         = var.region
  aws_endpoints      = var.controller.aws_endpoints
  namespace          = var.controller.namespace
  service_account    = local.service_account
  irsa_role_arn      = local.irsa_role_arn
  interruption_queue = var.create_interruption_queue ? dovetail_interruption_queue.this[0].name : null
  isolated_vpc       = var.controller.isolated_vpc
  feature_gates      = var.controller.feature_gates
  log_level          = var.controller.log_level
  image              = var.controller.image
  replicas           = var.controller.replicas
  wait_for_rollout   = var.controller.wait_for_rollout
  # Read from the state on destroy: set it and apply before removing the module.
  keep_crds_on_destroy = var.controller.keep_crds_on_destroy
  values               = length(var.controller.values) > 0 ? var.controller.values : null

  root_volume_price_per_gib_month = var.controller.node_costs.root_volume_price_per_gib_month
  public_ipv4_price_per_hour      = var.controller.node_costs.public_ipv4_price_per_hour
  node_overhead_price_per_hour    = var.controller.node_costs.node_overhead_price_per_hour
  fewer_nodes_tolerance           = var.controller.node_costs.fewer_nodes_tolerance

  # Pod Identity gives a pod credentials when it is created: the controller's pods
  # start after the association. On destroy the controller stops before its role and
  # association go, so a hand-over (keep_crds_on_destroy) never runs without them.
  depends_on = [dovetail_controller_role.this, dovetail_pod_identity_association.this]

  lifecycle {
    precondition {
      condition     = var.oidc_provider_arn == null || var.create_controller_role || var.controller_role_arn != null
      error_message = "IRSA (oidc_provider_arn set) with create_controller_role = false needs controller_role_arn: the role to annotate the ServiceAccount with."
    }
  }
}

resource "dovetail_ec2_node_class" "default" {
  count = var.create_default_node_class ? 1 : 0
  name  = "default"
  spec = {
    role                          = var.node_class_uses_instance_profile ? null : local.node_role_name
    instance_profile              = var.node_class_uses_instance_profile ? dovetail_node_role.this[0].instance_profile_name : null
    ami_selector_terms            = [{ alias = "al2023@latest" }]
    subnet_selector_terms         = [{ tags = local.discovery }]
    security_group_selector_terms = [{ tags = local.discovery }]
  }
  # The controller installs the CRDs, and finalizes node classes on destroy.
  depends_on = [dovetail_controller.this, dovetail_node_role.this, dovetail_discovery_tags.this]

  lifecycle {
    precondition {
      condition     = !var.node_class_uses_instance_profile || var.create_node_role
      error_message = "node_class_uses_instance_profile needs create_node_role = true: the instance profile is the node role's."
    }
  }
}

resource "dovetail_node_pool" "default" {
  count = var.create_default_node_pool ? 1 : 0
  name  = "default"
  spec = {
    template = {
      spec = {
        node_class_ref = { group = "karpenter.k8s.aws", kind = "EC2NodeClass", name = "default" }
        requirements = [
          { key = "karpenter.sh/capacity-type", operator = "In", values = var.default_node_pool.capacity_types },
          { key = "kubernetes.io/arch", operator = "In", values = var.default_node_pool.architectures },
          { key = "karpenter.k8s.aws/instance-category", operator = "In", values = var.default_node_pool.instance_categories },
          { key = "karpenter.k8s.aws/instance-generation", operator = "Gt", values = ["2"] },
        ]
        expire_after = var.default_node_pool.expire_after
      }
    }
    limits = { cpu = var.default_node_pool.cpu_limit }
    disruption = {
      consolidation_policy = "WhenEmptyOrUnderutilized"
      consolidate_after    = var.default_node_pool.consolidate_after
    }
  }
  depends_on = [dovetail_controller.this, dovetail_ec2_node_class.default]
}
