package consolidation

import (
	"fmt"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"

	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/controller/scheduling"
)

// batches splits what may start now off the target: per pool, as many of the
// removals, in order, as the pool's budget for their reason allows (a budget is
// shared by the reasons it covers), as one emptiness batch and one consolidation
// batch with the replacements its pods go to.
func batches(cl *Cluster, plan *Plan, r *scheduling.Results, allowed map[string]map[v1.DisruptionReason]int, blocked []Blocked) ([]*Batch, []Blocked) {
	used := map[string]int{}
	// evicting counts, per PodDisruptionBudget, the pods the batches starting now
	// evict: a node whose pods would take a budget past what it allows at once
	// waits for a later batch instead of stalling in a drain the budget refuses.
	evicting := map[string]int{}
	empty := &Batch{Reason: v1.DisruptionReasonEmpty, Type: TypeEmpty}
	under := &Batch{Reason: v1.DisruptionReasonUnderutilized}
	for _, c := range plan.Remove {
		b := under
		if c.Empty() {
			b = empty
		}
		if pdb := overBudget(c, evicting, cl.pdbAllowed); pdb != "" {
			blocked = append(blocked, Blocked{c, fmt.Sprintf("pdb %s allows %d disruption(s) now, all taken by the batch starting now", pdb, cl.pdbAllowed[pdb])})
			continue
		}
		pool := c.Pool.Name
		if n := allowed[pool][b.Reason]; used[pool] >= n {
			reason := fmt.Sprintf("budget: nodepool %s allows %d more node(s) disrupted for %s now", pool, n, b.Reason)
			if n > 0 {
				reason += ", all taken by the batch starting now"
			}
			blocked = append(blocked, Blocked{c, reason})
			continue
		}
		used[pool]++
		for pdb, n := range c.evictions {
			evicting[pdb] += n
		}
		b.Candidates = append(b.Candidates, c)
	}
	var out []*Batch
	if len(empty.Candidates) > 0 {
		out = append(out, empty)
	}
	if len(under.Candidates) == 0 {
		return out, blocked
	}
	under.Type = TypeSingle
	if len(under.Candidates) > 1 {
		under.Type = TypeMulti
	}
	pods := sets.New[types.UID]()
	for _, c := range under.Candidates {
		for _, p := range c.Pods {
			pods.Insert(p.UID)
		}
	}
	for _, nc := range r.NodeClaims {
		for _, p := range nc.Pods {
			if pods.Has(p.UID) {
				under.Replacements = append(under.Replacements, nc)
				break
			}
		}
	}
	awaits := sets.New[string]()
	for _, e := range r.Existing {
		claim, ok := cl.Launching[e.Node.Name]
		if !ok {
			continue
		}
		for _, p := range e.Pods {
			if pods.Has(p.UID) {
				awaits.Insert(claim)
				break
			}
		}
	}
	under.Awaits = sets.List(awaits)
	return append(out, under), blocked
}

// overBudget names a PodDisruptionBudget that evicting c's pods besides those
// already evicting would take past what it allows, or "". The first node to touch a
// budget always may: its drain goes at the pace the budget allows.
func overBudget(c *Candidate, evicting, allowed map[string]int) string {
	for _, pdb := range sets.List(sets.KeySet(c.evictions)) {
		if evicting[pdb] > 0 && evicting[pdb]+c.evictions[pdb] > allowed[pdb] {
			return pdb
		}
	}
	return ""
}
