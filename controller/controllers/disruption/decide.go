package disruption

import (
	"context"
	"math"
	"sort"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"sigs.k8s.io/controller-runtime/pkg/log"

	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/controller/metrics"
	"github.com/dovetail-sh/dovetail/controller/scheduling"
)

// decide runs the methods in Karpenter's order (drift, emptiness, multi-node, then
// single-node consolidation) and returns the first decision, or nil.
func (c *Controller) decide(ctx context.Context, s *pass) *command {
	now := c.clock.Now()
	var drifted, empty, underutilized []*candidate
	for _, cand := range s.candidates {
		c.reportBlocked(ctx, cand)
		switch {
		case cand.drift != "":
			drifted = append(drifted, cand)
		case !cand.consolidatable(now):
		case len(cand.pods) == 0:
			empty = append(empty, cand)
		case cand.pool.Spec.Disruption.ConsolidationPolicy != v1.ConsolidationPolicyWhenEmpty:
			underutilized = append(underutilized, cand)
		}
	}
	metrics.VoluntaryDisruptionEligibleNodes.WithLabelValues("drifted").Set(float64(len(drifted)))
	metrics.VoluntaryDisruptionEligibleNodes.WithLabelValues("empty").Set(float64(len(empty)))
	metrics.VoluntaryDisruptionEligibleNodes.WithLabelValues("underutilized").Set(float64(len(underutilized)))

	if cmd := c.driftCommand(s, drifted); cmd != nil {
		return cmd
	}
	// Pending pods the provisioner can place are its to place first (they are
	// nominated within a batch, and then count as capacity in use); capacity they may
	// need is not taken away underneath them. Pods nothing can place never block.
	if n := placeablePending(s); n > 0 {
		log.FromContext(ctx).V(1).Info("waiting for pending pods to be placed before consolidating", "pods", n)
		return nil
	}
	if picked := withinBudget(s, unblocked(empty), v1.DisruptionReasonEmpty); len(picked) > 0 {
		return &command{reason: v1.DisruptionReasonEmpty, consolidationType: typeEmpty, candidates: picked}
	}
	consolidatable := withinBudget(s, unblocked(underutilized), v1.DisruptionReasonUnderutilized)
	if cmd := c.multiNode(s, consolidatable); cmd != nil {
		return cmd
	}
	return c.singleNode(s, consolidatable)
}

// reportBlocked puts an event on a blocked node, once per distinct reason.
func (c *Controller) reportBlocked(ctx context.Context, cand *candidate) {
	if cand.blockedBy == "" || c.blocked[cand.node.Name] == cand.blockedBy {
		if cand.blockedBy == "" {
			delete(c.blocked, cand.node.Name)
		}
		return
	}
	c.blocked[cand.node.Name] = cand.blockedBy
	c.recorder.Eventf(cand.node, corev1.EventTypeNormal, "DisruptionBlocked", "Cannot disrupt Node: %s", cand.blockedBy)
	c.recorder.Eventf(cand.claim, corev1.EventTypeNormal, "DisruptionBlocked", "Cannot disrupt NodeClaim: %s", cand.blockedBy)
	log.FromContext(ctx).V(1).Info("disruption blocked", "node", cand.node.Name, "why", cand.blockedBy)
}

func unblocked(cands []*candidate) []*candidate {
	var out []*candidate
	for _, cand := range cands {
		if cand.blockedBy == "" {
			out = append(out, cand)
		}
	}
	return out
}

// withinBudget keeps candidates, in order, while their pool's budget for the reason
// has room.
func withinBudget(s *pass, cands []*candidate, reason v1.DisruptionReason) []*candidate {
	used := map[string]int{}
	var out []*candidate
	for _, cand := range cands {
		pool := cand.pool.Name
		if used[pool] >= s.allowed[pool][reason] {
			continue
		}
		used[pool]++
		out = append(out, cand)
	}
	return out
}

// driftCommand replaces as many drifted nodes of one pool as its budget allows.
func (c *Controller) driftCommand(s *pass, drifted []*candidate) *command {
	byPool := map[string][]*candidate{}
	var pools []string
	for _, cand := range withinBudget(s, unblocked(drifted), v1.DisruptionReasonDrifted) {
		if _, ok := byPool[cand.pool.Name]; !ok {
			pools = append(pools, cand.pool.Name)
		}
		byPool[cand.pool.Name] = append(byPool[cand.pool.Name], cand)
	}
	for _, pool := range pools {
		results := c.simulate(s, byPool[pool])
		if len(results.Unschedulable) > 0 {
			continue
		}
		return &command{reason: v1.DisruptionReasonDrifted, consolidationType: typeDrift, candidates: byPool[pool], replacements: results.NodeClaims}
	}
	return nil
}

