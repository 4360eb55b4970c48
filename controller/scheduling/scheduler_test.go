package scheduling

import (
	"math"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"

	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
)

func TestAllocatableFollowsEKSFormulas(t *testing.T) {
	it := makeInstanceType(typeSpec{"m5.large", "amd64", "2", "8Gi", 29, 0, 0.096})
	// cpu: 6% of the first core + 1% of the second = 70m.
	if got := it.Allocatable.MilliCPU; got != 1930 {
		t.Errorf("allocatable cpu = %dm, want 1930m", got)
	}
	// memory: 8Gi - (11*29+255)Mi kube-reserved - 100Mi eviction - 7.5% VM overhead.
	vm := 0.075
	want := int64(8<<30) - (11*29+255)<<20 - 100<<20 - int64(math.Ceil(float64(8<<30)*vm))
	if got := it.Allocatable.Memory; got != want {
		t.Errorf("allocatable memory = %d, want %d", got, want)
	}
	if it.Allocatable.Pods != 29 {
		t.Errorf("allocatable pods = %d, want 29", it.Allocatable.Pods)
	}
}

func TestRequirementAlgebra(t *testing.T) {
	cases := []struct {
		name      string
		a, b      *Requirement
		value     string
		wantHas   bool
		wantEmpty bool
	}{
		{"in ∩ in", MustRequirement("k", v1.OpIn, "a", "b"), MustRequirement("k", v1.OpIn, "b", "c"), "b", true, false},
		{"in ∩ notin", MustRequirement("k", v1.OpIn, "a", "b"), MustRequirement("k", v1.OpNotIn, "a"), "a", false, false},
		{"disjoint", MustRequirement("k", v1.OpIn, "a"), MustRequirement("k", v1.OpIn, "b"), "a", false, true},
		{"gt ∩ in", MustRequirement("k", v1.OpGt, "4"), MustRequirement("k", v1.OpIn, "2", "8"), "8", true, false},
		{"gt excludes", MustRequirement("k", v1.OpGt, "4"), MustRequirement("k", v1.OpIn, "2", "8"), "2", false, false},
		{"gte includes bound", MustRequirement("k", v1.OpGte, "4"), MustRequirement("k", v1.OpExists), "4", true, false},
		{"lte includes bound", MustRequirement("k", v1.OpLte, "4"), MustRequirement("k", v1.OpExists), "4", true, false},
		{"gt ∩ lt empty", MustRequirement("k", v1.OpGt, "4"), MustRequirement("k", v1.OpLt, "5"), "4", false, true},
		{"exists ∩ notin", MustRequirement("k", v1.OpExists), MustRequirement("k", v1.OpNotIn, "x"), "y", true, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.a.Intersection(tc.b)
			if got.Has(tc.value) != tc.wantHas {
				t.Errorf("Has(%q) = %v, want %v (%s)", tc.value, !tc.wantHas, tc.wantHas, got)
			}
			if got.Empty() != tc.wantEmpty {
				t.Errorf("Empty() = %v, want %v (%s)", !tc.wantEmpty, tc.wantEmpty, got)
			}
		})
	}
	if !MustRequirement("k", v1.OpNotIn, "x").AllowsAbsent() || MustRequirement("k", v1.OpExists).AllowsAbsent() {
		t.Error("NotIn must match nodes without the label and Exists must not")
	}
	if MustRequirement("k", v1.OpExists).Intersection(MustRequirement("k", v1.OpNotIn, "x")).AllowsAbsent() {
		t.Error("Exists ∩ NotIn must still require the label")
	}
	if _, err := NewRequirement("k", v1.OpGt, "x"); err == nil || !strings.Contains(err.Error(), "integer") {
		t.Errorf("Gt with a non-integer should be refused naming the fix, got %v", err)
	}
	if r := MustRequirement("failure-domain.beta.kubernetes.io/zone", v1.OpIn, "a"); r.Key != v1.LabelTopologyZone {
		t.Errorf("deprecated zone label should normalize, got %s", r.Key)
	}
}

