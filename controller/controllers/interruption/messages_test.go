package interruption

import (
	"reflect"
	"testing"
)

func TestParse(t *testing.T) {
	cases := []struct {
		name string
		body string
		want Message
		acts bool
	}{
		{"spot interruption", `{"version":"0","id":"1","detail-type":"EC2 Spot Instance Interruption Warning","source":"aws.ec2","account":"1","time":"2026-11-22T00:00:00Z","region":"us-west-2","resources":["arn:aws:ec2:us-west-2a:instance/i-0abc"],"detail":{"instance-id":"i-0abc","instance-action":"terminate"}}`,
			Message{Kind: SpotInterruption, ID: "1", InstanceIDs: []string{"i-0abc"}}, true},
		{"rebalance", `{"id":"2","detail-type":"EC2 Instance Rebalance Recommendation","source":"aws.ec2","detail":{"instance-id":"i-0abc"}}`,
			Message{Kind: RebalanceRecommendation, ID: "2", InstanceIDs: []string{"i-0abc"}}, false},
		{"stopping", `{"id":"3","detail-type":"EC2 Instance State-change Notification","source":"aws.ec2","detail":{"instance-id":"i-0abc","state":"stopping"}}`,
			Message{Kind: StateChange, ID: "3", InstanceIDs: []string{"i-0abc"}, State: "stopping"}, true},
		{"running", `{"id":"4","detail-type":"EC2 Instance State-change Notification","source":"aws.ec2","detail":{"instance-id":"i-0abc","state":"running"}}`,
			Message{Kind: StateChange, ID: "4", InstanceIDs: []string{"i-0abc"}, State: "running"}, false},
		{"scheduled change", `{"id":"5","detail-type":"AWS Health Event","source":"aws.health","detail":{"service":"EC2","eventTypeCategory":"scheduledChange","affectedEntities":[{"entityValue":"i-0abc"},{"entityValue":"i-0def"}]}}`,
			Message{Kind: ScheduledChange, ID: "5", InstanceIDs: []string{"i-0abc", "i-0def"}}, true},
		{"health issue, not a change", `{"id":"6","detail-type":"AWS Health Event","source":"aws.health","detail":{"service":"EC2","eventTypeCategory":"issue"}}`,
			Message{Kind: Unknown, ID: "6"}, false},
		{"capacity reservation", `{"id":"7","detail-type":"EC2 Capacity Reservation Instance Interruption Warning","source":"aws.ec2","detail":{"instance-id":"i-0abc"}}`,
			Message{Kind: CapacityReservationInterruption, ID: "7", InstanceIDs: []string{"i-0abc"}}, true},
		{"unknown type", `{"id":"8","detail-type":"EC2 AMI State Change","source":"aws.ec2","detail":{}}`, Message{Kind: Unknown, ID: "8"}, false},
	}
	for _, c := range cases {
		got, err := Parse(c.body)
		if err != nil || !reflect.DeepEqual(got, c.want) || got.Acts() != c.acts {
			t.Errorf("%s: Parse = %+v (acts %v), %v; want %+v (acts %v)", c.name, got, got.Acts(), err, c.want, c.acts)
		}
	}
	for _, bad := range []string{"garbage", `{"hello":"world"}`, `{"detail-type":"EC2 Spot Instance Interruption Warning","source":"aws.ec2","detail":{}}`, `{"detail-type":"EC2 Spot Instance Interruption Warning","source":"aws.ec2","detail":"x"}`} {
		if _, err := Parse(bad); err == nil {
			t.Errorf("Parse(%q) accepted a malformed message", bad)
		}
	}
}
