package consolidation

import (
	"fmt"
	"math"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"

	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/controller/scheduling"
)

// BalancedK is the k of consolidationPolicy Balanced: a move goes only when the
// share of its pool's $/h it saves is at least 1/k of the share of its pool's
// disruption cost it evicts (Karpenter's designs/balanced-consolidation.md: k = 2 is
// the smallest k under which a uniform pool's replace to half the price passes).
const BalancedK = 2

// PerNodeDisruptionCost is what draining a node costs beyond its pods' eviction
// costs (cordon, drain, replacement latency): it keeps a move that evicts
// nothing from dividing by zero, as in Karpenter.
const PerNodeDisruptionCost = 1.0

// PoolTotals are what a Balanced pool's moves are measured against: the $/h and
// the disruption cost of all its nodes, candidates or not.
type PoolTotals struct {
	Cost, Disruption float64
}

// Score is how one move weighs for one Balanced pool.
type Score struct {
	Pool string
	// Candidates are the pool's nodes the move removes.
	Candidates []*Candidate
	// Savings is the pool's share of the move's net $/h saved.
	Savings float64
	// SavingsFraction and DisruptionFraction are the move's savings and
	// disruption cost as shares of the pool's totals.
	SavingsFraction, DisruptionFraction float64
}

// Value is savings share over disruption share; 0 when nothing is saved.
func (s Score) Value() float64 {
	if s.SavingsFraction <= 0 {
		return 0
	}
	if s.DisruptionFraction <= 0 {
		return math.Inf(1)
	}
	return s.SavingsFraction / s.DisruptionFraction
}

// Threshold is the least Value a Balanced move needs.
func (Score) Threshold() float64 { return 1.0 / BalancedK }

// Approved reports whether the move is worth its disruption.
func (s Score) Approved() bool { return s.Value() >= s.Threshold() }

// String is Karpenter's event text for a scored move.
func (s Score) String() string {
	op := ">="
	if !s.Approved() {
		op = "<"
	}
	return fmt.Sprintf("score %.2f %s threshold %.2f (k: %d, savings %.1f%%, disruption %.1f%%)",
		s.Value(), op, s.Threshold(), BalancedK, s.SavingsFraction*100, s.DisruptionFraction*100)
}

// Balanced reports whether the pool scores its moves.
func Balanced(np *v1.NodePool) bool {
	return np.Spec.Disruption.ConsolidationPolicy == v1.ConsolidationPolicyBalanced
}

// rescheduleCost is a node's disruption cost for scoring: the per-node cost plus
// each pod's eviction cost, a pod whose cost is negative counting nothing.
func rescheduleCost(pods []*corev1.Pod) float64 {
	cost := PerNodeDisruptionCost
	for _, p := range pods {
		cost += math.Max(0, EvictionCost(p))
	}
	return cost
}

// deleteScore is the best any move of c could score: removing it for nothing.
// When even that is under the threshold, no replacement can pass.
func deleteScore(c *Candidate, totals map[string]PoolTotals) Score {
	return scoreFor(c.Pool.Name, []*Candidate{c}, c.Price, totals[c.Pool.Name])
}

func scoreFor(pool string, cands []*Candidate, savings float64, t PoolTotals) Score {
	s := Score{Pool: pool, Candidates: cands, Savings: savings}
	if t.Cost <= 0 || t.Disruption <= 0 || math.IsNaN(savings) {
		return s
	}
	disruption := 0.0
	for _, c := range cands {
		disruption += rescheduleCost(c.Pods)
	}
	s.SavingsFraction = savings / t.Cost
	s.DisruptionFraction = disruption / t.Disruption
	return s
}

