package simulate

import (
	"fmt"
	"sort"

	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/controller/operator/settings"
	"github.com/dovetail-sh/dovetail/controller/scheduling"
	"github.com/dovetail-sh/dovetail/controller/staticpool"
)

// StaticPoolPlan is what the static controller does with a static NodePool
// (spec.replicas) of the input: the claims it has, and how many it launches or
// removes to reach its replicas; or why it launches fewer, or none.
type StaticPoolPlan struct {
	NodePool string `json:"nodePool"`
	Replicas int64  `json:"replicas"`
	Existing int    `json:"existing"`
	Launch   int    `json:"launch"`
	Remove   int    `json:"remove"`
	// InstanceType, Zone and CapacityType are the launched claims' cheapest
	// option; PricePerHour what each costs at list price.
	InstanceType string  `json:"instanceType,omitempty"`
	Zone         string  `json:"zone,omitempty"`
	CapacityType string  `json:"capacityType,omitempty"`
	PricePerHour float64 `json:"pricePerHour,omitempty"`
	Problem      string  `json:"problem,omitempty"`
}

// staticPools predicts the static controller's scale-up and -down of each static
// pool, by its own decision (staticpool.ScaleUp), with the types the pool plans
// with. A claim being deleted counts against limits.nodes but not toward replicas.
func staticPools(in *Inputs, snap *scheduling.Snapshot, ctl *settings.Options) []StaticPoolPlan {
	var out []StaticPoolPlan
	for _, np := range in.NodePools {
		if np.Spec.Replicas == nil {
			continue
		}
		sp := StaticPoolPlan{NodePool: np.Name, Replicas: *np.Spec.Replicas}
		var claims []v1.NodeClaim
		for _, nc := range in.NodeClaims {
			if nc.Labels[v1.LabelNodePool] != np.Name {
				continue
			}
			claims = append(claims, *nc)
			if nc.DeletionTimestamp == nil {
				sp.Existing++
			}
		}
		types, ready := snap.InstanceTypes[np.Name]
		switch want := int(*np.Spec.Replicas) - sp.Existing; {
		case !ctl.FeatureGates.StaticCapacity:
			sp.Problem = "the controller runs with the StaticCapacity feature gate off and keeps no replicas; pass --feature-gates StaticCapacity=true if it runs with it on"
		case np.DeletionTimestamp != nil || !ready:
			sp.Problem = "the NodePool is not Ready, or being deleted: nothing is launched for it"
		case want < 0:
			sp.Remove = -want
		case want > 0:
			n, plan, why, err := staticpool.ScaleUp(np, want, claims, types)
			if err != nil {
				sp.Problem = fmt.Sprintf("no claim can be launched from its template: %v", err)
				break
			}
			sp.Launch, sp.Problem = n, why
			if plan != nil {
				sp.InstanceType, sp.Zone, sp.CapacityType, sp.PricePerHour = plan.InstanceType.Name, plan.Offering.Zone, plan.Offering.CapacityType, round(plan.Offering.Price)
			}
		}
		out = append(out, sp)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].NodePool < out[j].NodePool })
	return out
}
