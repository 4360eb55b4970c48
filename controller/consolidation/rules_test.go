package consolidation

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/controller/scheduling"
)

func instanceType(name string, price float64, capacityType string) *scheduling.InstanceType {
	return scheduling.NewInstanceType(name, map[string]string{v1.LabelArch: "amd64"},
		corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("4Gi"), corev1.ResourcePods: resource.MustParse("29")},
		[]scheduling.Offering{{Zone: "a", CapacityType: capacityType, Price: price, Available: true}}, scheduling.DefaultAllocatableSettings())
}

func plan(types ...*scheduling.InstanceType) *scheduling.NodeClaimPlan {
	names := make([]string, len(types))
	for i, it := range types {
		names[i] = it.Name
	}
	reqs := scheduling.NewRequirements(scheduling.MustRequirement(v1.LabelInstanceType, v1.OpIn, names...))
	o, _ := scheduling.CheapestOffering(types[0], reqs)
	return &scheduling.NodeClaimPlan{InstanceTypeOptions: types, InstanceType: types[0], Offering: o, Requirements: reqs}
}

// TestNarrowToCheaper: a replacement keeps only the types under its ceiling, and
// spot is replaced by spot only behind the gate, with choice.
func TestNarrowToCheaper(t *testing.T) {
	one := func(price float64) []float64 { return []float64{price} }
	p := plan(instanceType("small", 0.10, v1.CapacityTypeOnDemand), instanceType("same", 0.20, v1.CapacityTypeOnDemand), instanceType("big", 0.40, v1.CapacityTypeOnDemand))
	if !narrowToCheaper([]*scheduling.NodeClaimPlan{p}, one(0.20), nil, false, false) {
		t.Fatal("a cheaper type was not accepted")
	}
	if len(p.InstanceTypeOptions) != 1 || p.InstanceTypeOptions[0].Name != "small" || !p.Requirements.Get(v1.LabelInstanceType).Has("small") || p.Requirements.Get(v1.LabelInstanceType).Has("same") {
		t.Errorf("options narrowed to %v, requirement %v; want only the cheaper small", p.InstanceTypeOptions, p.Requirements.Get(v1.LabelInstanceType))
	}
	if narrowToCheaper([]*scheduling.NodeClaimPlan{plan(instanceType("same", 0.20, v1.CapacityTypeOnDemand))}, one(0.20), nil, false, false) {
		t.Error("a replacement at the same price was accepted")
	}
	two := []*scheduling.NodeClaimPlan{plan(instanceType("a", 0.10, v1.CapacityTypeOnDemand)), plan(instanceType("b", 0.15, v1.CapacityTypeOnDemand))}
	if narrowToCheaper(two, []float64{0.10, 0.15}, nil, false, false) {
		t.Error("two replacements each at their ceiling were accepted")
	}

	var many []*scheduling.InstanceType
	for i := 0; i < MinSpotToSpotOptions+3; i++ {
		many = append(many, instanceType(fmt.Sprintf("spot-%02d", i), 0.1+float64(i)*0.01, v1.CapacityTypeSpot))
	}
	if narrowToCheaper([]*scheduling.NodeClaimPlan{plan(many...)}, one(1.0), nil, true, false) {
		t.Error("spot replaced by spot without the SpotToSpotConsolidation gate")
	}
	wide := plan(many...)
	if !narrowToCheaper([]*scheduling.NodeClaimPlan{wide}, one(1.0), nil, true, true) {
		t.Errorf("spot-to-spot with %d cheaper options refused behind the gate", len(many))
	}
	if len(wide.InstanceTypeOptions) != MinSpotToSpotOptions || wide.InstanceTypeOptions[MinSpotToSpotOptions-1].Name != "spot-14" || !wide.Requirements.Get(v1.LabelCapacityType).Has(v1.CapacityTypeSpot) || wide.Requirements.Get(v1.LabelCapacityType).Has(v1.CapacityTypeOnDemand) {
		t.Errorf("spot-to-spot launches from %v with capacity type %v; want the %d cheapest, spot only", wide.InstanceTypeOptions, wide.Requirements.Get(v1.LabelCapacityType), MinSpotToSpotOptions)
	}
	if narrowToCheaper([]*scheduling.NodeClaimPlan{plan(many[:MinSpotToSpotOptions-1]...)}, one(1.0), nil, true, true) {
		t.Errorf("spot-to-spot with only %d cheaper options accepted", MinSpotToSpotOptions-1)
	}
	// minValues above 15 asks for more cheaper types, and launches from that many.
	withMin := plan(many...)
	minValues := MinSpotToSpotOptions + 2
	withMin.Requirements[v1.LabelInstanceType].MinValues = &minValues
	if !narrowToCheaper([]*scheduling.NodeClaimPlan{withMin}, one(1.0), nil, true, true) || len(withMin.InstanceTypeOptions) != minValues || *withMin.Requirements.Get(v1.LabelInstanceType).MinValues != minValues {
		t.Errorf("minValues %d: launches from %d types (requirement %v); want %d", minValues, len(withMin.InstanceTypeOptions), withMin.Requirements.Get(v1.LabelInstanceType), minValues)
	}
	tooFew := plan(many...)
	minValues = len(many) + 1
	tooFew.Requirements[v1.LabelInstanceType].MinValues = &minValues
	if narrowToCheaper([]*scheduling.NodeClaimPlan{tooFew}, one(1.0), nil, true, true) {
		t.Errorf("spot-to-spot accepted with %d cheaper types under minValues %d", len(many), minValues)
	}
	// A replacement that may be spot is spot-to-spot even when on-demand is the
	// cheaper offering today; only a pool that launches no spot replaces spot with
	// on-demand.
	if narrowToCheaper([]*scheduling.NodeClaimPlan{plan(instanceType("od", 0.5, v1.CapacityTypeOnDemand))}, one(1.0), nil, true, false) {
		t.Error("a spot node was replaced, spot-to-spot off, by a node that may be spot")
	}
	onDemand := plan(instanceType("od", 0.5, v1.CapacityTypeOnDemand))
	onDemand.Requirements.Add(scheduling.MustRequirement(v1.LabelCapacityType, v1.OpIn, v1.CapacityTypeOnDemand))
	if !narrowToCheaper([]*scheduling.NodeClaimPlan{onDemand}, one(1.0), nil, true, false) {
		t.Error("a spot node of a pool that now launches only on-demand could not be replaced by cheaper on-demand")
	}
}

