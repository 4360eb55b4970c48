package scheduling

import (
	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
)

// PoolUsage is what a NodePool's NodeClaims hold, as its limits count it.
type PoolUsage struct {
	Resources Resources
	Nodes     int64
	// carriedSpend is what a re-plan of part of a solve carries of the rest's
	// spend; the engine adds the pool's nodes' own.
	carriedSpend float64
}

// UsageOfClaims sums, per pool, every NodeClaim of the pool: launched or not, and
// deleting, cordoned or disrupted ones too, since their instances still run (as
// Karpenter counts them). A claim not launched yet holds what it requested.
func UsageOfClaims(claims []v1.NodeClaim) map[string]PoolUsage {
	out := map[string]PoolUsage{}
	for i := range claims {
		pool, held := ClaimHolds(&claims[i])
		if pool == "" {
			continue
		}
		u := out[pool]
		u.Resources = u.Resources.Add(held)
		u.Nodes++
		out[pool] = u
	}
	return out
}

// ClaimHolds is the claim's pool and what it holds toward the pool's limits.
func ClaimHolds(nc *v1.NodeClaim) (string, Resources) {
	held := nc.Status.Capacity
	if len(held) == 0 {
		held = nc.Spec.Resources.Requests
	}
	return nc.Labels[v1.LabelNodePool], FromResourceList(held)
}
