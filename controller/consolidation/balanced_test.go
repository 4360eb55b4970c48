package consolidation

import (
	"math"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
)

// TestBalancedConsolidationScore checks the score against the worked examples of
// Karpenter's designs/balanced-consolidation.md (prices in $/day there; the score
// is a ratio of shares, so the unit cancels).
func TestBalancedConsolidationScore(t *testing.T) {
	for _, tc := range []struct {
		name                        string
		savings, cost               float64
		disruption, totalDisruption float64
		want                        float64
		approved                    bool
	}{
		{"oversized node", 7.26, 58.08, 3, 80, 3.33, true},
		{"spare capacity delete", 4.84, 58.08, 4, 80, 1.67, true},
		{"marginal move", 2.42, 58.08, 8, 80, 0.42, false},
		{"well-packed node", 0, 58.08, 10, 80, 0, false},
		{"uniform pool replace, at the boundary", 2.42, 48.40, 8, 80, 0.50, true},
		{"heterogeneous: cheap pods", 4.84, 58.08, 4, 107, 2.23, true},
		{"heterogeneous: model-serving pods", 4.84, 58.08, 31, 107, 0.29, false},
		{"spot pool, 8 pods", 1.45, 14.50, 8, 80, 1.0, true},
	} {
		s := Score{SavingsFraction: tc.savings / tc.cost, DisruptionFraction: tc.disruption / tc.totalDisruption}
		if math.Abs(s.Value()-tc.want) > 0.006 || s.Approved() != tc.approved {
			t.Errorf("%s: score %.3f approved %v; want %.2f approved %v", tc.name, s.Value(), s.Approved(), tc.want, tc.approved)
		}
	}
	if s := (Score{SavingsFraction: -0.1, DisruptionFraction: 0.1}); s.Value() != 0 || s.Approved() {
		t.Errorf("a move that costs more scores %v", s.Value())
	}
}

// TestEvictionCost checks Karpenter's per-pod cost: 1, plus pod-deletion-cost/2^27
// and priority/2^25, clamped to [-10, 10].
func TestEvictionCost(t *testing.T) {
	pod := func(deletionCost string, priority *int32) *corev1.Pod {
		p := &corev1.Pod{}
		if deletionCost != "" {
			p.Annotations = map[string]string{corev1.PodDeletionCost: deletionCost}
		}
		p.Spec.Priority = priority
		return p
	}
	high, low := int32(1000000000), int32(-2147483648)
	for _, tc := range []struct {
		pod  *corev1.Pod
		want float64
	}{
		{pod("", nil), 1},
		{pod("134217728", nil), 2},
		{pod("2147483647", nil), 10},
		{pod("-2147483647", nil), -10},
		{pod("not a number", nil), 1},
		{pod("", &high), 10},
		{pod("", &low), -10},
	} {
		if got := EvictionCost(tc.pod); math.Abs(got-tc.want) > 1e-6 {
			t.Errorf("annotations %v priority %v: %v, want %v", tc.pod.Annotations, tc.pod.Spec.Priority, got, tc.want)
		}
	}
}

// balancedCluster is a Balanced pool of four busy nodes of the type (7 pods
// each) and one more node, node-4, holding the pods given.
func balancedCluster(busyType, busyPodCPU, lastType string, lastPods int, podCPU string) *testCluster {
	tc := newTestCluster("100%")
	tc.pool.Spec.Disruption.ConsolidationPolicy = v1.ConsolidationPolicyBalanced
	for i := 0; i < 4; i++ {
		tc.addNode(busyType, 7, busyPodCPU)
	}
	tc.addNode(lastType, lastPods, podCPU)
	return tc
}

func blockedReason(plan *Plan, node string) string {
	for _, b := range plan.Blocked {
		if b.Candidate.Node.Name == node {
			return b.Reason
		}
	}
	return ""
}

// TestBalancedConsolidationRejectsAMarginalReplace: a 4-cpu node whose 8 small
// pods fit a 2-cpu node at half the price, beside four busy 8-cpu nodes.
// WhenEmptyOrUnderutilized replaces it; under Balanced it saves 5.6% of the pool's
// $/h for 22% of its disruption (9 of 41), a score of 0.25: the node stays, and
// the plan says why.
func TestBalancedConsolidationRejectsAMarginalReplace(t *testing.T) {
	tc := balancedCluster("m.2xlarge", "1100m", "m.xlarge", 8, "200m")
	tc.pool.Spec.Disruption.ConsolidationPolicy = v1.ConsolidationPolicyWhenEmptyOrUnderutilized
	plan, _ := tc.decide(t)
	if !slices.Contains(names(plan.Remove), "node-4") {
		t.Fatalf("WhenEmptyOrUnderutilized: removes %v; want node-4 among them (the case Balanced must refuse)", names(plan.Remove))
	}
	tc.pool.Spec.Disruption.ConsolidationPolicy = v1.ConsolidationPolicyBalanced
	plan, cl := tc.decide(t)
	if len(plan.Remove) != 0 || len(plan.Batches) != 0 {
		t.Fatalf("Balanced: removes %v; want nothing", names(plan.Remove))
	}
	if got := cl.Totals["default"]; math.Abs(got.Cost-1.8) > 1e-9 || got.Disruption != 41 {
		t.Errorf("pool totals %+v; want $1.80/h and disruption 41 (5 nodes, 36 pods)", got)
	}
	why := blockedReason(plan, "node-4")
	if !strings.Contains(why, "consolidationPolicy Balanced") || !strings.Contains(why, "score 0.25 < threshold 0.50 (k: 2, savings 5.6%, disruption 22.0%)") {
		t.Errorf("node-4 kept because %q; want the Balanced score 0.25 < 0.50", why)
	}
	if len(plan.Rejected) != 1 || plan.Rejected[0].Candidates[0].Node.Name != "node-4" {
		t.Errorf("rejected moves %+v; want node-4's", plan.Rejected)
	}
}

