package consolidation

import (
	"maps"
	"math"
	"slices"
	"sort"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"

	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/controller/capacitymix"
	"github.com/dovetail-sh/dovetail/controller/scheduling"
)

// keepOrder puts the candidates most worth keeping first: the fullest (their pods
// would cost the most to move, and they waste the least), then the cheapest, then
// the costliest to disrupt. Removal goes the other way.
func keepOrder(cands []*Candidate) []*Candidate {
	out := append([]*Candidate(nil), cands...)
	util := make(map[*Candidate]float64, len(out))
	for _, c := range out {
		util[c] = utilization(c, requestsOf(c.Pods))
	}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if util[a] != util[b] {
			return util[a] > util[b]
		}
		if a.Price != b.Price {
			return a.Price < b.Price
		}
		if a.DisruptionCost != b.DisruptionCost {
			return a.DisruptionCost > b.DisruptionCost
		}
		// Lists come from the informer cache in no fixed order; a plan that picked
		// different equal nodes each pass would never hold for the validation delay.
		return a.Claim.Name > b.Claim.Name
	})
	return out
}

func requestsOf(pods []*corev1.Pod) scheduling.Resources {
	var r scheduling.Resources
	for _, p := range pods {
		r = r.Add(scheduling.PodRequests(p))
	}
	return r
}

// utilization is the larger of the cpu and memory shares of the node's
// allocatable that used takes.
func utilization(c *Candidate, used scheduling.Resources) float64 {
	alloc := scheduling.FromResourceList(c.Node.Status.Allocatable)
	u := 0.0
	if alloc.MilliCPU > 0 {
		u = float64(used.MilliCPU) / float64(alloc.MilliCPU)
	}
	if alloc.Memory > 0 {
		u = max(u, float64(used.Memory)/float64(alloc.Memory))
	}
	return u
}

// trial plans removals on the cluster.
type trial struct {
	cl *Cluster
	// stuck are the moving pods that have no place even with nothing removed: a
	// removal is not blamed for them.
	stuck sets.Set[types.UID]
	// rejectedAlone holds the score of each candidate whose removal alone a
	// Balanced pool rejected.
	rejectedAlone map[*Candidate]Score
	// savingAlone are the candidates a decision of Karpenter's shape removes alone
	// with savings, in the order tried.
	savingAlone []*Candidate
	// alsoGone are nodes (and their claims) that go whatever the trial removes:
	// those of a batch starting beside the one planned; alsoMoving are their pods.
	alsoGone   sets.Set[string]
	alsoMoving []*corev1.Pod
	// mixes are the capacity mixes of the pools that state one (nil when none
	// does), and mixCounts their nodes now.
	mixes     map[string]capacitymix.Mix
	mixCounts map[string]capacitymix.Counts
}

func newTrial(cl *Cluster) *trial {
	t := &trial{cl: cl, stuck: sets.New[types.UID](), rejectedAlone: map[*Candidate]Score{}, alsoGone: sets.New[string]()}
	if cl.Snapshot != nil {
		if t.mixes = capacitymix.Mixes(cl.Snapshot.Pools); t.mixes != nil {
			t.mixCounts = mixCounts(cl.Snapshot, t.mixes)
		}
	}
	if len(cl.Moving) > 0 {
		for _, u := range cl.Snapshot.PlanWithout(nil, cl.Moving).Unschedulable {
			t.stuck.Insert(u.Pod.UID)
		}
	}
	return t
}

// solve plans the moving pods and the candidates' pods onto the cluster without
// the candidates; with launch it may add nodes. It returns nil when a pod would be
// left without a place.
func (t *trial) solve(cands []*Candidate, launch bool) *scheduling.Results {
	return t.solveOn(t.cl.Snapshot, cands, launch)
}

