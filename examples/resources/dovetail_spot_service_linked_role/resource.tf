resource "dovetail_spot_service_linked_role" "this" {}
