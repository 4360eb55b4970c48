# What a cluster with no route to the internet needs to reach AWS.
resource "dovetail_vpc_endpoints" "this" {
  vpc_id          = "vpc-0123456789abcdef0"
  subnet_ids      = ["subnet-0123456789abcdef0", "subnet-0fedcba9876543210"]
  route_table_ids = ["rtb-0123456789abcdef0"]
}
