package interruption

import (
	"encoding/json"
	"fmt"
	"strings"
)

// Kind is what a message announces.
type Kind string

// Message kinds, named as Karpenter's metrics name them.
const (
	SpotInterruption                Kind = "spot_interrupted"
	RebalanceRecommendation         Kind = "rebalance_recommendation"
	StateChange                     Kind = "instance_state_change"
	ScheduledChange                 Kind = "scheduled_change"
	CapacityReservationInterruption Kind = "capacity_reservation_interrupted"
	Unknown                         Kind = "unknown"
	// The kinds EC2's instance status reports (DescribeInstanceStatus), not the
	// queue: Karpenter names them so in karpenter_nodeclaims_disrupted_total.
	InstanceStatusFailed Kind = "instance_status"
	SystemStatusFailed   Kind = "system_status"
	ScheduledEvent       Kind = "event_status"
)

// Message is a parsed EventBridge event.
type Message struct {
	Kind        Kind
	ID          string
	InstanceIDs []string
	// State is the new state of a state-change notification.
	State string
}

// Acts says whether the message means the instance is going away.
func (m Message) Acts() bool {
	switch m.Kind {
	case SpotInterruption, ScheduledChange, CapacityReservationInterruption, InstanceStatusFailed, SystemStatusFailed, ScheduledEvent:
		return true
	case StateChange:
		switch m.State {
		case "stopping", "stopped", "shutting-down", "terminated":
			return true
		}
	}
	return false
}

// Forceful says the instance is failing its status checks: its pods are not given
// time to drain (Karpenter's ForcefulTermination).
func (m Message) Forceful() bool {
	return m.Kind == InstanceStatusFailed || m.Kind == SystemStatusFailed
}

// disruptedReason is the message's reason in karpenter_nodeclaims_disrupted_total:
// "interrupted" for the queue's messages, the kind for instance status.
func (m Message) disruptedReason() string {
	switch m.Kind {
	case InstanceStatusFailed, SystemStatusFailed, ScheduledEvent:
		return string(m.Kind)
	}
	return "interrupted"
}

// envelope is EventBridge's event shape as delivered to SQS.
type envelope struct {
	ID         string          `json:"id"`
	DetailType string          `json:"detail-type"`
	Source     string          `json:"source"`
	Resources  []string        `json:"resources"`
	Detail     json.RawMessage `json:"detail"`
}

type instanceDetail struct {
	InstanceID string `json:"instance-id"`
	State      string `json:"state"`
}

type healthDetail struct {
	Service           string `json:"service"`
	EventTypeCategory string `json:"eventTypeCategory"`
	AffectedEntities  []struct {
		EntityValue string `json:"entityValue"`
	} `json:"affectedEntities"`
}

// Parse reads an SQS message body. An error means it is not an EventBridge event at
// all; an event of a type not handled parses as Unknown.
func Parse(body string) (Message, error) {
	var env envelope
	if err := json.Unmarshal([]byte(body), &env); err != nil {
		return Message{}, fmt.Errorf("not an EventBridge event: %w", err)
	}
	if env.DetailType == "" || env.Source == "" || len(env.Detail) == 0 {
		return Message{}, fmt.Errorf("not an EventBridge event: no source, detail-type or detail")
	}
	msg := Message{ID: env.ID, Kind: Unknown}
	switch {
	case env.Source == "aws.health" && env.DetailType == "AWS Health Event":
		var d healthDetail
		if err := json.Unmarshal(env.Detail, &d); err != nil {
			return Message{}, fmt.Errorf("AWS Health event with an unreadable detail: %w", err)
		}
		if d.Service != "EC2" || d.EventTypeCategory != "scheduledChange" {
			return msg, nil
		}
		msg.Kind = ScheduledChange
		for _, e := range d.AffectedEntities {
			if strings.HasPrefix(e.EntityValue, "i-") {
				msg.InstanceIDs = append(msg.InstanceIDs, e.EntityValue)
			}
		}
	case env.Source == "aws.ec2":
		var d instanceDetail
		if err := json.Unmarshal(env.Detail, &d); err != nil {
			return Message{}, fmt.Errorf("EC2 event with an unreadable detail: %w", err)
		}
		switch env.DetailType {
		case "EC2 Spot Instance Interruption Warning":
			msg.Kind = SpotInterruption
		case "EC2 Instance Rebalance Recommendation":
			msg.Kind = RebalanceRecommendation
		case "EC2 Instance State-change Notification":
			msg.Kind, msg.State = StateChange, d.State
		case "EC2 Capacity Reservation Instance Interruption Warning":
			msg.Kind = CapacityReservationInterruption
		default:
			return msg, nil
		}
		if d.InstanceID == "" {
			return Message{}, fmt.Errorf("%s event without an instance-id", env.DetailType)
		}
		msg.InstanceIDs = []string{d.InstanceID}
	}
	return msg, nil
}