// solveWithoutOwnTypes is solve with the candidates' own instance types left out
// of what new nodes may be: the replacement a plan that would launch one of them
// again has instead (see narrowToCheaper).
func (t *trial) solveWithoutOwnTypes(cands []*Candidate) *scheduling.Results {
	own := sets.New[string]()
	for _, c := range cands {
		own.Insert(c.InstanceType)
	}
	snap := *t.cl.Snapshot
	snap.InstanceTypes = make(map[string][]*scheduling.InstanceType, len(t.cl.Snapshot.InstanceTypes))
	for pool, types := range t.cl.Snapshot.InstanceTypes {
		snap.InstanceTypes[pool] = slices.DeleteFunc(slices.Clone(types), func(it *scheduling.InstanceType) bool { return own.Has(it.Name) })
	}
	return t.solveOn(&snap, cands, true)
}

// launchesOwnType reports whether some new node may be one of the removed nodes'
// own types.
func launchesOwnType(r *scheduling.Results, removed []*Candidate) bool {
	for _, c := range removed {
		for _, nc := range r.NodeClaims {
			if slices.ContainsFunc(nc.InstanceTypeOptions, func(it *scheduling.InstanceType) bool { return it.Name == c.InstanceType }) {
				return true
			}
		}
	}
	return false
}

// replacementFor plans the removed nodes' pods with new nodes allowed, at most
// maxNew of them, narrowed to what is cheaper (narrowToCheaper); with again, a
// plan refused because it would launch one of the removed nodes' own types again
// is planned once more without those types. nil when there is no such plan.
func (t *trial) replacementFor(removed []*Candidate, maxNew int, again bool, opts Options) (r *scheduling.Results, placed bool) {
	r = t.solve(removed, true)
	if r == nil || len(r.NodeClaims) > maxNew {
		return nil, false
	}
	// Asked before narrowing, which changes the plans it passes: whether the
	// plan launches one of the removed nodes' own types, and whether that is all
	// that stops it (narrowed without the rule, on copies, it would pass). Only
	// then is a plan without those types worth a solve.
	ownTypeStops := false
	if again && launchesOwnType(r, removed) {
		copies := make([]*scheduling.NodeClaimPlan, len(r.NodeClaims))
		for i, nc := range r.NodeClaims {
			c := *nc
			copies[i] = &c
		}
		ownTypeStops = narrowToCheaper(copies, ceilings(removed, r), nil, allSpot(removed), opts.SpotToSpot)
	}
	if len(r.NodeClaims) == 0 || narrowToCheaper(r.NodeClaims, ceilings(removed, r), removed, allSpot(removed), opts.SpotToSpot) {
		return r, true
	}
	if !ownTypeStops {
		return nil, true
	}
	other := t.solveWithoutOwnTypes(removed)
	if other == nil || len(other.NodeClaims) > maxNew || len(other.NodeClaims) == 0 ||
		!narrowToCheaper(other.NodeClaims, ceilings(removed, other), removed, allSpot(removed), opts.SpotToSpot) {
		return nil, true
	}
	return other, true
}

func (t *trial) solveOn(snap *scheduling.Snapshot, cands []*Candidate, launch bool) *scheduling.Results {
	gone := t.alsoGone.Clone()
	pods := append(append([]*corev1.Pod(nil), t.cl.Moving...), t.alsoMoving...)
	for _, c := range cands {
		gone.Insert(c.Node.Name, c.Claim.Name)
		pods = append(pods, c.Pods...)
	}
	r := snap.Plan(gone, pods, launch)
	for _, u := range r.Unschedulable {
		if !t.stuck.Has(u.Pod.UID) {
			return nil
		}
	}
	if !t.holdMixes(r, gone) {
		return nil
	}
	return r
}

