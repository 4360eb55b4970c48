resource "dovetail_interruption_queue" "this" {
  name = "demo-interruptions"
}