// A replacement priced at its cheapest offering (spot in zone b at $0.20) may
// launch in zone a at $1.00 when its requirements allow both zones: EC2 picks.
// An option is kept only if its worst launch price is under the ceiling.
func TestReplacementIsPricedAtItsWorstLaunch(t *testing.T) {
	zonal := scheduling.NewInstanceType("zonal", map[string]string{v1.LabelArch: "amd64"},
		corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("4Gi"), corev1.ResourcePods: resource.MustParse("29")},
		[]scheduling.Offering{{Zone: "a", CapacityType: v1.CapacityTypeOnDemand, Price: 1.0, Available: true}, {Zone: "b", CapacityType: v1.CapacityTypeOnDemand, Price: 0.2, Available: true}},
		scheduling.DefaultAllocatableSettings())
	if narrowToCheaper([]*scheduling.NodeClaimPlan{plan(zonal)}, []float64{0.5}, nil, false, false) {
		t.Error("a replacement that may launch at $1.00/h was taken for a $0.50/h node")
	}
	pinned := plan(zonal)
	pinned.Requirements.Add(scheduling.MustRequirement(v1.LabelTopologyZone, v1.OpIn, "b"))
	if !narrowToCheaper([]*scheduling.NodeClaimPlan{pinned}, []float64{0.5}, nil, false, false) {
		t.Error("a replacement pinned to the zone where it costs $0.20/h was refused for a $0.50/h node")
	}
}