func TestPacksPodsOntoCheapestFittingType(t *testing.T) {
	r := solve(t, pods(3, "p", "500m", "1Gi"), []*v1.NodePool{nodePool("default")})
	if len(r.Unschedulable) != 0 || len(r.NodeClaims) != 1 {
		t.Fatalf("want all pods on one claim, got %d claims, unschedulable %v", len(r.NodeClaims), r.Unschedulable)
	}
	nc := r.NodeClaims[0]
	if len(nc.Pods) != 3 {
		t.Fatalf("claim holds %d pods, want 3", len(nc.Pods))
	}
	// 1.5 cpu and 3Gi fit a c5.large's allocatable? cpu 1930m yes; memory ~2.9Gi no.
	// m6g.large (arm64, $0.077) is cheapest and holds them.
	if nc.InstanceType.Name != "m6g.large" {
		t.Errorf("instance type = %s, want m6g.large (cheapest that fits)", nc.InstanceType.Name)
	}
	if nc.Offering.CapacityType != v1.CapacityTypeOnDemand {
		t.Errorf("capacity type = %s, want on-demand (the pool allows only on-demand)", nc.Offering.CapacityType)
	}
	for _, it := range nc.InstanceTypeOptions {
		if !nc.Requests.Fits(it.Allocatable) {
			t.Errorf("option %s cannot hold the claim's requests", it.Name)
		}
	}
	for i := 1; i < len(nc.InstanceTypeOptions); i++ {
		if nc.InstanceTypeOptions[i-1].CheapestPrice > nc.InstanceTypeOptions[i].CheapestPrice {
			t.Errorf("options are not ordered by price")
		}
	}
}