// TestBalancedConsolidationApprovesAnOversizedNode: an 8-cpu node with 2 pods is
// replaced by a 2-cpu node: 25% of the pool's $/h saved for 3 of 35 of its
// disruption, a score of 2.92.
func TestBalancedConsolidationApprovesAnOversizedNode(t *testing.T) {
	tc := balancedCluster("m.xlarge", "550m", "m.2xlarge", 2, "500m")
	plan, _ := tc.decide(t)
	if len(plan.Remove) != 1 || plan.Remove[0].Node.Name != "node-4" || len(plan.Replacements) != 1 || plan.Replacements[0].InstanceType.Name != "m.large" {
		t.Fatalf("removes %v, launches %v; want node-4 replaced by an m.large", names(plan.Remove), typeNames(plan.Replacements))
	}
	if len(plan.Scores) != 1 || math.Abs(plan.Scores[0].Value()-2.92) > 0.01 || !plan.Scores[0].Approved() {
		t.Fatalf("scores %+v; want one approved at 2.92", plan.Scores)
	}
	if s := plan.Scores[0].String(); s != "score 2.92 >= threshold 0.50 (k: 2, savings 25.0%, disruption 8.6%)" {
		t.Errorf("event text %q", s)
	}
	if len(plan.Batches) != 1 || plan.Batches[0].Reason != v1.DisruptionReasonUnderutilized {
		t.Errorf("batches %v; want the replace to start now", plan.Batches)
	}
}

// TestBalancedConsolidationWeighsPodDeletionCost: two equal nodes whose pods the
// others can take. The one whose pods declare a high pod-deletion-cost stays
// (deleting it outright already scores under the threshold); the other goes.
func TestBalancedConsolidationWeighsPodDeletionCost(t *testing.T) {
	tc := newTestCluster("100%")
	tc.pool.Spec.Disruption.ConsolidationPolicy = v1.ConsolidationPolicyBalanced
	for i := 0; i < 6; i++ {
		tc.addNode("m.xlarge", 4, "500m")
	}
	tc.addNode("m.xlarge", 2, "250m")
	costly := tc.addNode("m.xlarge", 2, "250m")
	for i := range tc.pods {
		if tc.pods[i].Spec.NodeName == costly.Name {
			tc.pods[i].Annotations = map[string]string{corev1.PodDeletionCost: "2147483647"}
		}
	}
	plan, _ := tc.decide(t)
	if removed := names(plan.Remove); !slices.Contains(removed, "node-6") || slices.Contains(removed, "node-7") {
		t.Fatalf("removes %v; want node-6 and not node-7 (whose pods cost 10 each to evict)", removed)
	}
	for _, s := range plan.Scores {
		if !s.Approved() {
			t.Errorf("the plan takes a rejected move: %s", s)
		}
	}
	if why := blockedReason(plan, "node-7"); !strings.Contains(why, "even deleting it would not be worth evicting its pods") {
		t.Errorf("node-7 kept because %q", why)
	}
	mustPlaceEveryPod(t, plan)
}

// TestBalancedConsolidationDeletesEmptyNodes: an empty node is emptiness, which
// every policy does: it goes however little it saves against the pool.
func TestBalancedConsolidationDeletesEmptyNodes(t *testing.T) {
	tc := balancedCluster("m.xlarge", "550m", "m.xlarge", 7, "550m")
	tc.types = append(testTypes(), instanceType("tiny", 0.001, v1.CapacityTypeOnDemand))
	tc.addNode("tiny", 0, "")
	plan, _ := tc.decide(t)
	if len(plan.Remove) != 1 || plan.Remove[0].Node.Name != "node-5" || plan.Batches[0].Reason != v1.DisruptionReasonEmpty {
		t.Fatalf("removes %v (batches %v); want the empty node-5, as emptiness", names(plan.Remove), plan.Batches)
	}
}

// TestWhenEmptyCountsPodsFreeToDisruptAsEmpty is v1.15's WhenEmpty: a node whose
// pods all declare themselves free to disrupt (eviction cost 0 or less) is empty;
// their pods are still planned a place. A node with one ordinary pod is not.
func TestWhenEmptyCountsPodsFreeToDisruptAsEmpty(t *testing.T) {
	tc := newTestCluster("100%")
	tc.pool.Spec.Disruption.ConsolidationPolicy = v1.ConsolidationPolicyWhenEmpty
	tc.addNode("m.xlarge", 2, "500m")
	free := tc.addNode("m.xlarge", 2, "500m")
	for i := range tc.pods {
		if tc.pods[i].Spec.NodeName == free.Name {
			tc.pods[i].Annotations = map[string]string{corev1.PodDeletionCost: "-2147483647"}
		}
	}
	plan, _ := tc.decide(t)
	if len(plan.Remove) != 1 || plan.Remove[0].Node.Name != "node-1" {
		t.Fatalf("removes %v; want node-1, whose pods are free to disrupt", names(plan.Remove))
	}
	if len(plan.Batches) != 1 || plan.Batches[0].Reason != v1.DisruptionReasonEmpty {
		t.Errorf("batches %v; want one emptiness batch", plan.Batches)
	}
	mustPlaceEveryPod(t, plan)
	if why := blockedReason(plan, "node-0"); !strings.Contains(why, "WhenEmpty") {
		t.Errorf("node-0 kept because %q", why)
	}
}
