resource "dovetail_discovery_tags" "this" {
  cluster_name       = "demo"
  subnet_ids         = ["subnet-0123456789abcdef0", "subnet-0fedcba9876543210"]
  security_group_ids = ["sg-0123456789abcdef0"]
}
