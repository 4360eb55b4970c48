package interruption

import (
	"strings"
	"testing"
)

// FuzzParse: any SQS body parses or is refused, never panics, and a parsed message
// that names an instance event names exactly one instance.
func FuzzParse(f *testing.F) {
	for _, seed := range []string{
		`{"id":"1","detail-type":"EC2 Spot Instance Interruption Warning","source":"aws.ec2","detail":{"instance-id":"i-0123","instance-action":"terminate"}}`,
		`{"id":"2","detail-type":"EC2 Instance Rebalance Recommendation","source":"aws.ec2","detail":{"instance-id":"i-0123"}}`,
		`{"id":"3","detail-type":"EC2 Instance State-change Notification","source":"aws.ec2","detail":{"instance-id":"i-0123","state":"stopping"}}`,
		`{"id":"4","detail-type":"AWS Health Event","source":"aws.health","detail":{"service":"EC2","eventTypeCategory":"scheduledChange","affectedEntities":[{"entityValue":"i-0123"},{"entityValue":"vol-1"}]}}`,
		`{"id":"5","detail-type":"EC2 Capacity Reservation Instance Interruption Warning","source":"aws.ec2","detail":{"instance-id":"i-0123"}}`,
		`{"id":"6","detail-type":"EC2 Spot Instance Interruption Warning","source":"aws.ec2","detail":{}}`,
		`{"detail-type":"x","source":"aws.ec2","detail":"not an object"}`,
		`this is not an event`,
		`null`,
	} {
		f.Add(seed)
	}
	known := map[Kind]bool{SpotInterruption: true, RebalanceRecommendation: true, StateChange: true, ScheduledChange: true, CapacityReservationInterruption: true, Unknown: true}
	f.Fuzz(func(t *testing.T, body string) {
		msg, err := Parse(body)
		if err != nil {
			return
		}
		if !known[msg.Kind] {
			t.Fatalf("kind %q is not one the controller handles", msg.Kind)
		}
		switch msg.Kind {
		case SpotInterruption, RebalanceRecommendation, StateChange, CapacityReservationInterruption:
			if len(msg.InstanceIDs) != 1 || msg.InstanceIDs[0] == "" {
				t.Fatalf("%s message names instances %q, want exactly one", msg.Kind, msg.InstanceIDs)
			}
		case ScheduledChange:
			for _, id := range msg.InstanceIDs {
				if !strings.HasPrefix(id, "i-") {
					t.Fatalf("scheduled change names %q, not an instance", id)
				}
			}
		case Unknown:
			if msg.Acts() || len(msg.InstanceIDs) > 0 {
				t.Fatalf("an unknown message acts on %q", msg.InstanceIDs)
			}
		}
	})
}
