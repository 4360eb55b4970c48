# An EC2NodeClass is imported by its name.
terraform import dovetail_ec2_node_class.default default