func TestConstraints(t *testing.T) {
	gpuPool := nodePool("gpu", withTaint("nvidia.com/gpu", "true"), withRequirements(
		req(v1.LabelCapacityType, v1.OpIn, v1.CapacityTypeOnDemand),
		req(v1.LabelInstanceFamily, v1.OpIn, "p3", "g5")))
	general := nodePool("default", withRequirements(
		req(v1.LabelCapacityType, v1.OpIn, v1.CapacityTypeOnDemand),
		req(v1.LabelInstanceCategory, v1.OpIn, "c", "m", "r")))
	billing := nodePool("billing", withLabel("billing-team", "my-team"))
	cases := []struct {
		name  string
		pod   *corev1.Pod
		pools []*v1.NodePool
		check func(t *testing.T, nc *NodeClaimPlan, reason string)
	}{
		{"arm64 node selector picks an arm64 type", pod("a", "1", "1Gi", withNodeSelector(v1.LabelArch, "arm64")), []*v1.NodePool{general},
			func(t *testing.T, nc *NodeClaimPlan, reason string) { wantLabel(t, nc, reason, v1.LabelArch, "arm64") }},
		{"instance-type selector is honoured", pod("a", "1", "1Gi", withNodeSelector(v1.LabelInstanceType, "m5.xlarge")), []*v1.NodePool{general},
			func(t *testing.T, nc *NodeClaimPlan, reason string) {
				wantLabel(t, nc, reason, v1.LabelInstanceType, "m5.xlarge")
			}},
		{"deprecated beta arch selector still works", pod("a", "1", "1Gi", withNodeSelector("beta.kubernetes.io/arch", "amd64")), []*v1.NodePool{general},
			func(t *testing.T, nc *NodeClaimPlan, reason string) { wantLabel(t, nc, reason, v1.LabelArch, "amd64") }},
		{"zone selector pins the zone", pod("a", "1", "1Gi", withNodeSelector(v1.LabelTopologyZone, "us-west-2b")), []*v1.NodePool{general},
			func(t *testing.T, nc *NodeClaimPlan, reason string) {
				wantLabel(t, nc, reason, v1.LabelTopologyZone, "us-west-2b")
			}},
		{"GPU pod lands on the GPU pool", pod("a", "1", "1Gi", withGPU("1"), withToleration("nvidia.com/gpu")), []*v1.NodePool{general, gpuPool},
			func(t *testing.T, nc *NodeClaimPlan, reason string) {
				wantPool(t, nc, reason, "gpu")
				wantLabel(t, nc, reason, v1.LabelInstanceType, "g5.xlarge")
			}},
		{"pod without toleration stays off the GPU pool", pod("a", "1", "1Gi"), []*v1.NodePool{gpuPool, general},
			func(t *testing.T, nc *NodeClaimPlan, reason string) { wantPool(t, nc, reason, "default") }},
		{"GPU pod without toleration is unschedulable, naming the taint", pod("a", "1", "1Gi", withGPU("1")), []*v1.NodePool{gpuPool},
			func(t *testing.T, nc *NodeClaimPlan, reason string) {
				wantReason(t, nc, reason, "did not tolerate taint nvidia.com/gpu=true:NoSchedule")
			}},
		{"custom label selector needs a pool with that label", pod("a", "1", "1Gi", withNodeSelector("billing-team", "my-team")), []*v1.NodePool{general, billing},
			func(t *testing.T, nc *NodeClaimPlan, reason string) { wantPool(t, nc, reason, "billing") }},
		{"custom label selector with no such pool is explained", pod("a", "1", "1Gi", withNodeSelector("billing-team", "my-team")), []*v1.NodePool{general},
			func(t *testing.T, nc *NodeClaimPlan, reason string) {
				wantReason(t, nc, reason, `label "billing-team" does not exist`)
			}},
		{"second OR-ed affinity term is used when the first cannot hold", pod("a", "1", "1Gi", withRequiredTerms(
			[]corev1.NodeSelectorRequirement{{Key: v1.LabelInstanceType, Operator: corev1.NodeSelectorOpIn, Values: []string{"x1.32xlarge"}}},
			[]corev1.NodeSelectorRequirement{{Key: v1.LabelInstanceType, Operator: corev1.NodeSelectorOpIn, Values: []string{"r5.large"}}},
		)), []*v1.NodePool{general},
			func(t *testing.T, nc *NodeClaimPlan, reason string) {
				wantLabel(t, nc, reason, v1.LabelInstanceType, "r5.large")
			}},
		{"preferred affinity is honoured when possible", pod("a", "1", "1Gi", withPreferred(10,
			corev1.NodeSelectorRequirement{Key: v1.LabelTopologyZone, Operator: corev1.NodeSelectorOpIn, Values: []string{"us-west-2c"}})), []*v1.NodePool{general},
			func(t *testing.T, nc *NodeClaimPlan, reason string) {
				wantLabel(t, nc, reason, v1.LabelTopologyZone, "us-west-2c")
			}},
		{"an unsatisfiable preference is relaxed", pod("a", "1", "1Gi", withPreferred(10,
			corev1.NodeSelectorRequirement{Key: v1.LabelTopologyZone, Operator: corev1.NodeSelectorOpIn, Values: []string{"eu-west-1a"}})), []*v1.NodePool{general},
			func(t *testing.T, nc *NodeClaimPlan, reason string) { wantPool(t, nc, reason, "default") }},
		{"Gt on instance cpu", pod("a", "1", "1Gi", withRequiredTerms([]corev1.NodeSelectorRequirement{{Key: v1.LabelInstanceCPU, Operator: corev1.NodeSelectorOpGt, Values: []string{"8"}}})), []*v1.NodePool{general},
			func(t *testing.T, nc *NodeClaimPlan, reason string) {
				wantLabel(t, nc, reason, v1.LabelInstanceCPU, "16")
			}},
		{"spot requirement picks a spot offering", pod("a", "1", "1Gi", withNodeSelector(v1.LabelCapacityType, v1.CapacityTypeSpot)),
			[]*v1.NodePool{nodePool("flex", withRequirements(req(v1.LabelCapacityType, v1.OpIn, v1.CapacityTypeSpot, v1.CapacityTypeOnDemand)))},
			func(t *testing.T, nc *NodeClaimPlan, reason string) {
				wantLabel(t, nc, reason, v1.LabelCapacityType, v1.CapacityTypeSpot)
			}},
		{"a pod larger than any type is explained", pod("a", "100", "1Gi"), []*v1.NodePool{general},
			func(t *testing.T, nc *NodeClaimPlan, reason string) {
				wantReason(t, nc, reason, "no instance type has enough resources")
				wantReason(t, nc, reason, "short of cpu")
			}},
		{"heavier pool wins even when pricier", pod("a", "1", "1Gi"), []*v1.NodePool{general, nodePool("preferred", withWeight(50), withRequirements(req(v1.LabelInstanceType, v1.OpIn, "m5.2xlarge")))},
			func(t *testing.T, nc *NodeClaimPlan, reason string) { wantPool(t, nc, reason, "preferred") }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := solve(t, []*corev1.Pod{tc.pod}, tc.pools)
			tc.check(t, claimOf(r, tc.pod.Name), unschedulable(r, tc.pod.Name))
		})
	}
}

