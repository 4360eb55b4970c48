package simulate

import (
	"sort"

	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/controller/capacitymix"
	"github.com/dovetail-sh/dovetail/controller/scheduling"
)

// MixReport is a pool's spot/on-demand mix, and its nodes before and after the
// plan's launches.
type MixReport struct {
	NodePool string    `json:"nodePool"`
	Mix      string    `json:"mix"`
	Before   MixCounts `json:"before"`
	After    MixCounts `json:"after"`
}

// MixCounts are a pool's nodes by capacity type.
type MixCounts struct {
	OnDemand int `json:"onDemand"`
	Spot     int `json:"spot"`
}

// mixReports counts, for each pool with a mix, its claims now and with the
// planned ones (launched as planned, within the mix).
func mixReports(snap *scheduling.Snapshot, claims []v1.NodeClaim, planned []*scheduling.NodeClaimPlan) []MixReport {
	var out []MixReport
	for _, np := range snap.Pools {
		mix, ok, err := capacitymix.Of(np)
		if err != nil || !ok {
			continue
		}
		before := capacitymix.CountPool(claims, np.Name)
		after := before
		for _, plan := range planned {
			if plan.NodePool != np.Name {
				continue
			}
			if plan.Offering.CapacityType == v1.CapacityTypeSpot {
				after.Spot++
			} else {
				after.OnDemand++
			}
		}
		out = append(out, MixReport{NodePool: np.Name, Mix: mix.String(), Before: MixCounts(before), After: MixCounts(after)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].NodePool < out[j].NodePool })
	return out
}
