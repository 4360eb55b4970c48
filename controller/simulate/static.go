package simulate

import (
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"

	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/controller/operator/settings"
	"github.com/dovetail-sh/dovetail/controller/scheduling"
	"github.com/dovetail-sh/dovetail/controller/state"
	"github.com/dovetail-sh/dovetail/controller/staticpool"
)

// StaticPoolPlan is what the static controller does with a static NodePool
// (spec.replicas) of the input: the claims it has, and how many it launches or
// removes to reach its replicas; or why it launches fewer, or none.
type StaticPoolPlan struct {
	NodePool string `json:"nodePool"`
	Replicas int64  `json:"replicas"`
	Existing int    `json:"existing"`
	// Disrupting are the claims being replaced (a drifted node): they hold their
	// place against a scale-up, and are not removed by a scale-down.
	Disrupting int `json:"disrupting,omitempty"`
	Launch     int `json:"launch"`
	Remove     int `json:"remove"`
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
	nodes := map[string]*corev1.Node{}
	for _, n := range in.Nodes {
		nodes[n.Name] = n
	}
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
			switch {
			case nc.DeletionTimestamp != nil:
			case state.Disrupting(nc, nodes[nc.Status.NodeName]):
				sp.Disrupting++
			default:
				sp.Existing++
			}
		}
		types, ready := snap.InstanceTypes[np.Name]
		switch launch, remove := staticpool.Delta(int(*np.Spec.Replicas), sp.Existing, sp.Disrupting); {
		case !ctl.FeatureGates.StaticCapacity:
			sp.Problem = "the controller runs with the StaticCapacity feature gate off and keeps no replicas; pass --feature-gates StaticCapacity=true if it runs with it on"
		case np.DeletionTimestamp != nil || !ready:
			sp.Problem = "the NodePool is not Ready, or being deleted: nothing is launched for it"
		case remove > 0:
			sp.Remove = remove
		case launch > 0:
			n, plan, why, err := staticpool.ScaleUp(np, launch, claims, types)
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
