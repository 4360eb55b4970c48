package scheduling_test

import (
	"fmt"
	"math"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/dovetail-sh/dovetail/controller/apis/dovetail/v1alpha1"
	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/controller/catalog"
	"github.com/dovetail-sh/dovetail/controller/commitment"
	"github.com/dovetail-sh/dovetail/controller/scheduling"
	"github.com/dovetail-sh/dovetail/controller/scheduling/schedulingtest"
)

// zonePool is the c/m/r on-demand pool of the benchmark, in one zone.
func zonePool(zone string) *v1.NodePool {
	np := schedulingtest.BenchPool()
	np.Spec.Template.Spec.Requirements = append(np.Spec.Template.Spec.Requirements,
		v1.NodePoolRequirement{Key: v1.LabelTopologyZone, RequirementBody: v1.RequirementBody{Operator: v1.OpIn, Values: []string{zone}}})
	return np
}

func cpuPods(n int, cpu, memory string) []*corev1.Pod {
	out := make([]*corev1.Pod, n)
	for i := range out {
		out[i] = &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("p-%d", i), Namespace: "default", UID: types.UID(fmt.Sprint("uid-", i))},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(memory)}}}}}}
	}
	return out
}

func engineTypes(t *testing.T) []*scheduling.InstanceType {
	t.Helper()
	cat, err := catalog.EmbeddedAWS()
	if err != nil {
		t.Fatal(err)
	}
	return cat.ForEngine(scheduling.DefaultAllocatableSettings())
}

func ledger(t *testing.T, spec v1alpha1.CommitmentSpec) *commitment.Ledger {
	t.Helper()
	terms, err := commitment.Parse(&v1alpha1.Commitment{ObjectMeta: metav1.ObjectMeta{Name: "ri-m5"}, Spec: spec})
	if err != nil {
		t.Fatal(err)
	}
	return commitment.NewLedger(terms)
}

// TestReservedInstancesArePlannedFirst is the example: 4 zonal RIs of
// m5.2xlarge and 24 pods of 1 cpu/2Gi on a c/m/r on-demand pool in that zone plan
// the 4 m5.2xlarge at $0, where list prices pick other types.
func TestReservedInstancesArePlannedFirst(t *testing.T) {
	types := engineTypes(t)
	pool := zonePool("us-east-1a")
	in := scheduling.Input{Pods: cpuPods(24, "1", "2Gi"), NodePools: []*v1.NodePool{pool}, InstanceTypes: map[string][]*scheduling.InstanceType{"default": types}}
	list := scheduling.Solve(in)
	for _, nc := range list.NodeClaims {
		if nc.InstanceType.Name == "m5.2xlarge" {
			t.Fatalf("list-price planning already picks m5.2xlarge; the example no longer shows anything")
		}
	}
	ledgerGiven := ledger(t, v1alpha1.CommitmentSpec{ReservedInstances: []v1alpha1.ReservedInstance{{InstanceType: "m5.2xlarge", Zone: "us-east-1a", Count: 4}}})
	in.Commitments = ledgerGiven
	r := scheduling.Solve(in)
	if len(r.Unschedulable) != 0 {
		t.Fatalf("unschedulable: %v", r.Unschedulable[0].Reason)
	}
	if len(r.NodeClaims) != 4 {
		t.Fatalf("%d claims; want the 4 reserved m5.2xlarge", len(r.NodeClaims))
	}
	for _, nc := range r.NodeClaims {
		zone := nc.Requirements.Get(v1.LabelTopologyZone)
		ct := nc.Requirements.Get(v1.LabelCapacityType)
		if nc.InstanceType.Name != "m5.2xlarge" || len(nc.InstanceTypeOptions) != 1 || nc.Offering.Price != 0 || nc.ListPrice <= 0 ||
			zone.Len() != 1 || !zone.Has("us-east-1a") || ct.Len() != 1 || !ct.Has(v1.CapacityTypeOnDemand) || !strings.Contains(nc.CoveredBy, "ri-m5") {
			t.Errorf("claim %s: %s (options %d) at $%v (list $%v) in %v, %v, covered by %q; want a reserved m5.2xlarge pinned on-demand in us-east-1a at $0",
				nc.Name, nc.InstanceType.Name, len(nc.InstanceTypeOptions), nc.Offering.Price, nc.ListPrice, zone, ct, nc.CoveredBy)
		}
	}
	if r.PricePerHour() != 0 {
		t.Errorf("the plan costs $%v/h; the reservations pay for it all", r.PricePerHour())
	}
	// The engine does not use up the caller's ledger.
	if p := ledgerGiven.Price(commitment.Instance{Type: "m5.2xlarge", Zone: "us-east-1a", ListPrice: 1}); p != 0 {
		t.Errorf("the given ledger was charged: %v", p)
	}

	// Existing on-demand m5.2xlarge nodes in the zone use the reservations first:
	// with all four taken, the pods are planned at list prices again.
	for i := range 4 {
		in.Nodes = append(in.Nodes, &scheduling.ExistingNode{Name: fmt.Sprintf("n%d", i), NodePool: "default",
			Labels: map[string]string{v1.LabelInstanceType: "m5.2xlarge", v1.LabelTopologyZone: "us-east-1a", v1.LabelCapacityType: v1.CapacityTypeOnDemand, v1.LabelNodePool: "default"}})
	}
	full := scheduling.Solve(in)
	if math.Abs(full.PricePerHour()-list.PricePerHour()) > 1e-9 {
		t.Errorf("with the reservations used by existing nodes the plan costs $%v/h; want the list-price plan's $%v/h", full.PricePerHour(), list.PricePerHour())
	}
}

