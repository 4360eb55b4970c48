package scheduling

import (
	"fmt"
	"testing"

	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
)

// sizedPair is a small and a large type of one family, the large one priced at
// (1+premium) times the small one's price per pod of the test workload, so which
// plan is cheaper is known exactly.
func sizedPair(t *testing.T, premium float64, podCPU, podMemory string) (small, large *InstanceType, perSmall, perLarge int64) {
	t.Helper()
	small = makeInstanceType(typeSpec{"m5.xlarge", "amd64", "4", "16Gi", 58, 0, 0.192})
	large = makeInstanceType(typeSpec{"m5.4xlarge", "amd64", "16", "64Gi", 234, 0, 1})
	need := PodRequests(pod("p", podCPU, podMemory))
	perSmall, perLarge = slots(small.Allocatable, need), slots(large.Allocatable, need)
	price := 0.192 / float64(perSmall) * float64(perLarge) * (1 + premium)
	for i := range large.Offerings {
		large.Offerings[i].Price = price
	}
	large.CheapestPrice = price
	return small, large, perSmall, perLarge
}

// TestObjectiveFewerNodesWithinTolerance: a workload that fills the large type
// exactly a few times over goes on large nodes when they cost at most the tolerance
// more per pod, and on small nodes when the premium is beyond it.
func TestObjectiveFewerNodesWithinTolerance(t *testing.T) {
	noNodeCosts := NodeCosts{FewerNodesTolerance: DefaultNodeCosts().FewerNodesTolerance}
	for _, tc := range []struct {
		name      string
		premium   float64
		costs     NodeCosts
		wantLarge bool
	}{
		{"same price per pod: fewer nodes", 0, noNodeCosts, true},
		{"1% dearer, within the 2% tolerance: fewer nodes", 0.01, noNodeCosts, true},
		{"5% dearer, beyond the tolerance: the cheaper plan", 0.05, noNodeCosts, false},
		{"15% dearer: the cheaper plan even with AWS's per-node costs", 0.15, DefaultNodeCosts(), false},
		{"5% dearer, but small nodes each carry $0.05/h of their own: fewer nodes", 0.05,
			NodeCosts{PerNodeHour: 0.05, FewerNodesTolerance: 0.02}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			small, large, perSmall, perLarge := sizedPair(t, tc.premium, "1", "2Gi")
			n := int(perLarge * 3)
			costs := tc.costs
			r := Solve(Input{Pods: pods(n, "web", "1", "2Gi"), NodePools: []*v1.NodePool{nodePool("default")},
				InstanceTypes: map[string][]*InstanceType{"default": {small, large}}, NodeCosts: &costs})
			if len(r.Unschedulable) > 0 {
				t.Fatalf("unschedulable: %s", r.Unschedulable[0].Reason)
			}
			wantNodes, wantType := int(perLarge)*3/int(perSmall), small.Name
			if n%int(perSmall) != 0 {
				wantNodes++
			}
			if tc.wantLarge {
				wantNodes, wantType = 3, large.Name
			}
			if len(r.NodeClaims) != wantNodes {
				t.Fatalf("%d pods planned on %d nodes %v, want %d %s", n, len(r.NodeClaims), typeNames(r), wantNodes, wantType)
			}
			for _, nc := range r.NodeClaims[:len(r.NodeClaims)-1] {
				if nc.InstanceType.Name != wantType {
					t.Errorf("planned %v, want %s nodes", typeNames(r), wantType)
					break
				}
			}
		})
	}
}

// TestObjectiveCountsWholePods is the fan-out users saw: 1-cpu pods on a family
// whose price is linear in size, so every size costs the same per vCPU. The large
// size holds one such pod (its allocatable is just under 2 cpu), so per pod it holds
// it is nearly twice the price: the engine must size for whole pods, not for vCPUs.
func TestObjectiveCountsWholePods(t *testing.T) {
	var family []*InstanceType
	for i, size := range []string{"large", "xlarge", "2xlarge", "4xlarge", "8xlarge"} {
		vcpus := int64(2) << i
		family = append(family, makeInstanceType(typeSpec{"c6g." + size, "arm64", fmt.Sprint(vcpus), fmt.Sprintf("%dGi", 2*vcpus), 29 * vcpus / 2, 0, 0.034 * float64(vcpus)}))
	}
	if got := slots(family[0].Allocatable, PodRequests(pod("p", "1", "1Gi"))); got != 1 {
		t.Fatalf("c6g.large holds %d 1-cpu pods, the test needs exactly 1", got)
	}
	r := solve(t, pods(100, "web", "1", "1Gi"), []*v1.NodePool{nodePool("default")}, func(in *Input) {
		in.InstanceTypes["default"] = family
	})
	// Three c6g.8xlarge hold 93 (31 each); a c6g.2xlarge holds the last 7.
	if len(r.NodeClaims) != 4 {
		t.Fatalf("100 1-cpu pods planned on %d nodes %v, want 4", len(r.NodeClaims), typeNames(r))
	}
}

