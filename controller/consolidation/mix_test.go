package consolidation

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"

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
// go first (5 nodes allow 1 spot). The first pass moves the spot nodes' pods to
// empty on-demand nodes and removes the spot nodes; the next removes the
// on-demand node left empty, leaving 3 on-demand nodes for the 3 pods. (One pass
// could remove all three, but the controller runs its batches apart, and the
// on-demand node removed without the spot ones would break the mix.) With more
// candidates than the exhaustive search tries (12 nodes, 6 pods) the same holds.
func TestScaleInMovesPodsOffSpotForTheMix(t *testing.T) {
	mix := capacitymix.Mix{OnDemandBase: 2, SpotPercent: 50}
	for _, tc := range []struct {
		name                              string
		busyOnDemand, spot, emptyOnDemand int
	}{
		{"6 nodes", 1, 2, 3},
		{"12 nodes", 1, 5, 6},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cl := mixCluster(mix, "100%")
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
			pods := tc.busyOnDemand + tc.spot
			plan, _ := cl.decide(t)
			if gone := cl.carryOut(t, plan); gone.Spot != tc.spot || gone.OnDemand != 0 {
				t.Fatalf("first pass removes %s; want the %d spot nodes and no on-demand one", gone, tc.spot)
			}
			// The next pass may also replace busy on-demand nodes with larger ones;
			// its emptiness batch is what this is about.
			plan, _ = cl.decide(t)
			plan.Batches = slices.DeleteFunc(plan.Batches, func(b *Batch) bool { return b.Reason != v1.DisruptionReasonEmpty })
			cl.carryOut(t, plan)
			if left := capacitymix.CountPool(cl.claims, "default"); !mix.Holds(left) || left.OnDemand+left.Spot != pods {
				t.Fatalf("after two passes %s for %d pods; want the mix held and one node a pod", left, pods)
			}
		})
	}
}

// mixCluster is a pool of the mix that may launch spot and on-demand, spot at
// 0.3 of on-demand.
func mixCluster(mix capacitymix.Mix, budget string) *testCluster {
	tc := newTestCluster(budget)
	tc.pool.Annotations = map[string]string{capacitymix.OnDemandBaseAnnotationKey: fmt.Sprint(mix.OnDemandBase), capacitymix.SpotPercentAnnotationKey: fmt.Sprint(mix.SpotPercent)}
	tc.pool.Spec.Template.Spec.Requirements = []v1.NodePoolRequirement{{Key: v1.LabelCapacityType, RequirementBody: v1.RequirementBody{Operator: v1.OpIn, Values: []string{v1.CapacityTypeSpot, v1.CapacityTypeOnDemand}}}}
	tc.types = withSpot(testTypes())
	return tc
}

// carryOut does what the plan's batches do, as if every one went whole: their
// candidates go, their pods go where the plan moves them. It returns the nodes
// removed; a plan that launches nodes is not carried out here.
func (tc *testCluster) carryOut(t *testing.T, plan *Plan) capacitymix.Counts {
	t.Helper()
	var gone capacitymix.Counts
	names := sets.New[string]()
	for _, b := range plan.Batches {
		if len(b.Replacements) > 0 {
			t.Fatalf("batch %s launches nodes", b)
		}
		for _, c := range b.Candidates {
			gone = gone.With(c.Claim)
			names.Insert(c.Node.Name)
		}
	}
	to := map[types.UID]string{}
	for _, m := range plan.Moves {
		to[m.Pod.UID] = m.To
	}
	for i := range tc.pods {
		if p := &tc.pods[i]; names.Has(p.Spec.NodeName) {
			p.Spec.NodeName = to[p.UID]
		}
	}
	tc.nodes = slices.DeleteFunc(tc.nodes, func(n corev1.Node) bool { return names.Has(n.Name) })
	tc.claims = slices.DeleteFunc(tc.claims, func(nc v1.NodeClaim) bool { return names.Has(nc.Status.NodeName) })
	return gone
}

// When the budget lets part of a consolidation go, the part is planned again
// alone; under a mix the part's own plan may break it where the whole target did
// not. Something of it still goes, within the mix: 6 m.2xlarge nodes (3
// on-demand, 3 spot, at most 50% spot), one small pod each, budget 4.
func TestBudgetedPartOfAConsolidationKeepsTheMix(t *testing.T) {
	tc := mixCluster(capacitymix.Mix{SpotPercent: 50}, "4")
	for range 3 {
		for _, ct := range []string{v1.CapacityTypeOnDemand, v1.CapacityTypeSpot} {
			tc.addPod(tc.addNodeIn("m.2xlarge", "a", ct).Name, "1500m", "256Mi", map[string]string{"app": "web"})
		}
	}
	plan, cl := tc.decide(t)
	started := 0
	for _, b := range plan.Batches {
		started += len(b.Candidates)
	}
	if started == 0 {
		t.Fatalf("the target removes %d and launches %d, but no batch starts: %v", len(plan.Remove), len(plan.Replacements), plan.Blocked)
	}
	checkMixesKept(t, cl, plan)
}

