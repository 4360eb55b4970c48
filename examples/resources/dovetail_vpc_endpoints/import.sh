# Imported by VPC ID: the endpoints tagged dovetail.sh/vpc-endpoint-service in it are found.
terraform import dovetail_vpc_endpoints.this vpc-0123456789abcdef0