// holdMixes makes the plan's new nodes what they will launch as within their
// pools' capacity mixes, with the nodes it removes gone (a replacement that would
// be spot beyond a mix is priced on-demand, so the target never counts on it),
// and reports whether the plan keeps every mix: a cheaper fleet that breaks one
// is no plan.
func (t *trial) holdMixes(r *scheduling.Results, gone sets.Set[string]) bool {
	if t.mixes == nil {
		return true
	}
	after := maps.Clone(t.mixCounts)
	for name := range gone {
		if nc := t.cl.Snapshot.Claims[name]; nc != nil {
			if pool := nc.Labels[v1.LabelNodePool]; hasKey(t.mixes, pool) {
				after[pool] = after[pool].Without(nc)
			}
		}
	}
	capacitymix.Hold(r.NodeClaims, t.mixes, after)
	for pool, mix := range t.mixes {
		if mix.Breaks(t.mixCounts[pool], after[pool]) {
			return false
		}
	}
	return true
}

// mixCounts are the nodes of the snapshot's pools that have a mix.
func mixCounts(snap *scheduling.Snapshot, mixes map[string]capacitymix.Mix) map[string]capacitymix.Counts {
	counts := map[string]capacitymix.Counts{}
	for _, nc := range snap.Claims {
		if pool := nc.Labels[v1.LabelNodePool]; hasKey(mixes, pool) {
			counts[pool] = counts[pool].With(nc)
		}
	}
	return counts
}

func hasKey[V any](m map[string]V, k string) bool {
	_, ok := m[k]
	return ok
}

// SparseUtilization is the share of a kept node (the mean of its cpu and memory
// shares) below which the target also tries replacing it: the last node a repack
// fills is partly empty, a node whose pods nothing else can take may be larger
// than they need, and a repack that fills nodes pod by pod leaves one resource
// idle where the pods' mix does not match the node's. Measured on the bench
// cluster at 500 nodes: 0.6 left the fleet at 1.13 times the lower bound, 0.75 at
// 1.04 moving 325 nodes' pods, 0.9 at 1.02 moving 382.
const SparseUtilization = 0.75

// target returns the candidates the target removes, in the order they go, and the
// engine's plan for their pods (nil when nothing is removed). Three plans of the
// candidates' pods, whatever the cluster's size:
//  1. every candidate's pods are planned afresh onto the cluster, with the
//     candidates emptied and offered fullest first (the engine fills the first
//     node that fits): the candidates left empty are the ones the cluster can do
//     without;
//  2. their pods are planned onto the cluster as it is without them, new nodes
//     allowed where the kept nodes' free room is not where the pods can go;
//  3. the same with the kept candidates that stayed sparse in plan 1 removed too,
//     taken when new, smaller nodes make it cheaper.
//
// Where a pool's capacity mix has no on-demand node to spare, the three are also
// planned with its on-demand candidates kept first (mixKeepOrder).
func (t *trial) target(cands []*Candidate, opts Options) ([]*Candidate, *scheduling.Results) {
	if len(cands) == 0 {
		return nil, nil
	}
	keep := keepOrder(cands)
	best := t.repackRun(keep, opts)
	if mixKeep, ok := t.mixKeepOrder(keep); ok {
		if other := t.repackRun(mixKeep, opts); other.results != nil && (best.results == nil || other.savings > best.savings+1e-9) {
			best = other
		}
	}
	removal := reversed(keep)
	// A fleet planned afresh is not always the cheaper end: the engine may trade a
	// node that is already right for its pods into the new fleet. The best
	// decision of Karpenter's shape is the floor.
	if single := t.bestSingleReplacement(removal, cands, best.savings, opts); single.results != nil {
		best = single
	}
	// The candidates each of which a cheaper node would replace alone are tried
	// together: Karpenter replaces them one a pass (one new node a decision), a
	// validation delay apart each.
	var alone []*Candidate
	for _, c := range t.savingAlone {
		if slices.Contains(cands, c) {
			alone = append(alone, c)
		}
	}
	if len(alone) > 1 {
		if together := t.replaceRun(alone, opts); together.results != nil && together.savings > best.savings+1e-9 {
			best = together
		}
	}
	return best.removed, best.results
}