// TestBurstableTypesOnlyWhenNamed: the t families are left out of a pool that does
// not name them, even when their list price is the lowest, and used when a
// requirement names their type, family or category, or when nothing else is allowed.
func TestBurstableTypesOnlyWhenNamed(t *testing.T) {
	catalogWithBurstable := func(in *Input) {
		types := append(testCatalog(), makeInstanceType(typeSpec{"t3.large", "amd64", "2", "8Gi", 35, 0, 0.0832}),
			makeInstanceType(typeSpec{"t3.xlarge", "amd64", "4", "16Gi", 58, 0, 0.1664}))
		for name := range in.InstanceTypes {
			in.InstanceTypes[name] = types
		}
	}
	for _, tc := range []struct {
		name    string
		pool    *v1.NodePool
		pod     podOpt
		wantT3  bool
		wantErr bool
	}{
		{"pool of any type: not used", nodePool("any"), nil, false, false},
		{"pool names the family", nodePool("t", withRequirements(req(v1.LabelInstanceFamily, v1.OpIn, "t3"))), nil, true, false},
		{"pool names the category among others", nodePool("ct", withRequirements(req(v1.LabelInstanceCategory, v1.OpIn, "t", "m"))), nil, true, false},
		{"pod names the type", nodePool("any"), withNodeSelector(v1.LabelInstanceType, "t3.large"), true, false},
		{"pool excludes every other family", nodePool("only", withRequirements(req(v1.LabelInstanceFamily, v1.OpNotIn, "c5", "m5", "r5", "m6g", "g5", "p3"))), nil, true, false},
		{"NotIn the category is no naming", nodePool("not", withRequirements(req(v1.LabelInstanceCategory, v1.OpNotIn, "c", "r"))), nil, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var opts []podOpt
			if tc.pod != nil {
				opts = append(opts, tc.pod)
			}
			r := solve(t, pods(3, "web", "500m", "1Gi", opts...), []*v1.NodePool{tc.pool}, catalogWithBurstable)
			if len(r.Unschedulable) > 0 {
				t.Fatalf("unschedulable: %s", r.Unschedulable[0].Reason)
			}
			for _, nc := range r.NodeClaims {
				usesT3 := false
				for _, it := range nc.InstanceTypeOptions {
					if it.burstable() {
						usesT3 = true
					}
				}
				if usesT3 != tc.wantT3 {
					t.Errorf("claim options %v include burstable types: %v, want %v", optionNames(nc), usesT3, tc.wantT3)
				}
			}
		})
	}
}

// TestNodeCostsPerNode prices the root volume by the type's ephemeral storage.
func TestNodeCostsPerNode(t *testing.T) {
	it := makeInstanceType(typeSpec{"m5.large", "amd64", "2", "8Gi", 29, 0, 0.096})
	it.Capacity.EphemeralStorage = 100 << 30
	c := NodeCosts{RootVolumePerGiBHour: 0.001, PublicIPv4PerHour: 0.005, PerNodeHour: 0.01}
	if got, want := c.PerNode(it), 0.1+0.005+0.01; fmt.Sprintf("%.6f", got) != fmt.Sprintf("%.6f", want) {
		t.Errorf("PerNode = %f, want %f", got, want)
	}
}

func typeNames(r *Results) []string {
	out := make([]string, 0, len(r.NodeClaims))
	for _, nc := range r.NodeClaims {
		out = append(out, fmt.Sprintf("%s(%d pods)", nc.InstanceType.Name, len(nc.Pods)))
	}
	return out
}

func optionNames(nc *NodeClaimPlan) []string {
	out := make([]string, 0, len(nc.InstanceTypeOptions))
	for _, it := range nc.InstanceTypeOptions {
		out = append(out, it.Name)
	}
	return out
}

// TestTailIsSizedByDemand: the claims a solve opens while more pods are left than
// any type holds are sized for a share of a larger demand; from the first claim
// opened when one type could hold all that is left, the choice depended on how
// few pods were left, and the plan says so on every claim after it.
func TestTailIsSizedByDemand(t *testing.T) {
	r := solve(t, pods(40, "web", "1", "2Gi"), []*v1.NodePool{nodePool("default")})
	if len(r.NodeClaims) < 2 {
		t.Fatalf("want several claims to tell the tail from the rest, got %v", typeNames(r))
	}
	if r.NodeClaims[0].SizedByDemand {
		t.Errorf("the first claim (%s), opened with 40 pods left, is marked sized by demand", r.NodeClaims[0].InstanceType.Name)
	}
	if !r.NodeClaims[len(r.NodeClaims)-1].SizedByDemand {
		t.Errorf("the last claim is not marked sized by demand: %v", typeNames(r))
	}
	for i := 1; i < len(r.NodeClaims); i++ {
		if r.NodeClaims[i-1].SizedByDemand && !r.NodeClaims[i].SizedByDemand {
			t.Errorf("claim %d is sized by demand but claim %d after it is not: %v", i, i+1, typeNames(r))
		}
	}
}

// TestSmallBatchIsSizedByDemand: a few pods that a larger type could hold together
// get the cheaper smaller nodes, each full; every one of them is marked, because a
// burst still arriving would fill the larger type instead.
func TestSmallBatchIsSizedByDemand(t *testing.T) {
	r := solve(t, pods(6, "web", "1", "2Gi"), []*v1.NodePool{nodePool("default")})
	if len(r.NodeClaims) < 2 {
		t.Fatalf("want the small batch split over smaller nodes for this to test anything, got %v", typeNames(r))
	}
	for i, nc := range r.NodeClaims {
		if !nc.SizedByDemand {
			t.Errorf("claim %d of %d (%s) is not marked sized by demand: %v", i+1, len(r.NodeClaims), nc.InstanceType.Name, typeNames(r))
		}
	}
}
