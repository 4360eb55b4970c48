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
func batches(cl *Cluster, plan *Plan, r *scheduling.Results, allowed map[string]map[v1.DisruptionReason]int, blocked []Blocked, opts Options) ([]*Batch, []Blocked) {
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
	under.Type = typeOf(under.Candidates)
	under.Replacements, under.Awaits = destinations(cl, under.Candidates, r)
	if held := len(plan.Remove) - len(empty.Candidates) - len(under.Candidates); len(under.Replacements) > 0 && held > 0 {
		// A budget or a PodDisruptionBudget holds part of the plan back, and the
		// nodes held stay while this batch drains. kube-scheduler puts each evicted
		// pod on the node that fits with the most room left, which is often one of
		// them rather than the new node the plan sized for pods of several batches:
		// the new node stays empty, is removed, and the pods move again in the next
		// batch. So the batch is planned alone, onto the nodes that stay, as
		// Karpenter plans each of its moves; the plan's replacements remain for
		// pods that fit nowhere else.
		alone := Replan(cl, under.Candidates, empty.Candidates, opts)
		if alone == nil {
			// Under a capacity mix the part's own plan may break it where the
			// whole target did not (removing on-demand nodes the target's
			// replacements made up for): planned without the mixes, keepingMixes
			// keeps what of it they allow (the spot nodes, for one).
			alone = replan(cl, under.Candidates, empty.Candidates, opts, false)
		}
		if alone != nil {
			under = alone
		}
	}
	return append(out, under), blocked
}

func typeOf(cands []*Candidate) string {
	if len(cands) > 1 {
		return TypeMulti
	}
	return TypeSingle
}

// destinations are the new nodes of the plan r that the candidates' pods go to, and
// the claims still starting that some of them are planned onto.
func destinations(cl *Cluster, cands []*Candidate, r *scheduling.Results) ([]*scheduling.NodeClaimPlan, []string) {
	pods := sets.New[types.UID]()
	for _, c := range cands {
		for _, p := range c.Pods {
			pods.Insert(p.UID)
		}
	}
	var replacements []*scheduling.NodeClaimPlan
	for _, nc := range r.NodeClaims {
		for _, p := range nc.Pods {
			if pods.Has(p.UID) {
				replacements = append(replacements, nc)
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
	return replacements, sets.List(awaits)
}

// Replan is a consolidation batch of exactly these candidates, planned afresh on
// the cluster as it is: their pods onto the kept nodes first, then onto new nodes
// each cheaper than the nodes whose pods it takes. The nodes of beside, a batch
// starting with it, are gone too, and their pods are placed too. It is nil when
// a pod would have no place, removing them would save nothing, or a Balanced pool
// would not approve the move. A batch whose replacements were sized for more
// candidates than have held for the validation delay, or than the budgets let go
// now, goes this way with the part that may.
func Replan(cl *Cluster, cands, beside []*Candidate, opts Options) *Batch {
	return replan(cl, cands, beside, opts, true)
}

// replan is Replan; withinMixes false plans it as if no pool had a capacity
// mix (nil when none has one: that is Replan).
func replan(cl *Cluster, cands, beside []*Candidate, opts Options, withinMixes bool) *Batch {
	if len(cands) == 0 {
		return nil
	}
	t := newTrial(cl)
	if !withinMixes {
		if t.mixes == nil {
			return nil
		}
		t.mixes, t.mixCounts = nil, nil
	}
	for _, c := range beside {
		t.alsoGone.Insert(c.Node.Name, c.Claim.Name)
		// An empty node's pods cost nothing to move, but still need a place.
		t.alsoMoving = append(t.alsoMoving, c.Pods...)
	}
	run := t.replace(cands, opts)
	if run.results == nil || run.savings <= 1e-9 || len(failingScores(cands, run.results, cl.Totals)) > 0 {
		return nil
	}
	b := &Batch{Reason: v1.DisruptionReasonUnderutilized, Type: typeOf(cands), Candidates: cands}
	b.Replacements, b.Awaits = destinations(cl, cands, run.results)
	return b
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