// TestSavingsPlanPricesCoveredCapacityAtItsRate: an EC2Instance plan for m7i at 40%
// off makes m7i the cheapest on-demand family while its commitment lasts; the
// claims it covers are pinned on-demand to the family, at the plan's rate; and
// spot is chosen over on-demand only when cheaper than that rate.
func TestSavingsPlanPricesCoveredCapacityAtItsRate(t *testing.T) {
	types := engineTypes(t)
	pool := zonePool("us-east-1a")
	in := scheduling.Input{Pods: cpuPods(8, "1", "2Gi"), NodePools: []*v1.NodePool{pool}, InstanceTypes: map[string][]*scheduling.InstanceType{"default": types},
		Commitments: ledger(t, v1alpha1.CommitmentSpec{SavingsPlans: []v1alpha1.SavingsPlan{{Type: v1alpha1.SavingsPlanEC2Instance, Family: "m7i", CommitmentPerHour: "100", Discount: "0.40"}}})}
	r := scheduling.Solve(in)
	if len(r.NodeClaims) == 0 || len(r.Unschedulable) > 0 {
		t.Fatalf("no plan: %v", r.Unschedulable)
	}
	for _, nc := range r.NodeClaims {
		if !strings.HasPrefix(nc.InstanceType.Name, "m7i.") || math.Abs(nc.Offering.Price-0.6*nc.ListPrice) > 1e-9 || nc.CoveredBy == "" {
			t.Errorf("claim %s: %s at $%v (list $%v); want an m7i at 60%% of list", nc.Name, nc.InstanceType.Name, nc.Offering.Price, nc.ListPrice)
		}
		for _, it := range nc.InstanceTypeOptions {
			if !strings.HasPrefix(it.Name, "m7i.") {
				t.Errorf("claim %s may launch %s, which the plan does not cover", nc.Name, it.Name)
			}
		}
	}
}

// TestSpendLimitStopsProvisioningAtTheCap: a pool limited to $0.50/h plans nodes
// up to that and leaves the rest pending with the limit named; existing nodes
// count toward it.
func TestSpendLimitStopsProvisioningAtTheCap(t *testing.T) {
	types := engineTypes(t)
	pool := zonePool("us-east-1a")
	pool.Spec.Limits = v1.Limits{scheduling.ResourceSpendPerHour: resource.MustParse("0.5")}
	in := scheduling.Input{Pods: cpuPods(40, "1", "2Gi"), NodePools: []*v1.NodePool{pool}, InstanceTypes: map[string][]*scheduling.InstanceType{"default": types}}
	r := scheduling.Solve(in)
	if r.PricePerHour() > 0.5+1e-9 || len(r.NodeClaims) == 0 {
		t.Fatalf("the plan costs $%v/h in %d claims; want some nodes and at most $0.50/h", r.PricePerHour(), len(r.NodeClaims))
	}
	if len(r.Unschedulable) == 0 || !strings.Contains(r.Unschedulable[0].Reason, "dovetail.sh/usd-per-hour limit of $0.5000/h") {
		t.Fatalf("unschedulable %v; want the pods past the cap pending with the limit named", r.Unschedulable)
	}
	if spend, ok := r.SpendLimited["default"]; !ok || math.Abs(spend-r.PricePerHour()) > 1e-9 {
		t.Errorf("spend-limited pools %v; want default at the plan's $%v/h", r.SpendLimited, r.PricePerHour())
	}
	in.Nodes = []*scheduling.ExistingNode{{Name: "big", NodePool: "default",
		Labels: map[string]string{v1.LabelInstanceType: "m5.4xlarge", v1.LabelTopologyZone: "us-east-1a", v1.LabelCapacityType: v1.CapacityTypeOnDemand}}}
	if r := scheduling.Solve(in); len(r.NodeClaims) != 0 {
		t.Errorf("an existing m5.4xlarge ($0.768/h) is over the cap, yet %d claims were planned", len(r.NodeClaims))
	}
	// A claim still launching, its type not known yet, counts at what it was
	// planned at: $0.45 of the $0.50 leaves room for no m-type node.
	in.Nodes = []*scheduling.ExistingNode{{Name: "launching", NodePool: "default", Labels: map[string]string{}, PlannedPrice: 0.45}}
	if r := scheduling.Solve(in); r.PricePerHour() > 0.05+1e-9 {
		t.Errorf("with $0.45/h in flight the plan adds $%v/h under a $0.50/h cap", r.PricePerHour())
	}
	// Reserved capacity costs nothing against the cap.
	in.Nodes = nil
	in.Commitments = ledger(t, v1alpha1.CommitmentSpec{ReservedInstances: []v1alpha1.ReservedInstance{{InstanceType: "m5.2xlarge", Zone: "us-east-1a", Count: 10}}})
	if r := scheduling.Solve(in); len(r.Unschedulable) != 0 {
		t.Errorf("with 10 reserved m5.2xlarge, %d pods stay pending under the cap: %s", len(r.Unschedulable), r.Unschedulable[0].Reason)
	}
}