// A replacement priced as spot is launched as spot: were spot short, an
// on-demand launch would cost more than the node it replaces.
func TestReplacementPricedAsSpotIsPinnedToSpot(t *testing.T) {
	both := scheduling.NewInstanceType("both", map[string]string{v1.LabelArch: "amd64"},
		corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("4Gi"), corev1.ResourcePods: resource.MustParse("29")},
		[]scheduling.Offering{{Zone: "a", CapacityType: v1.CapacityTypeSpot, Price: 0.04, Available: true}, {Zone: "a", CapacityType: v1.CapacityTypeOnDemand, Price: 0.12, Available: true}},
		scheduling.DefaultAllocatableSettings())
	p := plan(both)
	if !narrowToCheaper([]*scheduling.NodeClaimPlan{p}, []float64{0.10}, nil, false, false) {
		t.Fatal("a replacement at $0.04/h spot was refused for a $0.10/h node")
	}
	if ct := p.Requirements.Get(v1.LabelCapacityType); !ct.Has(v1.CapacityTypeSpot) || ct.Has(v1.CapacityTypeOnDemand) {
		t.Errorf("capacity type %v; want spot only", ct)
	}
}

// Karpenter's filterOutSameInstanceType: a replacement of several nodes may not be
// one of their own types unless it is cheaper than the cheapest removed node of
// that type; the other options stay.
func TestReplacementIsNotTheRemovedNodesOwnType(t *testing.T) {
	removed := []*Candidate{{InstanceType: "m.large", Price: 0.2}, {InstanceType: "m.xlarge", Price: 0.4}}
	p := plan(instanceType("c.large", 0.15, v1.CapacityTypeOnDemand), instanceType("m.large", 0.2, v1.CapacityTypeOnDemand), instanceType("r.large", 0.25, v1.CapacityTypeOnDemand))
	if !narrowToCheaper([]*scheduling.NodeClaimPlan{p}, []float64{0.6}, removed, false, false) {
		t.Fatal("a cheaper type of another kind was refused")
	}
	for _, it := range p.InstanceTypeOptions {
		if it.Name != "c.large" {
			t.Errorf("option %s kept: it is a removed node's own type, or no cheaper than one", it.Name)
		}
	}
	if narrowToCheaper([]*scheduling.NodeClaimPlan{plan(instanceType("m.large", 0.2, v1.CapacityTypeOnDemand))}, []float64{0.6}, removed, false, false) {
		t.Error("two nodes were replaced by one of their own types")
	}
	spot := plan(instanceType("m.large", 0.08, v1.CapacityTypeSpot))
	spot.Requirements.Add(scheduling.MustRequirement(v1.LabelCapacityType, v1.OpIn, v1.CapacityTypeSpot))
	if !narrowToCheaper([]*scheduling.NodeClaimPlan{spot}, []float64{0.6}, removed, false, false) {
		t.Error("the same type as spot, cheaper than the on-demand node it replaces, was refused")
	}
}

