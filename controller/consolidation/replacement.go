package consolidation

import (
	"sort"

	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/controller/scheduling"
)

// MinSpotToSpotOptions is Karpenter's rule: a spot node is replaced by cheaper spot
// only when at least this many cheaper types are offered, so the replacement is not
// the one type most likely to be interrupted next.
const MinSpotToSpotOptions = 15

// narrowToCheaper keeps, in each new node's options, the instance types that keep
// the new nodes together cheaper than the nodes they replace (budget, $/h), and
// applies the spot-to-spot rule. It reports false when no such choice exists.
func narrowToCheaper(plans []*scheduling.NodeClaimPlan, budget float64, replacingSpot, spotToSpot bool) bool {
	planned := scheduling.PriceOf(plans)
	if planned >= budget {
		return false
	}
	slack := (budget - planned) / float64(len(plans))
	for _, plan := range plans {
		type option struct {
			it    *scheduling.InstanceType
			price float64
			spot  bool
		}
		var cheaper []option
		for _, it := range plan.InstanceTypeOptions {
			o, ok := scheduling.CheapestOffering(it, plan.Requirements)
			if ok && o.Price < plan.Offering.Price+slack {
				cheaper = append(cheaper, option{it, o.Price, o.CapacityType == v1.CapacityTypeSpot})
			}
		}
		if len(cheaper) == 0 {
			return false
		}
		sort.SliceStable(cheaper, func(i, j int) bool { return cheaper[i].price < cheaper[j].price })
		if replacingSpot && cheaper[0].spot {
			// A spot node is cheap because it may be taken back; replacing it with
			// the next cheapest spot type invites the same. Karpenter allows it behind
			// a gate, with enough choice.
			if !spotToSpot || len(cheaper) < MinSpotToSpotOptions {
				return false
			}
		}
		names := make([]string, len(cheaper))
		plan.InstanceTypeOptions = make([]*scheduling.InstanceType, len(cheaper))
		for i, o := range cheaper {
			names[i] = o.it.Name
			plan.InstanceTypeOptions[i] = o.it
		}
		plan.Requirements = plan.Requirements.Copy()
		plan.Requirements[v1.LabelInstanceType] = scheduling.MustRequirement(v1.LabelInstanceType, v1.OpIn, names...)
		plan.InstanceType = cheaper[0].it
		plan.Offering, _ = scheduling.CheapestOffering(cheaper[0].it, plan.Requirements)
	}
	return true
}

func allSpot(cands []*Candidate) bool {
	for _, c := range cands {
		if c.CapacityType != v1.CapacityTypeSpot {
			return false
		}
	}
	return len(cands) > 0
}
