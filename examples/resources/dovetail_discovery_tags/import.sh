# Imported by cluster name: the subnets and groups carrying its tag are found.
terraform import dovetail_discovery_tags.this demo