func TestBlocker(t *testing.T) {
	yes := true
	owned := func(name string, annotations map[string]string) *corev1.Pod {
		p := &corev1.Pod{}
		p.Name, p.Namespace, p.Annotations, p.Labels = name, "default", annotations, map[string]string{"app": "web"}
		p.OwnerReferences = []metav1.OwnerReference{{Kind: "ReplicaSet", Name: "web", Controller: &yes}}
		return p
	}
	node := &corev1.Node{}
	pdb := policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec: policyv1.PodDisruptionBudgetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}}
	if why := blocker(node, []*corev1.Pod{owned("a", nil)}, nil, testNow); why != "" {
		t.Errorf("an ordinary pod blocks: %s", why)
	}
	if why := blocker(node, []*corev1.Pod{owned("a", map[string]string{v1.DoNotDisruptAnnotationKey: "true"})}, nil, testNow); !strings.Contains(why, "do-not-disrupt") {
		t.Errorf("do-not-disrupt pod: %q", why)
	}
	// A duration counts from the pod's start: protected for its first half hour.
	timed := owned("timed", map[string]string{v1.DoNotDisruptAnnotationKey: "30m"})
	timed.Status.StartTime = &metav1.Time{Time: testNow.Add(-10 * time.Minute)}
	if why := blocker(node, []*corev1.Pod{timed}, nil, testNow); !strings.Contains(why, "until 2026-11-23T12:20:00Z") {
		t.Errorf("do-not-disrupt for 30m, started 10m ago: %q", why)
	}
	if why := blocker(node, []*corev1.Pod{timed}, nil, testNow.Add(21*time.Minute)); why != "" {
		t.Errorf("do-not-disrupt for 30m, started 31m ago, still blocks: %q", why)
	}
	// A pod no controller owns is evicted like any other, as Karpenter v1 does.
	bare := owned("bare", nil)
	bare.OwnerReferences = nil
	if why := blocker(node, []*corev1.Pod{bare}, nil, testNow); why != "" {
		t.Errorf("a pod without a controller blocks: %q", why)
	}
	if why := blocker(node, []*corev1.Pod{owned("a", nil)}, []policyv1.PodDisruptionBudget{pdb}, testNow); !strings.Contains(why, "pdb default/web") {
		t.Errorf("PDB allowing no disruption: %q", why)
	}
	pdb.Status.DisruptionsAllowed = 1
	if why := blocker(node, []*corev1.Pod{owned("a", nil)}, []policyv1.PodDisruptionBudget{pdb}, testNow); why != "" {
		t.Errorf("PDB allowing one disruption blocks: %q", why)
	}
	// As in Karpenter, a DaemonSet or mirror pod's do-not-disrupt holds the node (its
	// end ends them), and so does a PDB over a DaemonSet pod; a mirror pod's PDB
	// does not (the eviction API cannot evict it), nor does a finished or
	// terminating pod's annotation.
	daemon := owned("ds", map[string]string{v1.DoNotDisruptAnnotationKey: "true"})
	daemon.OwnerReferences[0].Kind = "DaemonSet"
	if why := blocker(node, []*corev1.Pod{daemon}, nil, testNow); !strings.Contains(why, "pod default/ds has the karpenter.sh/do-not-disrupt annotation") {
		t.Errorf("a do-not-disrupt daemonset pod: %q", why)
	}
	pdb.Status.DisruptionsAllowed = 0
	daemon.Annotations = nil
	if why := blocker(node, []*corev1.Pod{daemon}, []policyv1.PodDisruptionBudget{pdb}, testNow); !strings.Contains(why, "pdb default/web") {
		t.Errorf("a daemonset pod under a PDB allowing nothing: %q", why)
	}
	mirror := owned("static", map[string]string{corev1.MirrorPodAnnotationKey: "x", v1.DoNotDisruptAnnotationKey: "true"})
	if why := blocker(node, []*corev1.Pod{mirror}, nil, testNow); !strings.Contains(why, "pod default/static has") {
		t.Errorf("a do-not-disrupt mirror pod: %q", why)
	}
	delete(mirror.Annotations, v1.DoNotDisruptAnnotationKey)
	if why := blocker(node, []*corev1.Pod{mirror}, []policyv1.PodDisruptionBudget{pdb}, testNow); why != "" {
		t.Errorf("a mirror pod's PDB blocks: %q", why)
	}
	done := owned("done", map[string]string{v1.DoNotDisruptAnnotationKey: "true"})
	done.Status.Phase = corev1.PodSucceeded
	leaving := owned("leaving", map[string]string{v1.DoNotDisruptAnnotationKey: "true"})
	leaving.DeletionTimestamp = &metav1.Time{Time: testNow}
	if why := blocker(node, []*corev1.Pod{done, leaving}, []policyv1.PodDisruptionBudget{pdb}, testNow); why != "" {
		t.Errorf("a finished and a terminating pod block: %q", why)
	}
	node.Annotations = map[string]string{v1.DoNotDisruptAnnotationKey: "true"}
	if why := blocker(node, nil, nil, testNow); !strings.Contains(why, "node has") {
		t.Errorf("do-not-disrupt node: %q", why)
	}
}

