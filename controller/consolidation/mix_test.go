package consolidation

import (
	"strings"
	"testing"

	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/controller/capacitymix"
)

// An underused on-demand node that a spot node would replace more cheaply stays
// when its pool's mix (on-demand base 1) needs it on-demand; without the mix it is
// replaced.
func TestConsolidationKeepsThePoolsCapacityMix(t *testing.T) {
	build := func(mix map[string]string) *Plan {
		tc := newTestCluster("100%")
		tc.pool.Annotations = mix
		tc.pool.Spec.Template.Spec.Requirements = []v1.NodePoolRequirement{{Key: v1.LabelCapacityType, RequirementBody: v1.RequirementBody{Operator: v1.OpIn, Values: []string{v1.CapacityTypeSpot, v1.CapacityTypeOnDemand}}}}
		tc.types = withSpot(testTypes())
		tc.spotToSpot = true
		tc.addNode("m.2xlarge", 2, "500m")
		plan, _ := tc.decide(t)
		return plan
	}
	if plan := build(nil); len(plan.Batches) != 1 || len(plan.Replacements) != 1 || plan.Replacements[0].Offering.CapacityType != v1.CapacityTypeSpot {
		t.Fatalf("without a mix: %d batches, %d replacements; want the node replaced by spot", len(plan.Batches), len(plan.Replacements))
	}
	plan := build(map[string]string{capacitymix.OnDemandBaseAnnotationKey: "1"})
	if len(plan.Batches) != 0 {
		t.Fatalf("with an on-demand base of 1: %d batches; want none", len(plan.Batches))
	}
	if why := blockedReason(plan, "node-0"); !strings.Contains(why, "capacity mix") {
		t.Errorf("node-0 blocked for %q; want the mix named", why)
	}
}
