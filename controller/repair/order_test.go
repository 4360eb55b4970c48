package repair

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Karpenter v1.15's Repair ordering cases, on the pure order.
func TestOrder(t *testing.T) {
	m := mustMatcher(t,
		Policy{ConditionType: "Urgent", ConditionStatus: corev1.ConditionFalse, ReasonRegex: ".*", Toleration: minutes(30), Priority: 90, Action: Replace},
		Policy{ConditionType: "Routine", ConditionStatus: corev1.ConditionFalse, ReasonRegex: ".*", Toleration: minutes(30), Priority: 10, Action: Replace},
		Policy{ConditionType: corev1.NodeReady, ConditionStatus: corev1.ConditionFalse, Toleration: minutes(30), Action: Replace})
	candidate := func(name, condition string, since time.Time, resolvedAt time.Time, cost float64) Candidate {
		node := &corev1.Node{Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeConditionType(condition), Status: corev1.ConditionFalse, LastTransitionTime: metav1.NewTime(since)}}}}
		return Candidate{Node: name, Result: Resolve(m.Match(node), resolvedAt, time.Time{}), DisruptionCost: cost}
	}
	names := func(cs []Candidate) []string {
		var out []string
		for _, c := range cs {
			out = append(out, c.Node)
		}
		return out
	}
	now := t0.Add(2 * time.Hour)
	t.Run("should repair the higher-priority condition first", func(t *testing.T) {
		cs := []Candidate{candidate("routine", "Routine", t0, now, 0), candidate("urgent", "Urgent", t0, now, 0)}
		Order(cs, now)
		if got := names(cs); got[0] != "urgent" {
			t.Errorf("order %v", got)
		}
	})
	t.Run("should break equal scores by node name across resolve times", func(t *testing.T) {
		// Same condition since the same time, resolved a minute apart: scored as of
		// one time, they tie, and the name decides.
		cs := []Candidate{candidate("b", "Routine", t0, now, 0), candidate("a", "Routine", t0, now.Add(-time.Minute), 0)}
		Order(cs, now)
		if got := names(cs); got[0] != "a" || got[1] != "b" {
			t.Errorf("order %v", got)
		}
	})
	t.Run("should let a long-waiting lower priority overtake a fresh higher one", func(t *testing.T) {
		// One rank per 30 minutes past toleration: a routine repair waiting 2h
		// (rank 1 + 4) overtakes an urgent one just eligible (rank 2 + 0).
		cs := []Candidate{candidate("fresh-urgent", "Urgent", now.Add(-minutes(30)), now, 0), candidate("old-routine", "Routine", now.Add(-minutes(150)), now, 0)}
		Order(cs, now)
		if got := names(cs); got[0] != "old-routine" {
			t.Errorf("order %v", got)
		}
	})
	t.Run("should prefer the cheaper disruption between equal scores", func(t *testing.T) {
		cs := []Candidate{candidate("a-dear", "Routine", t0, now, 5), candidate("z-cheap", "Routine", t0, now, 1)}
		Order(cs, now)
		if got := names(cs); got[0] != "z-cheap" {
			t.Errorf("order %v", got)
		}
	})
}