// spotTypes are n types of 2 cpu and 8Gi offered as spot and on-demand in zone a,
// spot at a third of on-demand, cheapest first, and a dear 16-cpu type.
func spotTypes(n int) []*scheduling.InstanceType {
	var out []*scheduling.InstanceType
	add := func(name string, cpu int64, memory string, onDemand float64) {
		out = append(out, scheduling.NewInstanceType(name, map[string]string{v1.LabelArch: "amd64", v1.LabelOS: "linux"},
			corev1.ResourceList{corev1.ResourceCPU: *resource.NewQuantity(cpu, resource.DecimalSI), corev1.ResourceMemory: resource.MustParse(memory), corev1.ResourcePods: resource.MustParse("110"), corev1.ResourceEphemeralStorage: resource.MustParse("20Gi")},
			[]scheduling.Offering{{Zone: "a", CapacityType: v1.CapacityTypeSpot, Price: onDemand / 3, Available: true}, {Zone: "a", CapacityType: v1.CapacityTypeOnDemand, Price: onDemand, Available: true}},
			scheduling.DefaultAllocatableSettings()))
	}
	for i := 0; i < n; i++ {
		add(fmt.Sprintf("small-%02d", i), 2, "8Gi", 0.10+float64(i)*0.001)
	}
	add("big", 16, "64Gi", 0.80)
	return out
}

// A spot node whose one small pod fits nowhere else: with spot-to-spot
// consolidation off it stays (Karpenter does not replace spot with on-demand, nor
// with spot); with it on, it is replaced by spot only with at least 15 cheaper
// types to launch from, and then from the 15 cheapest.
func TestSpotNodeReplacementRules(t *testing.T) {
	for _, tt := range []struct {
		name       string
		types      int
		spotToSpot bool
		minValues  int
		// noSmallSpot: the small types have no spot capacity, on-demand is cheaper.
		noSmallSpot bool
		replaced    bool
		options     int
	}{
		{name: "spot-to-spot off", types: 20, spotToSpot: false},
		{name: "spot-to-spot off, cheaper on-demand", types: 20, spotToSpot: false, noSmallSpot: true},
		{name: "spot-to-spot on, 20 cheaper types", types: 20, spotToSpot: true, replaced: true, options: MinSpotToSpotOptions},
		{name: "spot-to-spot on, 14 cheaper types", types: 14, spotToSpot: true},
		{name: "spot-to-spot on, minValues 18 of 20 types", types: 20, spotToSpot: true, minValues: 18, replaced: true, options: 18},
		{name: "spot-to-spot on, minValues 18 of 17 types", types: 17, spotToSpot: true, minValues: 18},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tc := newTestCluster("100%")
			tc.types = spotTypes(tt.types)
			if tt.noSmallSpot {
				for _, it := range tc.types[:tt.types] {
					it.Offerings[0].Available = false
				}
			}
			tc.spotToSpot = tt.spotToSpot
			if tt.minValues > 0 {
				tc.pool.Spec.Template.Spec.Requirements = []v1.NodePoolRequirement{{Key: v1.LabelInstanceType,
					RequirementBody: v1.RequirementBody{Operator: v1.OpExists, MinValues: &tt.minValues}}}
			}
			node := tc.addNodeIn("big", "a", v1.CapacityTypeSpot).Name
			tc.addPod(node, "1", "1Gi", map[string]string{"app": "web"})
			plan, _ := tc.decide(t)
			if !tt.replaced {
				if len(plan.Remove) != 0 || len(plan.Replacements) != 0 {
					t.Fatalf("removes %v, launches %s; want the spot node kept", names(plan.Remove), typeNames(plan.Replacements))
				}
				return
			}
			if len(plan.Remove) != 1 || len(plan.Replacements) != 1 {
				t.Fatalf("removes %v, launches %s; want the spot node replaced", names(plan.Remove), typeNames(plan.Replacements))
			}
			r := plan.Replacements[0]
			ct := r.Requirements.Get(v1.LabelCapacityType)
			if len(r.InstanceTypeOptions) != tt.options || !ct.Has(v1.CapacityTypeSpot) || ct.Has(v1.CapacityTypeOnDemand) {
				t.Errorf("the replacement launches from %d types as %v; want the %d cheapest, spot only", len(r.InstanceTypeOptions), ct, tt.options)
			}
		})
	}
	// Its pod fitting on another node, the spot node is deleted whatever the gate.
	tc := newTestCluster("100%")
	tc.types = spotTypes(3)
	node := tc.addNodeIn("big", "a", v1.CapacityTypeSpot).Name
	tc.addPod(node, "1", "1Gi", map[string]string{"app": "web"})
	tc.addNodeIn("small-00", "a", v1.CapacityTypeSpot)
	plan, _ := tc.decide(t)
	if len(plan.Remove) != 1 || plan.Remove[0].Node.Name != node || len(plan.Replacements) != 0 {
		t.Errorf("removes %v, launches %s; want the big spot node deleted, its pod moved to the small one", names(plan.Remove), typeNames(plan.Replacements))
	}
}