// repackRun is the best removal plans 1 and 3 find with the candidates in keep
// order, or else the longest run of them, in removal order, whose pods fit on the
// rest without launching anything.
func (t *trial) repackRun(keep []*Candidate, opts Options) candidateRun {
	repacked := t.repack(keep)
	placed := map[string]scheduling.Resources{}
	if repacked != nil {
		for _, e := range repacked.Existing {
			if len(e.Pods) > 0 {
				placed[e.Node.Name] = requestsOf(e.Pods)
			}
		}
	}
	var emptied, sparse []*Candidate
	for i := len(keep) - 1; i >= 0; i-- {
		c := keep[i]
		used, ok := placed[c.Node.Name]
		switch {
		case repacked == nil:
		case !ok:
			emptied = append(emptied, c)
		case balancedUse(c, used) < SparseUtilization && !math.IsNaN(c.Price):
			sparse = append(sparse, c)
		}
	}
	// Removing the sparse nodes too is tried first: when it saves more than the
	// emptied nodes cost (all that removing them alone could save), the plan for
	// the emptied nodes alone is not needed.
	var best candidateRun
	if len(sparse) > 0 {
		more := t.replace(append(append([]*Candidate(nil), emptied...), sparse...), opts)
		if more.results != nil && more.savings > priceOf(emptied)+1e-9 {
			best = more
		} else {
			best = t.replace(emptied, opts)
			if more.results != nil && (best.results == nil || more.savings > best.savings+1e-9) {
				best = more
			}
		}
	} else {
		best = t.replace(emptied, opts)
	}
	if best.results == nil {
		best = t.deletions(reversed(keep))
	}
	return best
}

// mixKeepOrder is keep with, in each pool whose capacity mix has no on-demand
// node to spare, the on-demand candidates before the spot ones, so the repack
// moves pods off spot nodes the mix lets go rather than empty on-demand ones it
// needs: after a scale-in, the pods left on spot nodes would otherwise hold them
// while the empty on-demand nodes stay for the mix. false when no pool is so.
func (t *trial) mixKeepOrder(keep []*Candidate) ([]*Candidate, bool) {
	tight := sets.New[string]()
	for pool, mix := range t.mixes {
		if mix.NeedsEachOnDemand(t.mixCounts[pool]) {
			tight.Insert(pool)
		}
	}
	if tight.Len() == 0 {
		return nil, false
	}
	spotLast := func(c *Candidate) int {
		if tight.Has(c.Pool.Name) && capacitymix.MaySpot(c.Claim) {
			return 1
		}
		return 0
	}
	out := slices.Clone(keep)
	slices.SortStableFunc(out, func(a, b *Candidate) int { return spotLast(a) - spotLast(b) })
	return out, !slices.Equal(out, keep)
}

// replaceRun replaces all the candidates, or else the longest run of them, in
// order, that replace accepts. All of them together can fail where a part would
// not: on consolidation-1000-700, 42 nodes of two large and seven small pods each
// were each worth replacing alone, but the rest of the cluster had room for only
// some of their small pods, and the plan for all of them launched more nodes than
// it removed. Replayed, the first 13 go together and save $4.90/h in one decision;
// one a pass ($0.40/h each, 35-47 s apart) took seven minutes for twelve.
func (t *trial) replaceRun(order []*Candidate, opts Options) candidateRun {
	if all := t.replace(order, opts); all.results != nil {
		return all
	}
	return longestRun(order, 2, len(order)-1, func(run []*Candidate) candidateRun { return t.replace(run, opts) })
}

