package simulate

import (
	"sort"

	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/controller/apis/v1alpha1"
	"github.com/dovetail-sh/dovetail/controller/overlay"
	"github.com/dovetail-sh/dovetail/controller/scheduling"
)

// OverlayVerdict is whether a NodeOverlay of the input applies, as the controller
// (gate NodeOverlay) would decide, and what it changed.
type OverlayVerdict struct {
	Name    string `json:"name"`
	Applied bool   `json:"applied"`
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
	// PricedTypes and CapacityTypes count, over every pool, the instance types the
	// overlays repriced or gave capacity.
	PricedTypes   int `json:"pricedTypes,omitempty"`
	CapacityTypes int `json:"capacityTypes,omitempty"`
}

// gateOff is an overlay's verdict while the controller runs without the gate: it
// reads no NodeOverlay then, and neither does the prediction.
const gateOff = "FeatureGateOff"

// typesWithOverlays returns each pool's types (base gives them) with the input's
// NodeOverlays applied, and a verdict per overlay; without overlays, or with the
// NodeOverlay gate off (gate), the pools' types as they are.
func typesWithOverlays(in *Inputs, base func(*v1.NodePool) []*scheduling.InstanceType, gate bool) (func(*v1.NodePool) []*scheduling.InstanceType, []OverlayVerdict) {
	all := base
	if len(in.NodeOverlays) == 0 {
		return all, nil
	}
	if !gate {
		out := make([]OverlayVerdict, 0, len(in.NodeOverlays))
		for _, o := range in.NodeOverlays {
			out = append(out, OverlayVerdict{Name: o.Name, Reason: gateOff,
				Message: "the controller runs with the NodeOverlay feature gate off and ignores overlays; pass --feature-gates NodeOverlay=true if it runs with it on (the controller's Deployment in the input says so too)"})
		}
		sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
		return all, out
	}
	pools := make([]overlay.Pool, len(in.NodePools))
	for i, np := range in.NodePools {
		pools[i] = overlay.Pool{NodePool: np, Types: base(np)}
	}
	accepted, verdicts := overlay.Evaluate(in.NodeOverlays, pools)
	byPool := map[string][]*scheduling.InstanceType{}
	for _, np := range in.NodePools {
		byPool[np.Name] = overlay.Apply(accepted, np, base(np))
	}
	out := make([]OverlayVerdict, 0, len(in.NodeOverlays))
	for _, o := range in.NodeOverlays {
		v := verdicts[o.Name]
		ov := OverlayVerdict{Name: o.Name, Applied: v.Applied, Reason: v.Reason, Message: v.Message}
		if v.Applied {
			ov.PricedTypes, ov.CapacityTypes = touched(o, in.NodePools, base)
		}
		out = append(out, ov)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return func(np *v1.NodePool) []*scheduling.InstanceType {
		if types, ok := byPool[np.Name]; ok {
			return types
		}
		return base(np)
	}, out
}

// touched counts the types the overlay alone changes in some pool.
func touched(o *v1alpha1.NodeOverlay, pools []*v1.NodePool, base func(*v1.NodePool) []*scheduling.InstanceType) (priced, capacity int) {
	pricedNames, capacityNames := map[string]bool{}, map[string]bool{}
	for _, np := range pools {
		for _, it := range overlay.Apply([]*v1alpha1.NodeOverlay{o}, np, base(np)) {
			if it.PriceOverlaid {
				pricedNames[it.Name] = true
			}
			if it.CapacityOverlaid {
				capacityNames[it.Name] = true
			}
		}
	}
	return len(pricedNames), len(capacityNames)
}
