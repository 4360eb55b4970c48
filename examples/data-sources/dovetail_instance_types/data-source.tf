# Graviton general-purpose types with 4-16 vCPUs under $1/h, cheapest first.
data "dovetail_instance_types" "graviton" {
  vcpus_min     = 4
  vcpus_max     = 16
  architectures = ["arm64"]
  families      = ["m7g", "c7g", "r7g"]
  max_price     = 1
}

# ...fed to a NodePool requirement:
#   { key = "node.kubernetes.io/instance-type", operator = "In", values = data.dovetail_instance_types.graviton.names }