func wantLabel(t *testing.T, nc *NodeClaimPlan, reason, key, value string) {
	t.Helper()
	if nc == nil {
		t.Fatalf("pod not placed: %s", reason)
	}
	if got := label(nc, key); got != value {
		t.Errorf("%s = %q, want %q (instance type %s)", key, got, value, nc.InstanceType.Name)
	}
}

func wantPool(t *testing.T, nc *NodeClaimPlan, reason, pool string) {
	t.Helper()
	if nc == nil {
		t.Fatalf("pod not placed: %s", reason)
	}
	if nc.NodePool != pool {
		t.Errorf("nodepool = %s, want %s", nc.NodePool, pool)
	}
}

func wantReason(t *testing.T, nc *NodeClaimPlan, reason, substr string) {
	t.Helper()
	if nc != nil {
		t.Fatalf("pod was placed on %s, want unschedulable", nc.InstanceType.Name)
	}
	if !strings.Contains(reason, substr) {
		t.Errorf("reason %q does not mention %q", reason, substr)
	}
}

func TestHostnameAntiAffinitySeparatesPods(t *testing.T) {
	ps := pods(4, "web", "100m", "128Mi", withPodLabel("app", "web"), withAntiAffinity(v1.LabelHostname, map[string]string{"app": "web"}))
	r := solve(t, ps, []*v1.NodePool{nodePool("default")})
	if len(r.Unschedulable) != 0 {
		t.Fatalf("unschedulable: %v", r.Unschedulable)
	}
	seen := map[string]bool{}
	for _, p := range ps {
		nc := claimOf(r, p.Name)
		if seen[nc.Name] {
			t.Fatalf("two web pods share claim %s", nc.Name)
		}
		seen[nc.Name] = true
	}
}

func TestInverseAntiAffinityFromExistingPod(t *testing.T) {
	guard := pod("guard", "100m", "128Mi", withAntiAffinity(v1.LabelHostname, map[string]string{"app": "web"}))
	node := &ExistingNode{Name: "n1", Labels: map[string]string{v1.LabelHostname: "n1", v1.LabelArch: "amd64"},
		Allocatable: Resources{MilliCPU: 4000, Memory: 8 << 30, Pods: 50, EphemeralStorage: 10 << 30}, Pods: []*corev1.Pod{guard}}
	web := pod("web", "100m", "128Mi", withPodLabel("app", "web"))
	other := pod("other", "100m", "128Mi")
	r := solve(t, []*corev1.Pod{web, other}, []*v1.NodePool{nodePool("default")}, func(in *Input) { in.Nodes = []*ExistingNode{node} })
	if claimOf(r, "web") == nil {
		t.Errorf("web should get a new node because guard repels it, got existing placement")
	}
	if claimOf(r, "other") != nil || len(r.Existing) != 1 {
		t.Errorf("other should fit on the existing node")
	}
}

func TestZoneSpreadBalancesAcrossZones(t *testing.T) {
	match := map[string]string{"app": "spread"}
	ps := pods(6, "s", "1", "1Gi", withPodLabel("app", "spread"), withSpread(v1.LabelTopologyZone, 1, corev1.DoNotSchedule, match))
	r := solve(t, ps, []*v1.NodePool{nodePool("default")})
	if len(r.Unschedulable) != 0 {
		t.Fatalf("unschedulable: %v", r.Unschedulable)
	}
	perZone := map[string]int{}
	for _, p := range ps {
		perZone[label(claimOf(r, p.Name), v1.LabelTopologyZone)]++
	}
	for _, z := range testZones {
		if perZone[z] != 2 {
			t.Errorf("zone %s has %d pods, want 2 (%v)", z, perZone[z], perZone)
		}
	}
}