// multiNode finds the longest prefix of the candidates (cheapest to disrupt first)
// whose pods fit on the rest of the cluster plus at most one cheaper node.
func (c *Controller) multiNode(s *pass, cands []*candidate) *command {
	if len(cands) > maxMultiNodeCandidates {
		cands = cands[:maxMultiNodeCandidates]
	}
	var best *command
	lo, hi := 2, len(cands)
	for lo <= hi {
		mid := (lo + hi) / 2
		if cmd := c.consolidation(s, cands[:mid], typeMulti); cmd != nil {
			best = cmd
			lo = mid + 1
		} else {
			hi = mid - 1
		}
	}
	return best
}

// singleNode takes the first candidate that can be deleted or replaced by a cheaper node.
func (c *Controller) singleNode(s *pass, cands []*candidate) *command {
	for _, cand := range cands {
		if cmd := c.consolidation(s, []*candidate{cand}, typeSingle); cmd != nil {
			return cmd
		}
	}
	return nil
}

// consolidation is a valid command for the candidates, or nil: their pods must all fit
// on the remaining nodes plus at most one new node that costs less than they do.
func (c *Controller) consolidation(s *pass, cands []*candidate, kind string) *command {
	results := c.simulate(s, cands)
	if len(results.Unschedulable) > 0 || len(results.NodeClaims) > 1 {
		return nil
	}
	cmd := &command{reason: v1.DisruptionReasonUnderutilized, consolidationType: kind, candidates: cands}
	if len(results.NodeClaims) == 0 {
		return cmd
	}
	plan := results.NodeClaims[0]
	if !c.cheaperReplacement(cands, plan) {
		return nil
	}
	cmd.replacements = results.NodeClaims
	return cmd
}

// cheaperReplacement narrows the plan's instance types to those cheaper than the
// candidates together, and applies the spot-to-spot rule.
func (c *Controller) cheaperReplacement(cands []*candidate, plan *scheduling.NodeClaimPlan) bool {
	total, allSpot := 0.0, true
	for _, cand := range cands {
		if math.IsNaN(cand.price) {
			return false
		}
		total += cand.price
		allSpot = allSpot && cand.capacityType == v1.CapacityTypeSpot
	}
	type option struct {
		it    *scheduling.InstanceType
		price float64
		spot  bool
	}
	var cheaper []option
	for _, it := range plan.InstanceTypeOptions {
		o, ok := scheduling.CheapestOffering(it, plan.Requirements)
		if ok && o.Price < total {
			cheaper = append(cheaper, option{it, o.Price, o.CapacityType == v1.CapacityTypeSpot})
		}
	}
	if len(cheaper) == 0 {
		return false
	}
	sort.SliceStable(cheaper, func(i, j int) bool { return cheaper[i].price < cheaper[j].price })
	if allSpot && cheaper[0].spot {
		// A spot node is cheap because it may be taken back; replacing it with the
		// next cheapest spot type invites the same. Karpenter allows it behind a gate,
		// with enough choice.
		if !c.opts.SpotToSpotConsolidation || len(cheaper) < MinSpotToSpotOptions {
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
	return true
}

// placeablePending counts the pending pods the cluster as it is, plus what its
// pools may launch, can place: the provisioner's work in progress. A pod no pool and
// no node can take (a request larger than any type, a selector nothing matches)
// stays pending whatever consolidation does, and must not keep the cluster from
// shrinking. The count is the pass's: it is computed once.
func placeablePending(s *pass) int {
	if s.placeablePending >= 0 {
		return s.placeablePending
	}
	s.placeablePending = 0
	if len(s.snap.Pending) > 0 {
		s.placeablePending = len(s.snap.Pending) - len(s.snap.PlanWithout(nil, s.snap.Pending).Unschedulable)
	}
	return s.placeablePending
}

// simulate plans the candidates' pods onto the cluster without the candidates.
func (c *Controller) simulate(s *pass, cands []*candidate) *scheduling.Results {
	gone := sets.New[string]()
	var pods []*corev1.Pod
	for _, cand := range cands {
		gone.Insert(cand.node.Name, cand.claim.Name)
		pods = append(pods, cand.pods...)
	}
	return s.snap.PlanWithout(gone, pods)
}

// revalidate decides again for the same candidates on the current cluster.
func (c *Controller) revalidate(s *pass, cmd *command) *command {
	current := map[string]*candidate{}
	for _, cand := range s.candidates {
		current[cand.claim.Name] = cand
	}
	now := c.clock.Now()
	var cands []*candidate
	for _, old := range cmd.candidates {
		cand, ok := current[old.claim.Name]
		if !ok || cand.blockedBy != "" || !cand.consolidatable(now) {
			return nil
		}
		cands = append(cands, cand)
	}
	if len(withinBudget(s, cands, cmd.reason)) != len(cands) || placeablePending(s) > 0 {
		return nil
	}
	if cmd.consolidationType == typeEmpty {
		for _, cand := range cands {
			if len(cand.pods) > 0 {
				return nil
			}
		}
		return &command{reason: cmd.reason, consolidationType: typeEmpty, candidates: cands}
	}
	again := c.consolidation(s, cands, cmd.consolidationType)
	if again == nil || len(again.replacements) != len(cmd.replacements) {
		return nil
	}
	return again
}