// repack plans the moving pods and every candidate's pods onto the cluster with the
// candidates emptied of them and offered in keep order.
func (t *trial) repack(keep []*Candidate) *scheduling.Results {
	gone := sets.New[string]()
	moved := sets.New[types.UID]()
	pods := append([]*corev1.Pod(nil), t.cl.Moving...)
	for _, c := range keep {
		gone.Insert(c.Node.Name, c.Claim.Name)
		pods = append(pods, c.Pods...)
		for _, p := range c.Pods {
			moved.Insert(p.UID)
		}
	}
	byName := map[string]*scheduling.ExistingNode{}
	nodes := make([]*scheduling.ExistingNode, 0, len(t.cl.Snapshot.Nodes))
	for _, n := range t.cl.Snapshot.Nodes {
		if gone.Has(n.Name) {
			byName[n.Name] = n
			continue
		}
		nodes = append(nodes, n)
	}
	for _, c := range keep {
		n, ok := byName[c.Node.Name]
		if !ok {
			continue
		}
		emptied := *n
		emptied.Pods = nil
		for _, p := range n.Pods {
			if !moved.Has(p.UID) {
				emptied.Pods = append(emptied.Pods, p)
			}
		}
		nodes = append(nodes, &emptied)
	}
	r := t.cl.Snapshot.PlanOn(nodes, nil, pods, true)
	for _, u := range r.Unschedulable {
		if !t.stuck.Has(u.Pod.UID) {
			return nil
		}
	}
	// Priced within the mixes; whether the repack keeps them does not matter: it
	// only finds the nodes the cluster can do without, and each plan for removing
	// them is checked.
	t.holdMixes(r, gone)
	return r
}

// balancedUse is the mean of the cpu and memory shares of the node's allocatable
// that used takes: a node full of cpu but with most of its memory idle (or the
// reverse) wastes what it leaves idle.
func balancedUse(c *Candidate, used scheduling.Resources) float64 {
	alloc := scheduling.FromResourceList(c.Node.Status.Allocatable)
	if alloc.MilliCPU <= 0 || alloc.Memory <= 0 {
		return utilization(c, used)
	}
	return (float64(used.MilliCPU)/float64(alloc.MilliCPU) + float64(used.Memory)/float64(alloc.Memory)) / 2
}

func reversed(cands []*Candidate) []*Candidate {
	out := make([]*Candidate, len(cands))
	for i, c := range cands {
		out[len(cands)-1-i] = c
	}
	return out
}

// deletions finds the longest run of the candidates, in removal order, whose pods
// fit on the rest of the cluster without launching anything.
func (t *trial) deletions(order []*Candidate) candidateRun {
	return longestRun(order, 1, len(order), func(run []*Candidate) candidateRun {
		if r := t.solve(run, false); r != nil {
			return candidateRun{removed: run, results: r, savings: priceOf(run)}
		}
		return candidateRun{}
	})
}

// longestRun is the longest run order[:n], from n lo to hi, that plan accepts
// (gives results for). Accepting is close to monotone in the run's length, so a
// binary search finds it.
func longestRun(order []*Candidate, lo, hi int, plan func([]*Candidate) candidateRun) candidateRun {
	best := candidateRun{}
	for lo <= hi {
		mid := (lo + hi) / 2
		if run := plan(order[:mid]); run.results != nil {
			best = run
			lo = mid + 1
		} else {
			hi = mid - 1
		}
	}
	return best
}

type candidateRun struct {
	removed []*Candidate
	results *scheduling.Results
	savings float64
}

// replace plans removing the candidates, new nodes allowed. The run is invalid (no
// results) when there is nothing to remove, a pod has no place, it would launch
// more nodes than it removes, the new nodes would not cost less than the nodes
// removed (together, and each one than the nodes whose pods it takes), or the
// rules for replacing spot capacity forbid them.
//
// Consolidation never grows the node count, as Karpenter's (at most one new node
// for one or more removed) does not: a plan that splits a few large nodes into
// many small ones saves only if every pod lands where it planned, and
// kube-scheduler puts each evicted pod on the emptiest node that fits instead.
// On consolidation-1000-700 such splits (34 nodes into 71, 12 into 26) left small
// nodes part-filled, which the next pass merged back into large ones, and the
// fleet went back and forth for minutes.
func (t *trial) replace(removed []*Candidate, opts Options) candidateRun {
	run := candidateRun{removed: removed}
	if len(removed) == 0 {
		return run
	}
	r, _ := t.replacementFor(removed, len(removed), true, opts)
	if r == nil {
		return run
	}
	savings := priceOf(removed) - scheduling.PriceOf(r.NodeClaims)
	if len(r.NodeClaims) > 0 && savings < MinReplacementSavings*priceOf(removed) {
		return run
	}
	run.results = r
	run.savings = savings
	return run
}