func TestHostnameSpreadAndPodAffinity(t *testing.T) {
	match := map[string]string{"app": "spread"}
	spread := pods(3, "s", "100m", "128Mi", withPodLabel("app", "spread"), withSpread(v1.LabelHostname, 1, corev1.DoNotSchedule, match))
	db := pod("db", "1", "1Gi", withPodLabel("app", "db"), withNodeSelector(v1.LabelTopologyZone, "us-west-2b"))
	follower := pod("follower", "100m", "128Mi", withAffinity(v1.LabelTopologyZone, map[string]string{"app": "db"}))
	r := solve(t, append(spread, db, follower), []*v1.NodePool{nodePool("default")})
	if len(r.Unschedulable) != 0 {
		t.Fatalf("unschedulable: %v", r.Unschedulable)
	}
	names := sets.New[string]()
	for _, p := range spread {
		names.Insert(claimOf(r, p.Name).Name)
	}
	if names.Len() != 3 {
		t.Errorf("hostname spread with maxSkew 1 should put each pod on its own node, got %d nodes", names.Len())
	}
	if z := label(claimOf(r, "follower"), v1.LabelTopologyZone); z != "us-west-2b" {
		t.Errorf("follower zone = %s, want us-west-2b next to db", z)
	}
}

func TestHostPortsConflict(t *testing.T) {
	r := solve(t, pods(2, "hp", "100m", "128Mi", withHostPort(8080)), []*v1.NodePool{nodePool("default")})
	if len(r.NodeClaims) != 2 {
		t.Errorf("two pods with the same host port need two nodes, got %d", len(r.NodeClaims))
	}
}

func TestExistingCapacityIsUsedFirst(t *testing.T) {
	node := &ExistingNode{Name: "n1", Labels: map[string]string{v1.LabelHostname: "n1", v1.LabelArch: "amd64", v1.LabelTopologyZone: "us-west-2a"},
		Allocatable: Resources{MilliCPU: 2000, Memory: 4 << 30, Pods: 10, EphemeralStorage: 10 << 30}}
	tainted := &ExistingNode{Name: "n2", Labels: map[string]string{v1.LabelHostname: "n2"}, Taints: []corev1.Taint{{Key: "dedicated", Effect: corev1.TaintEffectNoSchedule}},
		Allocatable: Resources{MilliCPU: 64000, Memory: 64 << 30, Pods: 100, EphemeralStorage: 10 << 30}}
	ps := pods(3, "p", "1", "1Gi")
	r := solve(t, ps, []*v1.NodePool{nodePool("default")}, func(in *Input) { in.Nodes = []*ExistingNode{tainted, node} })
	if len(r.Existing) != 1 || r.Existing[0].Node.Name != "n1" || len(r.Existing[0].Pods) != 2 {
		t.Fatalf("want two pods on n1 (2 cpu allocatable) and none on tainted n2, got %+v", r.Existing)
	}
	if len(r.NodeClaims) != 1 || len(r.NodeClaims[0].Pods) != 1 {
		t.Errorf("the rest should go on one new claim, got %d claims", len(r.NodeClaims))
	}
}

func TestLimitsStopLaunching(t *testing.T) {
	pool := nodePool("limited", withRequirements(req(v1.LabelInstanceType, v1.OpIn, "m5.large")), withLimit(corev1.ResourceCPU, "4"))
	r := solve(t, pods(3, "p", "1500m", "1Gi"), []*v1.NodePool{pool})
	if len(r.NodeClaims) != 2 {
		t.Errorf("cpu limit 4 allows two 2-cpu nodes, got %d claims", len(r.NodeClaims))
	}
	if len(r.Unschedulable) != 1 || !strings.Contains(r.Unschedulable[0].Reason, "limits") {
		t.Errorf("the third pod should be refused naming the limit, got %v", r.Unschedulable)
	}
	nodesLimited := nodePool("nodes", withLimit(v1.ResourceNodes, "1"))
	r = solve(t, pods(2, "h", "100m", "128Mi", withHostPort(80)), []*v1.NodePool{nodesLimited})
	if len(r.NodeClaims) != 1 || len(r.Unschedulable) != 1 || !strings.Contains(r.Unschedulable[0].Reason, "limit of 1 nodes") {
		t.Errorf("nodes limit 1 should allow one claim and explain, got %d claims, %v", len(r.NodeClaims), r.Unschedulable)
	}
}

