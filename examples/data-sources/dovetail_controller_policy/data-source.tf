# The controller's least-privilege policy, for IAM managed outside this provider.
data "dovetail_controller_policy" "this" {
  cluster_name  = "demo"
  region        = "us-west-2"
  node_role_arn = "arn:aws:iam::123456789012:role/KarpenterNodeRole-demo"
}