// MinReplacementSavings is the share of what the removed nodes cost that a plan
// launching new nodes must save. kube-scheduler, not the plan, places the evicted
// pods, on the emptiest nodes that fit, so a repack never lands exactly as planned:
// measured on consolidation-1000-700, rounds saving a few percent were followed by
// the provisioner launching more for pods left without the room planned for them
// than the round saved, and the fleet never settled. Decisions of Karpenter's shape
// (at most one new node, bestSingleReplacement) need only be cheaper, as in
// Karpenter.
const MinReplacementSavings = 0.1

// MaxMultiNodeCandidates is how many candidates one decision of Karpenter's
// shape removes at most (its multi-node consolidation's limit).
const MaxMultiNodeCandidates = 100

// MaxExhaustiveCandidates is how many candidates bestSingleReplacement tries in
// every combination (255 plans of a small cluster, a few tens of ms; on a cluster
// of more than 64 nodes SingleReplacementWork cuts it short); beyond, it starts
// from Karpenter's own runs (the longest prefix that places its pods, and each
// candidate alone) and improves the best of them.
const MaxExhaustiveCandidates = 8

// SingleReplacementWork bounds the search, in nodes planned: each try plans the
// whole cluster, about 17 µs a node, so the search adds at most about 0.3 s to a
// decision (8 tries on a cluster of 2,000 nodes).
const SingleReplacementWork = 16384

// bestSingleReplacement is the decision of Karpenter's shape that saves the most:
// at most MaxMultiNodeCandidates candidates removed, their pods on the rest and on
// at most one new node that costs less than they do. order is the removal order;
// byCost is the candidates cheapest to disrupt first, the order Karpenter takes
// them in (Observe sorts them so).
// It searches only while such a decision could save more than floor: when even
// removing the dearest candidates for nothing saves no more, it returns none.
func (t *trial) bestSingleReplacement(order, byCost []*Candidate, floor float64, opts Options) candidateRun {
	best := candidateRun{savings: floor}
	if ceilingOfSingle(order) <= floor+1e-9 {
		return candidateRun{}
	}
	trials := max(SingleReplacementWork/max(len(t.cl.Snapshot.Nodes), 1), 1)
	// try reports whether the candidates' pods have a place with at most one new
	// node, and whether that is a decision (it saves), as Karpenter's search asks.
	try := func(removed []*Candidate) (placed, decided bool) {
		if trials <= 0 || len(removed) > MaxMultiNodeCandidates {
			return false, false
		}
		trials--
		run, placed := t.replaceWithOne(removed, opts)
		if len(removed) == 1 && run.results != nil && run.savings > 1e-9 && !slices.Contains(t.savingAlone, removed[0]) {
			t.savingAlone = append(t.savingAlone, removed[0])
		}
		if run.results != nil && run.savings > best.savings+1e-9 {
			best = run
		}
		return placed, run.results != nil
	}
	if len(order) <= MaxExhaustiveCandidates {
		for mask := 1; mask < 1<<len(order); mask++ {
			var removed []*Candidate
			for i, c := range order {
				if mask&(1<<i) != 0 {
					removed = append(removed, c)
				}
			}
			try(removed)
		}
	} else {
		// Karpenter's multi-node run, in its order (cheapest to disrupt first) and
		// in ours: the longest prefix that places its pods.
		// Karpenter's run goes on while it finds a decision; ours while the pods
		// have a place.
		for i, o := range [][]*Candidate{byCost, order} {
			lo, hi := 2, min(len(o), MaxMultiNodeCandidates)
			for lo <= hi {
				mid := (lo + hi) / 2
				if placed, decided := try(o[:mid]); (i == 0 && decided) || (i == 1 && placed) {
					lo = mid + 1
				} else {
					hi = mid - 1
				}
			}
		}
		for _, c := range order {
			try([]*Candidate{c})
		}
		// Then add a candidate, or swap one in for one out, while that saves more.
		for improved := true; improved && best.results != nil; {
			improved = false
			current := best.removed
			for _, c := range order {
				if slices.Contains(current, c) {
					continue
				}
				candidates := [][]*Candidate{append(slices.Clone(current), c)}
				for i := range current {
					swapped := slices.Clone(current)
					swapped[i] = c
					candidates = append(candidates, swapped)
				}
				for _, next := range candidates {
					try(next)
					if len(best.removed) != len(current) || !slices.Equal(best.removed, current) {
						improved = true
						break
					}
				}
				if improved {
					break
				}
			}
		}
	}
	if best.results == nil {
		return candidateRun{}
	}
	return best
}

