# Four zonal Reserved Instances and two Savings Plans: new on-demand capacity is
# planned at what it adds to the bill (0 on a reservation, the plan's rate while
# its hourly commitment lasts), and consolidation never swaps a reserved node
# for spot.
resource "dovetail_commitment" "ri_m5" {
  name = "ri-m5"
  spec = {
    reserved_instances = [
      { instance_type = "m5.2xlarge", zone = "us-east-1a", count = 4 },
    ]
    savings_plans = [
      { type = "Compute", commitment_per_hour = "25.00", discount = "0.28" },
      { type = "EC2Instance", family = "m7i", commitment_per_hour = "10.00", discount = "0.40" },
    ]
  }
  depends_on = [dovetail_controller.this]
}
