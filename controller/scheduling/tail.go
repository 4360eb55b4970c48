package scheduling

import (
	"fmt"
)

// repackTail checks the tail of a plan against first-fit decreasing. The engine
// sizes each claim for the demand still to place; at the tail, where what is left
// fits one node of some type, that estimate can leave a few pods alone on small
// nodes where first-fit decreasing packs them exactly (two large pods and a small
// one per node). So when more than one claim was sized at the tail, its pods are
// planned again first-fit decreasing, and the cheaper of the two tails is kept:
// the plan is never dearer there than first-fit decreasing. Only tails whose pods
// no topology rule touches are re-planned; theirs depend on the rest of the plan.
func (s *solver) repackTail(in Input, r *Results) *Results {
	var tail []*claim
	for _, c := range s.claims {
		if c.sizedByDemand {
			tail = append(tail, c)
		}
	}
	if len(tail) < 2 {
		return r
	}
	sub := in
	sub.Pods, sub.Nodes = nil, nil
	sub.PoolUsage = map[string]PoolUsage{}
	for _, ps := range s.pools {
		sub.PoolUsage[ps.np.Name] = PoolUsage{Resources: ps.usage, Nodes: ps.nodes, carriedSpend: ps.spend}
	}
	inTail := map[string]bool{}
	for _, c := range tail {
		for _, p := range c.pods {
			if len(p.topology) > 0 || len(s.topology.matchingPod(p)) > 0 {
				return r
			}
			sub.Pods = append(sub.Pods, p.pod)
		}
		u := sub.PoolUsage[c.pool.np.Name]
		sub.PoolUsage[c.pool.np.Name] = PoolUsage{Resources: u.Resources.Sub(c.target.Capacity), Nodes: u.Nodes - 1, carriedSpend: u.carriedSpend - c.price}
		inTail[c.name] = true
	}
	if s.ledger != nil {
		// The plan is final but for this tail: the re-plan charges what the rest
		// leaves of the commitments.
		for _, c := range tail {
			s.ledger.Release(c.use)
		}
		sub.charged = s.ledger
	}
	alt, _ := plan(sub, true)
	if len(alt.Unschedulable) > 0 {
		return r
	}
	var kept []*NodeClaimPlan
	var before float64
	for _, nc := range r.NodeClaims {
		if inTail[nc.Name] {
			before += nc.Offering.Price + s.costs.PerNode(nc.InstanceType)
			continue
		}
		kept = append(kept, nc)
	}
	if alt.costPerHour(s.costs) >= before-1e-9 {
		return r
	}
	out := *r
	out.NodeClaims = kept
	for _, nc := range alt.NodeClaims {
		// Claim names are the plan's own references (consolidation's moves name
		// them): continue the numbering rather than reuse the tail's.
		nc.Name = fmt.Sprintf("%s-%d", nc.NodePool, len(s.claims)+len(out.NodeClaims)+1)
		nc.SizedByDemand = true
		out.NodeClaims = append(out.NodeClaims, nc)
	}
	return &out
}