// ceilingOfSingle is the most any decision of Karpenter's shape could save: the
// price of the dearest candidates it may remove, with nothing launched.
func ceilingOfSingle(order []*Candidate) float64 {
	prices := make([]float64, 0, len(order))
	for _, c := range order {
		if !math.IsNaN(c.Price) {
			prices = append(prices, c.Price)
		}
	}
	slices.Sort(prices)
	slices.Reverse(prices)
	total := 0.0
	for _, p := range prices[:min(len(prices), MaxMultiNodeCandidates)] {
		total += p
	}
	return total
}

// replaceWithOne is replace limited to at most one new node; placed reports
// whether the pods have a place that way at all, cheaper or not.
func (t *trial) replaceWithOne(removed []*Candidate, opts Options) (run candidateRun, placed bool) {
	run = candidateRun{removed: removed}
	// Karpenter's shape: its single replacement filtered, not planned again.
	r, placed := t.replacementFor(removed, 1, false, opts)
	if r == nil {
		return run, placed
	}
	if failing := failingScores(removed, r, t.cl.Totals); len(failing) > 0 {
		// A Balanced pool rejects it: not a decision, though its pods have a place.
		if len(removed) == 1 {
			t.rejectedAlone[removed[0]] = failing[0]
		}
		return run, true
	}
	run.results = r
	run.savings = priceOf(removed) - scheduling.PriceOf(r.NodeClaims)
	return run, true
}

// ceilings are the $/h each new node must stay under: together they cost less
// than the nodes removed (the savings shared out evenly), and each costs less than
// the removed nodes whose pods it takes, so no node is swapped for one as dear or
// dearer. A new node that takes pods of nodes disrupted already answers only to
// the total: those nodes are gone whatever this decision does.
func ceilings(removed []*Candidate, r *scheduling.Results) []float64 {
	budget := priceOf(removed)
	slack := (budget - scheduling.PriceOf(r.NodeClaims)) / float64(len(r.NodeClaims))
	from := map[types.UID]*Candidate{}
	for _, c := range removed {
		for _, p := range c.Pods {
			from[p.UID] = c
		}
	}
	out := make([]float64, len(r.NodeClaims))
	for i, nc := range r.NodeClaims {
		out[i] = nc.Offering.Price + slack
		sources := map[*Candidate]bool{}
		paid, others := 0.0, false
		for _, p := range nc.Pods {
			c, ok := from[p.UID]
			switch {
			case !ok:
				others = true
			case !sources[c]:
				sources[c] = true
				if !math.IsNaN(c.Price) {
					paid += c.Price
				}
			}
		}
		if !others {
			out[i] = min(out[i], paid)
		}
	}
	return out
}