// A replacement the engine plans on-demand where spot is dearer stays
// on-demand when the mix allows no spot: narrowing it to what is cheaper does
// not make it spot behind the mix's back.
func TestOnDemandReplacementStaysOnDemandUnderTheMix(t *testing.T) {
	tc := mixCluster(capacitymix.Mix{SpotPercent: 0}, "100%")
	for _, it := range tc.types {
		for i := range it.Offerings {
			if it.Offerings[i].CapacityType == v1.CapacityTypeSpot {
				it.Offerings[i].Price = it.Offerings[0].Price * 1.2
			}
		}
		it.Refresh()
	}
	tc.addNode("m.2xlarge", 2, "500m")
	tc.addNode("m.large", 1, "1500m")
	plan, cl := tc.decide(t)
	if len(plan.Batches) == 0 {
		t.Fatalf("no batch: %v; want the m.2xlarge replaced by a smaller on-demand node", plan.Blocked)
	}
	for _, b := range plan.Batches {
		for _, r := range b.Replacements {
			if capacitymix.PlanMaySpot(r) {
				t.Errorf("replacement %s (%s) may launch as spot; the mix allows none", r.InstanceType.Name, r.Offering.CapacityType)
			}
		}
	}
	checkMixesKept(t, cl, plan)
}

// Over random clusters under a mix (sizes, capacity types, pods, bases, shares,
// budgets), no batch the plan starts, nor any part of a batch that only removes
// nodes, with the batches before it done at their worst, makes a pool's mix
// worse than it is, and a plan starts something wherever the same cluster
// without the mix would start a removal-only batch of spot nodes.
func TestBatchesNeverBreakAMix(t *testing.T) {
	rng := rand.New(rand.NewPCG(48, 12))
	sizes := []string{"m.large", "m.xlarge", "m.2xlarge"}
	cpus := []string{"250m", "500m", "1500m", "3"}
	for i := range 400 {
		mix := capacitymix.Mix{OnDemandBase: rng.IntN(4), SpotPercent: []int{0, 30, 50, 70, 100}[rng.IntN(5)]}
		tc := mixCluster(mix, []string{"100%", "50%", "2", "1"}[rng.IntN(4)])
		tc.spotToSpot = rng.IntN(2) == 0
		for range 2 + rng.IntN(9) {
			ct := v1.CapacityTypeOnDemand
			if rng.IntN(2) == 0 {
				ct = v1.CapacityTypeSpot
			}
			n := tc.addNodeIn(sizes[rng.IntN(len(sizes))], "a", ct)
			for range rng.IntN(3) {
				tc.addPod(n.Name, cpus[rng.IntN(len(cpus))], "256Mi", map[string]string{"app": "web"})
			}
		}
		plan, cl := tc.decide(t)
		if !checkMixesKept(t, cl, plan) {
			t.Fatalf("cluster %d (%s, budget %s) breaks its mix", i, mix, tc.pool.Spec.Disruption.Budgets[0].Nodes)
		}
	}
}

// checkMixesKept checks the plan's batches, each with the ones before it done
// at their worst (the on-demand removals of a removal-only batch without its
// spot ones; a batch with replacements whole), against each pool's mix now.
func checkMixesKept(t *testing.T, cl *Cluster, plan *Plan) bool {
	t.Helper()
	mixes := capacitymix.Mixes(cl.Snapshot.Pools)
	now := map[string]capacitymix.Counts{}
	for _, nc := range cl.Snapshot.Claims {
		now[nc.Labels[v1.LabelNodePool]] = now[nc.Labels[v1.LabelNodePool]].With(nc)
	}
	worst := maps.Clone(now)
	for _, b := range plan.Batches {
		for _, c := range b.Candidates {
			if len(b.Replacements) > 0 || !capacitymix.MaySpot(c.Claim) {
				worst[c.Pool.Name] = worst[c.Pool.Name].Without(c.Claim)
			}
		}
		for _, r := range b.Replacements {
			worst[r.NodePool] = worst[r.NodePool].WithPlan(r)
		}
		for pool, mix := range mixes {
			if mix.Breaks(now[pool], worst[pool]) {
				t.Errorf("batch %s: nodepool %s from %s to %s at worst breaks %s", b, pool, now[pool], worst[pool], mix)
				return false
			}
		}
	}
	return true
}