func TestMinValuesKeepsFlexibility(t *testing.T) {
	three := 3
	pool := nodePool("flex", withRequirements(v1.NodePoolRequirement{Key: v1.LabelInstanceFamily, RequirementBody: v1.RequirementBody{
		Operator: v1.OpIn, Values: []string{"c5", "m5", "r5", "m6g"}, MinValues: &three}}))
	r := solve(t, pods(1, "p", "1", "1Gi"), []*v1.NodePool{pool})
	if len(r.NodeClaims) != 1 {
		t.Fatalf("want one claim, got %v", r.Unschedulable)
	}
	fams := sets.New[string]()
	for _, it := range r.NodeClaims[0].InstanceTypeOptions {
		v, _ := it.Requirements[v1.LabelInstanceFamily].Any()
		fams.Insert(v)
	}
	if fams.Len() < 3 {
		t.Errorf("options span %d families, want at least 3", fams.Len())
	}
	// 14Gi fits only r5.large and the larger m5s: two families cannot meet minValues 3.
	r = solve(t, []*corev1.Pod{pod("big", "1", "14Gi")}, []*v1.NodePool{pool})
	if len(r.Unschedulable) != 1 || !strings.Contains(r.Unschedulable[0].Reason, "minValues") {
		t.Errorf("want a minValues refusal, got %v", r.Unschedulable)
	}
}

func TestDaemonSetOverheadIsReserved(t *testing.T) {
	ds := pod("ds", "1500m", "256Mi")
	r := solve(t, pods(1, "p", "1", "1Gi"), []*v1.NodePool{nodePool("default", withRequirements(req(v1.LabelArch, v1.OpIn, "amd64")))},
		func(in *Input) { in.DaemonSetPods = []*corev1.Pod{ds} })
	nc := r.NodeClaims[0]
	if got := nc.Requests.MilliCPU; got != 2500 {
		t.Errorf("claim requests %dm cpu, want 2500m (pod + daemonset)", got)
	}
	if nc.InstanceType.Allocatable.MilliCPU < 2500 {
		t.Errorf("chose %s which cannot hold pod + daemonset", nc.InstanceType.Name)
	}
	// A daemonset that does not tolerate the pool's taint is not counted.
	r = solve(t, pods(1, "p", "1", "1Gi", withToleration("dedicated")), []*v1.NodePool{nodePool("tainted", withTaint("dedicated", "x"))},
		func(in *Input) { in.DaemonSetPods = []*corev1.Pod{ds} })
	if got := r.NodeClaims[0].Requests.MilliCPU; got != 1000 {
		t.Errorf("claim requests %dm cpu, want 1000m (daemonset does not tolerate the taint)", got)
	}
}

func TestEphemeralStorageAndExtendedResources(t *testing.T) {
	p := pod("disk", "1", "1Gi")
	p.Spec.Containers[0].Resources.Requests[corev1.ResourceEphemeralStorage] = resource.MustParse("100Gi")
	r := solve(t, []*corev1.Pod{p}, []*v1.NodePool{nodePool("default")})
	if len(r.Unschedulable) != 1 || !strings.Contains(r.Unschedulable[0].Reason, "ephemeral-storage") {
		t.Errorf("100Gi of ephemeral storage fits no 20Gi disk; want a reason naming it, got %v", r.Unschedulable)
	}
}

func TestStaticPoolsAreNotProvisioned(t *testing.T) {
	one := int64(1)
	static := nodePool("static", func(np *v1.NodePool) { np.Spec.Replicas = &one })
	r := solve(t, pods(1, "p", "1", "1Gi"), []*v1.NodePool{static})
	if len(r.NodeClaims) != 0 || len(r.Unschedulable) != 1 {
		t.Errorf("static pools are sized by replicas, not by pods; got %d claims", len(r.NodeClaims))
	}
}

func TestCapacityTypeSpread(t *testing.T) {
	flex := nodePool("flex", withRequirements(req(v1.LabelCapacityType, v1.OpIn, v1.CapacityTypeSpot, v1.CapacityTypeOnDemand)))
	match := map[string]string{"app": "ct"}
	ps := pods(4, "ct", "1", "1Gi", withPodLabel("app", "ct"), withSpread(v1.LabelCapacityType, 1, corev1.DoNotSchedule, match))
	r := solve(t, ps, []*v1.NodePool{flex})
	counts := map[string]int{}
	for _, p := range ps {
		counts[label(claimOf(r, p.Name), v1.LabelCapacityType)]++
	}
	if counts[v1.CapacityTypeSpot] != 2 || counts[v1.CapacityTypeOnDemand] != 2 {
		t.Errorf("capacity-type spread = %v, want 2 spot and 2 on-demand", counts)
	}
}

