package consolidation

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
)

func pool(budgets ...v1.Budget) *v1.NodePool {
	np := &v1.NodePool{}
	np.Name = "p"
	np.Spec.Disruption.Budgets = budgets
	return np
}

func ptr[T any](v T) *T { return &v }

func TestAllowed(t *testing.T) {
	// 09:30 UTC on a Monday.
	now := time.Date(2026, 11, 23, 9, 30, 0, 0, time.UTC)
	businessHours := v1.Budget{Nodes: "0", Schedule: ptr("0 9 * * mon-fri"), Duration: &metav1.Duration{Duration: 8 * time.Hour}}
	cases := []struct {
		name       string
		np         *v1.NodePool
		reason     v1.DisruptionReason
		total      int
		disrupting int
		at         time.Time
		want       int
	}{
		{"default 10% rounds up", pool(v1.Budget{Nodes: "10%"}), v1.DisruptionReasonEmpty, 11, 0, now, 2},
		{"count less those disrupting", pool(v1.Budget{Nodes: "3"}), v1.DisruptionReasonEmpty, 20, 2, now, 1},
		{"never below zero", pool(v1.Budget{Nodes: "1"}), v1.DisruptionReasonEmpty, 20, 3, now, 0},
		{"most restrictive wins", pool(v1.Budget{Nodes: "50%"}, v1.Budget{Nodes: "2"}), v1.DisruptionReasonDrifted, 10, 0, now, 2},
		{"inside the cron window", pool(v1.Budget{Nodes: "100%"}, businessHours), v1.DisruptionReasonUnderutilized, 10, 0, now, 0},
		{"outside the cron window", pool(v1.Budget{Nodes: "100%"}, businessHours), v1.DisruptionReasonUnderutilized, 10, 0, now.Add(9 * time.Hour), 10},
		{"weekend is outside", pool(v1.Budget{Nodes: "100%"}, businessHours), v1.DisruptionReasonUnderutilized, 10, 0, time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC), 10},
		{"reasons scope a budget", pool(v1.Budget{Nodes: "0", Reasons: []v1.DisruptionReason{v1.DisruptionReasonDrifted}}), v1.DisruptionReasonEmpty, 4, 0, now, 4},
		{"reasons scope a budget (covered)", pool(v1.Budget{Nodes: "0", Reasons: []v1.DisruptionReason{v1.DisruptionReasonDrifted}}), v1.DisruptionReasonDrifted, 4, 0, now, 0},
		{"no budgets", pool(), v1.DisruptionReasonEmpty, 4, 1, now, 3},
	}
	for _, c := range cases {
		got, err := Allowed(c.np, c.reason, c.total, c.disrupting, c.at)
		if err != nil || got != c.want {
			t.Errorf("%s: Allowed = %d, %v; want %d", c.name, got, err, c.want)
		}
	}
	if _, err := Allowed(pool(v1.Budget{Nodes: "1", Schedule: ptr("every tuesday"), Duration: &metav1.Duration{Duration: time.Hour}}), v1.DisruptionReasonEmpty, 3, 0, now); err == nil {
		t.Error("a bad schedule was accepted")
	}
}

// Budgets count nodes as Karpenter v1.15's do: a node not initialized yet takes no
// share of a percentage, nor does a deleting one; a node not Ready counts as
// disrupted for every reason but Unhealthy, so repair is not starved by the nodes
// it is there to repair.
func TestBudgetsCountNodesAsKarpenter(t *testing.T) {
	tc := newTestCluster("50%")
	for range 4 {
		tc.addNode("m.large", 1, "100m")
	}
	tc.addNode("m.large", 0, "100m")
	tc.claims[len(tc.claims)-1].Status.Conditions = nil
	notReady := &tc.nodes[0]
	notReady.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionFalse}}
	_, cl := tc.decide(t)
	if cl.Total["default"] != 4 {
		t.Fatalf("total %d; want the 4 initialized nodes, not the one starting", cl.Total["default"])
	}
	allowed, _ := cl.Allowed(testNow)
	if got := allowed["default"][v1.DisruptionReasonDrifted]; got != 1 {
		t.Errorf("Drifted allows %d; want 50%% of 4 less the NotReady node = 1", got)
	}
	if got, _ := Allowed(tc.pool, v1.DisruptionReasonUnhealthy, cl.Total["default"], cl.Consuming("default", v1.DisruptionReasonUnhealthy), testNow); got != 2 {
		t.Errorf("Unhealthy allows %d; want 50%% of 4 = 2, the NotReady node not counted against repair", got)
	}
}
