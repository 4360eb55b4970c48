package consolidation

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dovetail-sh/dovetail/controller/apis/dovetail/v1alpha1"
	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/controller/commitment"
	"github.com/dovetail-sh/dovetail/controller/scheduling"
)

// withSpot adds a spot offering at 30% of the on-demand price to each type.
func withSpot(types []*scheduling.InstanceType) []*scheduling.InstanceType {
	for _, it := range types {
		it.Offerings = append(it.Offerings, scheduling.Offering{Zone: "a", CapacityType: v1.CapacityTypeSpot, Price: it.Offerings[0].Price * 0.3, Available: true})
		it.Refresh()
	}
	return types
}

// TestReservedInstanceNodeIsNotReplacedWithSpot: an underused on-demand
// m.2xlarge is replaced with a spot m.large at list prices; when a Reserved
// Instance pays for it, removing it saves nothing and it stays.
func TestReservedInstanceNodeIsNotReplacedWithSpot(t *testing.T) {
	build := func(c *commitment.Ledger) *Plan {
		tc := newTestCluster("100%")
		tc.pool.Spec.Template.Spec.Requirements = []v1.NodePoolRequirement{{Key: v1.LabelCapacityType, RequirementBody: v1.RequirementBody{Operator: v1.OpIn, Values: []string{v1.CapacityTypeSpot, v1.CapacityTypeOnDemand}}}}
		tc.types = withSpot(testTypes())
		tc.spotToSpot = true
		tc.commitments = c
		tc.addNode("m.2xlarge", 2, "500m")
		plan, _ := tc.decide(t)
		return plan
	}
	if plan := build(nil); len(plan.Remove) != 1 || len(plan.Replacements) != 1 || plan.Replacements[0].Offering.CapacityType != v1.CapacityTypeSpot {
		t.Fatalf("at list prices: removes %v, launches %d; want the node replaced by spot", names(plan.Remove), len(plan.Replacements))
	}
	terms, err := commitment.Parse(&v1alpha1.Commitment{ObjectMeta: metav1.ObjectMeta{Name: "ri"}, Spec: v1alpha1.CommitmentSpec{
		ReservedInstances: []v1alpha1.ReservedInstance{{InstanceType: "m.2xlarge", Zone: "a", Count: 1}}}})
	if err != nil {
		t.Fatal(err)
	}
	if plan := build(commitment.NewLedger(terms)); len(plan.Remove) != 0 || len(plan.Replacements) != 0 {
		t.Errorf("with the node reserved: removes %v, launches %d; want it kept", names(plan.Remove), len(plan.Replacements))
	}
}
