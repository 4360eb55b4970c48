# The AWS side from Terraform, the cluster side from GitOps: IAM roles (IRSA), the
# interruption queue and discovery tags here; the CRDs and the controller as the
# manifests `dovetail render` prints (see the render_command output), committed to the
# repository Argo CD or Flux syncs. NodePools can then live in Git as YAML, or in HCL
# with modules/node-pools.
terraform {
  required_version = ">= 1.5"
  required_providers {
    dovetail = {
      source  = "dovetail-sh/dovetail"
      version = ">= 0.1.0"
    }
  }
}

provider "dovetail" {
  aws {
    region = var.region
  }
}

module "dovetail" {
  source = "../../modules/dovetail"

  cluster_name              = var.cluster_name
  region                    = var.region
  oidc_provider_arn         = var.oidc_provider_arn
  subnet_ids                = var.subnet_ids
  security_group_ids        = var.security_group_ids
  install_controller        = false
  create_default_node_class = false
  create_default_node_pool  = false

  # What a platform team's account rules usually ask for, named as in
  # terraform-aws-eks//modules/karpenter.
  tags                              = var.tags
  iam_role_path                     = "/dovetail/"
  iam_role_tags                     = { component = "dovetail-controller" }
  node_iam_role_additional_policies = { cloudwatch = "arn:aws:iam::aws:policy/CloudWatchAgentServerPolicy" }
  # The VPC CNI runs with a role of its own (Pod Identity for aws-node).
  node_iam_role_attach_cni_policy = false
  queue_kms_master_key_id         = var.queue_kms_master_key_id
  ami_id_ssm_parameter_arns       = var.ami_id_ssm_parameter_arns
  # A managed policy beside the controller's own, and an auditor that may read the
  # queue's settings.
  iam_role_policies = var.controller_additional_policies
  queue_policy_statements = var.audit_role_arn == null ? null : {
    AuditRead = {
      actions    = ["sqs:GetQueueAttributes"]
      principals = [{ type = "AWS", identifiers = [var.audit_role_arn] }]
    }
  }
}

output "render_command" {
  description = "Prints the CRDs and controller manifests for this cluster, to commit for GitOps."
  value = join(" ", [
    "dovetail render --cluster-name", var.cluster_name,
    "--aws-region", var.region,
    "--irsa-role-arn", module.dovetail.controller_role_arn,
    "--interruption-queue", module.dovetail.interruption_queue_name,
  ])
}

output "node_role_name" {
  description = "The role node classes name (spec.role)."
  value       = module.dovetail.node_role_name
}
