# A NodePool is imported by its name.
terraform import dovetail_node_pool.general general
