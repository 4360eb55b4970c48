resource "dovetail_node_pool" "general" {
  name = "general"
  spec = {
    template = {
      metadata = { labels = { "billing-team" = "platform" } }
      spec = {
        node_class_ref = { group = "karpenter.k8s.aws", kind = "EC2NodeClass", name = dovetail_ec2_node_class.default.name }
        requirements = [
          { key = "karpenter.sh/capacity-type", operator = "In", values = ["spot", "on-demand"] },
          { key = "kubernetes.io/arch", operator = "In", values = ["amd64", "arm64"] },
          { key = "karpenter.k8s.aws/instance-category", operator = "In", values = ["c", "m", "r"] },
        ]
        expire_after = "720h"
      }
    }
    # A spend limit in dollars per hour, at the prices the engine plans with.
    limits = { cpu = "1000", "dovetail.sh/usd-per-hour" = "50" }
    disruption = {
      consolidation_policy = "WhenEmptyOrUnderutilized"
      consolidate_after    = "1m"
      budgets = [
        { nodes = "10%" },
        # No voluntary disruption during business hours on weekdays (UTC).
        { nodes = "0", schedule = "0 9 * * mon-fri", duration = "8h" },
      ]
    }
  }
  depends_on = [dovetail_controller.this]
}