// scoreMoves splits a target into its moves and scores each for every Balanced
// pool it removes nodes of. A move is the removed nodes that share new nodes (a
// node whose pods all fit on kept nodes is a move of its own) with those new
// nodes; its net savings are shared among its pools by what their nodes cost, as
// Karpenter shares a cross-pool move's. Empty nodes are not scored: their removal
// is emptiness, which every policy does.
func scoreMoves(removed []*Candidate, r *scheduling.Results, totals map[string]PoolTotals) []Score {
	var scored []*Candidate
	for _, c := range removed {
		if Balanced(c.Pool) && !c.Empty() {
			scored = append(scored, c)
		}
	}
	if len(scored) == 0 {
		return nil
	}
	// Union the removed nodes whose pods share a new node.
	parent := map[*Candidate]*Candidate{}
	var find func(c *Candidate) *Candidate
	find = func(c *Candidate) *Candidate {
		if p, ok := parent[c]; ok && p != c {
			root := find(p)
			parent[c] = root
			return root
		}
		return c
	}
	from := map[types.UID]*Candidate{}
	for _, c := range removed {
		if c.Empty() {
			continue
		}
		parent[c] = c
		for _, p := range c.Pods {
			from[p.UID] = c
		}
	}
	// A new node's price goes to the move of the removed nodes whose pods it takes.
	var claims []*scheduling.NodeClaimPlan
	var firstSource []*Candidate
	if r != nil {
		for _, nc := range r.NodeClaims {
			var srcs []*Candidate
			for _, p := range nc.Pods {
				if c, ok := from[p.UID]; ok && !slices.Contains(srcs, c) {
					srcs = append(srcs, c)
				}
			}
			if len(srcs) == 0 {
				continue
			}
			for _, c := range srcs[1:] {
				parent[find(c)] = find(srcs[0])
			}
			claims, firstSource = append(claims, nc), append(firstSource, srcs[0])
		}
	}
	added := map[*Candidate]float64{}
	for i, nc := range claims {
		added[find(firstSource[i])] += nc.Offering.Price
	}
	members := map[*Candidate][]*Candidate{}
	var roots []*Candidate
	for _, c := range removed {
		if c.Empty() {
			continue
		}
		root := find(c)
		if _, ok := members[root]; !ok {
			roots = append(roots, root)
		}
		members[root] = append(members[root], c)
	}
	var out []Score
	for _, root := range roots {
		move := members[root]
		price := priceOf(move)
		savings := price - added[root]
		byPool := map[string][]*Candidate{}
		var pools []string
		for _, c := range move {
			if !Balanced(c.Pool) {
				continue
			}
			if _, ok := byPool[c.Pool.Name]; !ok {
				pools = append(pools, c.Pool.Name)
			}
			byPool[c.Pool.Name] = append(byPool[c.Pool.Name], c)
		}
		for _, pool := range pools {
			share := savings
			if len(byPool[pool]) < len(move) && price > 0 {
				share = savings * priceOf(byPool[pool]) / price
			}
			out = append(out, scoreFor(pool, byPool[pool], share, totals[pool]))
		}
	}
	return out
}

// MaxBalancedRounds is how many times a target is planned again without the
// nodes of moves a Balanced pool rejected; after that only removals that launch
// nothing are planned, each of which passes (deleting each node alone passed, and
// a set of deletions scores at least as well as its worst member).
const MaxBalancedRounds = 4

// balancedTarget is the target with no move a Balanced pool scores under the
// threshold, and the moves it rejected. A fleet planned afresh is one move that
// touches most nodes, which a Balanced pool may reject where a smaller move of
// Karpenter's shape (nodes removed, at most one new node) passes; the better of
// the best such move and the target planned again without the rejected moves'
// nodes is taken.
func (t *trial) balancedTarget(eligible []*Candidate, opts Options) ([]*Candidate, *scheduling.Results, []Score) {
	removed, results := t.target(eligible, opts)
	rejected := failingScores(removed, results, t.cl.Totals)
	if len(rejected) == 0 {
		return removed, results, nil
	}
	single := t.bestSingleReplacement(reversed(keepOrder(eligible)), eligible, 0, opts)
	for round := 1; ; round++ {
		out := map[*Candidate]bool{}
		for _, s := range rejected {
			for _, c := range s.Candidates {
				out[c] = true
			}
		}
		eligible = slices.DeleteFunc(slices.Clone(eligible), func(c *Candidate) bool { return out[c] })
		var failing []Score
		if round < MaxBalancedRounds {
			removed, results = t.target(eligible, opts)
			failing = failingScores(removed, results, t.cl.Totals)
		} else {
			run := t.deletions(reversed(keepOrder(eligible)))
			removed, results = run.removed, run.results
		}
		if len(failing) == 0 {
			break
		}
		rejected = append(rejected, failing...)
	}
	if single.results != nil && single.savings > savingsOf(removed, results)+1e-9 {
		// The move taken stands; what the rejected moves would have removed besides
		// it stays, as they said.
		taken := sets.New(single.removed...)
		rejected = slices.DeleteFunc(rejected, func(s Score) bool { return slices.ContainsFunc(s.Candidates, taken.Has) })
		return single.removed, single.results, rejected
	}
	return removed, results, rejected
}

func failingScores(removed []*Candidate, r *scheduling.Results, totals map[string]PoolTotals) []Score {
	var out []Score
	for _, s := range scoreMoves(removed, r, totals) {
		if !s.Approved() {
			out = append(out, s)
		}
	}
	return out
}

func savingsOf(removed []*Candidate, r *scheduling.Results) float64 {
	if r == nil {
		return 0
	}
	return priceOf(removed) - scheduling.PriceOf(r.NodeClaims)
}