// A pod no controller owns does not keep its node: Karpenter v1 evicts it like any
// other. The plan marks it, as it will not come back.
func TestPodWithoutAControllerIsEvictedAndMarked(t *testing.T) {
	tc := newTestCluster("100%")
	tc.addNode("m.large", 2, "500m")
	tc.addNode("m.large", 1, "500m")
	tc.pods[2].OwnerReferences = nil // the one pod of node-1
	plan, _ := tc.decide(t)
	if got := names(plan.Remove); len(got) != 1 || got[0] != "node-1" {
		t.Fatalf("removes %v; want node-1, whose one pod (no controller) fits on node-0: %v", got, plan.Blocked)
	}
	if len(plan.Moves) != 1 || !plan.Moves[0].NotRecreated || plan.Moves[0].Pod.Name != tc.pods[2].Name || plan.Moves[0].To != "node-0" {
		t.Errorf("moves %+v; want %s to node-0, marked not recreated", plan.Moves, tc.pods[2].Name)
	}
	// Owned pods are recreated.
	tc.pods[2].OwnerReferences = tc.pods[0].OwnerReferences
	plan, _ = tc.decide(t)
	if len(plan.Moves) != 1 || plan.Moves[0].NotRecreated {
		t.Errorf("moves %+v; want one move of an owned pod, not marked", plan.Moves)
	}
}

