package consolidation

import (
	"testing"

	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/controller/capacitymix"
)

// An underused on-demand node is replaced by spot without a mix, and within a mix
// that needs it on-demand (base 1) only by a cheaper on-demand node, or not at all.
func TestConsolidationKeepsThePoolsCapacityMix(t *testing.T) {
	build := func(mix map[string]string, nodeType ...string) *Plan {
		tc := newTestCluster("100%")
		tc.pool.Annotations = mix
		tc.pool.Spec.Template.Spec.Requirements = []v1.NodePoolRequirement{{Key: v1.LabelCapacityType, RequirementBody: v1.RequirementBody{Operator: v1.OpIn, Values: []string{v1.CapacityTypeSpot, v1.CapacityTypeOnDemand}}}}
		tc.types = withSpot(testTypes())
		tc.spotToSpot = true
		it := "m.2xlarge"
		if len(nodeType) > 0 {
			it = nodeType[0]
		}
		tc.addNode(it, 2, "500m")
		plan, _ := tc.decide(t)
		return plan
	}
	if plan := build(nil); len(plan.Batches) != 1 || len(plan.Replacements) != 1 || plan.Replacements[0].Offering.CapacityType != v1.CapacityTypeSpot {
		t.Fatalf("without a mix: %d batches, %d replacements; want the node replaced by spot", len(plan.Batches), len(plan.Replacements))
	}
	// With an on-demand base of 1 the replacement must be on-demand: the target
	// plans a smaller on-demand node, cheaper still.
	plan := build(map[string]string{capacitymix.OnDemandBaseAnnotationKey: "1"})
	if len(plan.Batches) != 1 || len(plan.Replacements) != 1 || plan.Replacements[0].Offering.CapacityType != v1.CapacityTypeOnDemand {
		t.Fatalf("with an on-demand base of 1: %d batches, replacements %d; want the node replaced by a smaller on-demand one", len(plan.Batches), len(plan.Replacements))
	}
	// Where no on-demand node is cheaper, the node stays rather than go to spot.
	plan = build(map[string]string{capacitymix.OnDemandBaseAnnotationKey: "1"}, "m.large")
	if len(plan.Batches) != 0 {
		t.Fatalf("an on-demand m.large with a base of 1: %d batches; want none", len(plan.Batches))
	}
}

// Empty nodes go as far as the mix allows: of 3 empty on-demand nodes beside 2
// busy ones (1 on-demand, 1 spot whose pod selects spot, so it stays) in a pool
// of base 1 and 50% spot, 2 go and the third stays for the mix.
func TestEmptyNodesGoAsFarAsTheMixAllows(t *testing.T) {
	tc := newTestCluster("100%")
	tc.pool.Annotations = map[string]string{capacitymix.OnDemandBaseAnnotationKey: "1", capacitymix.SpotPercentAnnotationKey: "50"}
	tc.pool.Spec.Template.Spec.Requirements = []v1.NodePoolRequirement{{Key: v1.LabelCapacityType, RequirementBody: v1.RequirementBody{Operator: v1.OpIn, Values: []string{v1.CapacityTypeSpot, v1.CapacityTypeOnDemand}}}}
	tc.types = withSpot(testTypes())
	busy := tc.addNodeIn("m.large", "a", v1.CapacityTypeOnDemand)
	tc.addPod(busy.Name, "1500m", "256Mi", map[string]string{"app": "web"})
	spot := tc.addNodeIn("m.large", "a", v1.CapacityTypeSpot)
	tc.addPod(spot.Name, "1500m", "256Mi", map[string]string{"app": "web"}).Spec.NodeSelector = map[string]string{v1.LabelCapacityType: v1.CapacityTypeSpot}
	for range 3 {
		tc.addNodeIn("m.large", "a", v1.CapacityTypeOnDemand)
	}
	plan, _ := tc.decide(t)
	removed := 0
	for _, b := range plan.Batches {
		removed += len(b.Candidates)
	}
	if removed != 2 {
		t.Fatalf("%d nodes removed; want 2 of the 3 empty ones (the third keeps 2 on-demand beside 1 spot)", removed)
	}
}

// After a scale-in the pods left on spot nodes move to the empty on-demand nodes
// the mix needs, and the spot nodes go: with 3 one-node pods on 1 on-demand and 2
// spot nodes beside 3 empty on-demand ones (base 2, 50% spot), no empty node may
// go alone (5 nodes allow 1 spot), but both spot nodes and one empty on-demand
// node may, leaving 3 on-demand nodes for the 3 pods, in one pass (the emptiness
// batch counts the consolidation batch's spot nodes as gone). With more
// candidates than the exhaustive search tries (12 nodes, 6 pods) the same holds.
func TestScaleInMovesPodsOffSpotForTheMix(t *testing.T) {
	for _, tc := range []struct {
		name                              string
		busyOnDemand, spot, emptyOnDemand int
	}{
		{"6 nodes", 1, 2, 3},
		{"12 nodes", 1, 5, 6},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cl := newTestCluster("100%")
			cl.pool.Annotations = map[string]string{capacitymix.OnDemandBaseAnnotationKey: "2", capacitymix.SpotPercentAnnotationKey: "50"}
			cl.pool.Spec.Template.Spec.Requirements = []v1.NodePoolRequirement{{Key: v1.LabelCapacityType, RequirementBody: v1.RequirementBody{Operator: v1.OpIn, Values: []string{v1.CapacityTypeSpot, v1.CapacityTypeOnDemand}}}}
			cl.types = withSpot(testTypes())
			for range tc.busyOnDemand {
				n := cl.addNodeIn("m.large", "a", v1.CapacityTypeOnDemand)
				cl.addPod(n.Name, "1500m", "256Mi", map[string]string{"app": "web"})
			}
			for range tc.spot {
				n := cl.addNodeIn("m.large", "a", v1.CapacityTypeSpot)
				cl.addPod(n.Name, "1500m", "256Mi", map[string]string{"app": "web"})
			}
			for range tc.emptyOnDemand {
				cl.addNodeIn("m.large", "a", v1.CapacityTypeOnDemand)
			}
			plan, _ := cl.decide(t)
			var gone capacitymix.Counts
			for _, b := range plan.Batches {
				if len(b.Replacements) > 0 {
					t.Fatalf("batch %s launches nodes; want the pods on the empty on-demand nodes", b)
				}
				for _, c := range b.Candidates {
					gone = gone.With(c.Claim)
				}
			}
			pods := tc.busyOnDemand + tc.spot
			left := capacitymix.Counts{OnDemand: tc.busyOnDemand + tc.emptyOnDemand - gone.OnDemand, Spot: tc.spot - gone.Spot}
			mix := capacitymix.Mix{OnDemandBase: 2, SpotPercent: 50}
			if gone.Spot == 0 || !mix.Holds(left) || left.OnDemand+left.Spot != pods {
				t.Fatalf("removes %s, leaving %s for %d pods; want spot nodes gone, the mix held and one node a pod", gone, left, pods)
			}
		})
	}
}
