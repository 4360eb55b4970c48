# The controller is imported by the namespace and name of its Deployment.
terraform import dovetail_controller.this dovetail/dovetail