// A PodDisruptionBudget that allows no disruption holds its Ready pods; under
// unhealthyPodEvictionPolicy AlwaysAllow the eviction API lets its pods that are
// not Ready go whatever it allows, and so does consolidation. IfHealthyBudget, the
// default, keeps such pods until the budget allows.
func TestUnhealthyPodEvictionPolicy(t *testing.T) {
	always, ifHealthy := policyv1.AlwaysAllow, policyv1.IfHealthyBudget
	for _, tt := range []struct {
		name    string
		policy  *policyv1.UnhealthyPodEvictionPolicyType
		ready   bool
		removed int
	}{
		{"AlwaysAllow, pods not Ready", &always, false, 2},
		{"AlwaysAllow, pods Ready", &always, true, 0},
		{"IfHealthyBudget, pods not Ready", &ifHealthy, false, 0},
		{"no policy, pods not Ready", nil, false, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tc := newTestCluster("100%")
			tc.addNode("m.xlarge", 1, "500m")
			tc.addNode("m.xlarge", 1, "500m")
			tc.addNode("m.2xlarge", 0, "500m")
			for i := range tc.pods {
				tc.pods[i].Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse}}
				if tt.ready {
					tc.pods[i].Status.Conditions[0].Status = corev1.ConditionTrue
				}
			}
			tc.pdbs = []policyv1.PodDisruptionBudget{{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
				Spec: policyv1.PodDisruptionBudgetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}, UnhealthyPodEvictionPolicy: tt.policy}}}
			plan, _ := tc.decide(t)
			var withPods []string
			for _, c := range plan.Remove {
				if !c.Empty() {
					withPods = append(withPods, c.Node.Name)
				}
			}
			if len(withPods) != tt.removed || len(drainingNow(plan)) != tt.removed {
				t.Errorf("removes %v (draining now %v); want %d nodes with pods", withPods, drainingNow(plan), tt.removed)
			}
			if tt.removed == 0 {
				for _, b := range plan.Blocked {
					if b.Candidate.Node.Name == "node-0" && !strings.Contains(b.Reason, "pdb default/web prevents evicting pod") {
						t.Errorf("node-0 kept because %q; want the PDB", b.Reason)
					}
				}
			}
		})
	}
}

// A node whose only pod is a terminating StatefulSet pod is not empty: the pod's
// successor, of the same name, needs its room. A terminating pod of any other
// owner is on its way out and leaves the node empty.
func TestTerminatingStatefulSetPodIsReschedulable(t *testing.T) {
	for _, owner := range []string{"StatefulSet", "ReplicaSet"} {
		t.Run(owner, func(t *testing.T) {
			tc := newTestCluster("100%")
			tc.addNode("m.large", 1, "1")
			tc.pods[0].OwnerReferences[0].Kind = owner
			tc.pods[0].DeletionTimestamp = &metav1.Time{Time: testNow.Add(-time.Second)}
			plan, cl := tc.decide(t)
			if owner == "ReplicaSet" {
				if len(plan.Batches) != 1 || plan.Batches[0].Reason != v1.DisruptionReasonEmpty {
					t.Errorf("batches %v; want the node removed as empty", plan.Batches)
				}
				return
			}
			if len(cl.Candidates) != 1 || cl.Candidates[0].Empty() {
				t.Fatalf("the node of a terminating StatefulSet pod counts as empty")
			}
			// m.large is the cheapest type and nothing else has room: it stays.
			if len(plan.Remove) != 0 || len(plan.Blocked) != 1 || !strings.HasPrefix(plan.Blocked[0].Reason, "no cheaper fit") {
				t.Errorf("removes %v, kept %v; want the node kept, no cheaper fit", names(plan.Remove), plan.Blocked)
			}
		})
	}
}

// TestStaticNodePoolIsNotConsolidated: the nodes of a static pool (spec.replicas)
// are never removed or replaced by consolidation, empty or not; their count is
// the pool's.
func TestStaticNodePoolIsNotConsolidated(t *testing.T) {
	tc := newTestCluster("100%")
	replicas := int64(3)
	tc.pool.Spec.Replicas = &replicas
	tc.addNode("m.2xlarge", 1, "500m")
	tc.addNode("m.xlarge", 0, "")
	tc.addNode("m.xlarge", 0, "")
	plan, _ := tc.decide(t)
	if len(plan.Remove) != 0 || len(plan.Batches) != 0 {
		t.Fatalf("removes %v from a static pool", names(plan.Remove))
	}
	for _, b := range plan.Blocked {
		if !strings.Contains(b.Reason, "is static (spec.replicas)") {
			t.Errorf("%s kept because %q; want the static pool named", b.Candidate.Node.Name, b.Reason)
		}
	}
	if len(plan.Blocked) != 3 {
		t.Errorf("%d nodes reported kept, want 3", len(plan.Blocked))
	}
}