func TestMinDomainsForcesNewDomains(t *testing.T) {
	match := map[string]string{"app": "md"}
	three := int32(3)
	// With one allowed zone and minDomains 3 the global minimum counts as 0, so
	// maxSkew 1 allows only one pod in that zone; the second cannot be placed.
	ps := pods(2, "md", "100m", "128Mi", withPodLabel("app", "md"), withNodeSelector(v1.LabelTopologyZone, "us-west-2a"), func(p *corev1.Pod) {
		p.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: v1.LabelTopologyZone, MinDomains: &three,
			WhenUnsatisfiable: corev1.DoNotSchedule, LabelSelector: &metav1.LabelSelector{MatchLabels: match}}}
	})
	r := solve(t, ps, []*v1.NodePool{nodePool("default")})
	if len(r.Unschedulable) != 1 || !strings.Contains(r.Unschedulable[0].Reason, "topology") {
		t.Errorf("want one pod refused by the spread, got %d unschedulable %v", len(r.Unschedulable), r.Unschedulable)
	}
}

func TestScheduleAnywayIsRelaxedWhenItCannotHold(t *testing.T) {
	match := map[string]string{"app": "soft"}
	// Only one zone is possible, so a hard zone spread of 3 pods would strand two of
	// them; ScheduleAnyway lets them all run there.
	ps := pods(3, "soft", "100m", "128Mi", withPodLabel("app", "soft"), withNodeSelector(v1.LabelTopologyZone, "us-west-2a"),
		withSpread(v1.LabelHostname, 1, corev1.ScheduleAnyway, match))
	one := nodePool("one", withLimit(v1.ResourceNodes, "1"))
	r := solve(t, ps, []*v1.NodePool{one})
	if len(r.Unschedulable) != 0 || len(r.NodeClaims) != 1 {
		t.Errorf("ScheduleAnyway should yield to the one-node limit: %d claims, unschedulable %v", len(r.NodeClaims), r.Unschedulable)
	}
	hard := pods(3, "hard", "100m", "128Mi", withPodLabel("app", "soft"), withSpread(v1.LabelHostname, 1, corev1.DoNotSchedule, match))
	r = solve(t, hard, []*v1.NodePool{nodePool("one", withLimit(v1.ResourceNodes, "1"))})
	if len(r.Unschedulable) != 2 {
		t.Errorf("DoNotSchedule must not be relaxed: want 2 unschedulable, got %d", len(r.Unschedulable))
	}
}

func TestPreferredAntiAffinityIsRelaxed(t *testing.T) {
	ps := pods(2, "pref", "100m", "128Mi", withPodLabel("app", "pref"), func(p *corev1.Pod) {
		ensureAffinity(p).PodAntiAffinity = &corev1.PodAntiAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{
			Weight: 10, PodAffinityTerm: corev1.PodAffinityTerm{TopologyKey: v1.LabelHostname, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "pref"}}},
		}}}
	})
	r := solve(t, ps, []*v1.NodePool{nodePool("default")})
	if len(r.NodeClaims) != 2 {
		t.Errorf("preferred anti-affinity should separate the pods when it can: %d claims", len(r.NodeClaims))
	}
	r = solve(t, ps, []*v1.NodePool{nodePool("one", withLimit(v1.ResourceNodes, "1"))})
	if len(r.Unschedulable) != 0 || len(r.NodeClaims) != 1 {
		t.Errorf("preferred anti-affinity should yield to a one-node limit: %d claims, %v", len(r.NodeClaims), r.Unschedulable)
	}
}

func TestHostnamePodAffinityColocates(t *testing.T) {
	cache := pod("cache", "1", "1Gi", withPodLabel("app", "cache"))
	web := pods(2, "web", "500m", "512Mi", withAffinity(v1.LabelHostname, map[string]string{"app": "cache"}))
	r := solve(t, append(web, cache), []*v1.NodePool{nodePool("default")})
	if len(r.Unschedulable) != 0 {
		t.Fatalf("unschedulable: %v", r.Unschedulable)
	}
	home := claimOf(r, "cache").Name
	for _, w := range web {
		if got := claimOf(r, w.Name).Name; got != home {
			t.Errorf("%s is on %s, want with the cache on %s", w.Name, got, home)
		}
	}
}
