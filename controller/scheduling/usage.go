package scheduling

import (
	corev1 "k8s.io/api/core/v1"

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

// UsageOfClaimsAndNodes is UsageOfClaims plus every Node labelled with a pool that
// no NodeClaim stands for (by provider ID or node name): a node adopted, launched
// by another controller, or read from a snapshot without its claim still runs in
// the pool and counts toward its limits, as Karpenter counts nodes.
func UsageOfClaimsAndNodes(claims []v1.NodeClaim, nodes []corev1.Node) map[string]PoolUsage {
	out := UsageOfClaims(claims)
	claimed := make(map[string]bool, 2*len(claims))
	for i := range claims {
		if id := claims[i].Status.ProviderID; id != "" {
			claimed["id/"+id] = true
		}
		if name := claims[i].Status.NodeName; name != "" {
			claimed["name/"+name] = true
		}
	}
	for i := range nodes {
		n := &nodes[i]
		pool := n.Labels[v1.LabelNodePool]
		if pool == "" || claimed["name/"+n.Name] || (n.Spec.ProviderID != "" && claimed["id/"+n.Spec.ProviderID]) {
			continue
		}
		u := out[pool]
		u.Resources = u.Resources.Add(FromResourceList(n.Status.Capacity))
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
