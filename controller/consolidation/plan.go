package consolidation

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"

	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/controller/capacitymix"
	"github.com/dovetail-sh/dovetail/controller/scheduling"
)

// Consolidation types, as the metrics name them.
const (
	TypeEmpty  = "empty"
	TypeSingle = "single"
	TypeMulti  = "multi"
)

// Options tune a decision.
type Options struct {
	Now time.Time
	// SpotToSpot allows replacing spot nodes with cheaper spot nodes.
	SpotToSpot bool
}

// Plan is what consolidation would do to the cluster: the target fleet (Remove and
// Replacements) and the batches of it the budgets let start now.
type Plan struct {
	// Remove are the candidates the target fleet does without, in the order they go.
	Remove []*Candidate
	// Replacements are the nodes the target launches for pods the kept nodes cannot
	// hold. Each one's instance types are narrowed so that whatever launches keeps
	// the target cheaper than what it removes.
	Replacements []*scheduling.NodeClaimPlan
	// Moves says where the target puts each pod of a removed node.
	Moves []Move
	// PriceRemoved and PriceAdded are the $/h of the removed nodes and of the
	// replacements (list prices; a node whose price is unknown counts 0).
	PriceRemoved, PriceAdded float64
	// Batches may start now: at most one of emptiness and one of consolidation.
	Batches []*Batch
	// Blocked says, for each candidate the plan leaves in place, why.
	Blocked []Blocked
	// Scores are the target's moves that Balanced pools scored, all approved;
	// Rejected those they scored under the threshold, left out of the target.
	Scores, Rejected []Score
}

// Savings is the $/h the target saves.
func (p *Plan) Savings() float64 { return p.PriceRemoved - p.PriceAdded }

// Move is one pod of a removed node and where the target puts it: a kept node, or
// a replacement (by its planned name and instance type).
type Move struct {
	Pod      *corev1.Pod
	From, To string
	// NotRecreated is set for a pod no controller owns: it is evicted like any
	// other, and then it is gone; To is only where it would fit.
	NotRecreated bool
}

// Batch is a part of the target that may start now, within every pool's budget.
type Batch struct {
	Reason     v1.DisruptionReason
	Type       string
	Candidates []*Candidate
	// Replacements are the target's replacements that the batch's pods go to:
	// launched with the batch, sized for the whole target, so later batches fill them.
	Replacements []*scheduling.NodeClaimPlan
	// Awaits names the claims, still starting, that the batch's pods are planned
	// onto: the batch drains only once they have initialized.
	Awaits []string
}

// Price is what the batch's candidates cost per hour.
func (b *Batch) Price() float64 { return priceOf(b.Candidates) }

// Blocked is a candidate the plan leaves in place and why.
type Blocked struct {
	Candidate *Candidate
	Reason    string
}

// Decide computes the target fleet for every pod on the cluster and the batches
// that may start now. Candidates are taken in removal order (empty nodes, then
// those that cost most for the demand they hold); the target removes those that
// cost clearly more than the fleet the engine would build for their pods, with
// their pods planned onto the kept nodes first and new, cheaper nodes after.
// Every removal is checked by the engine with every constraint the pods carry;
// pods of nodes already being disrupted are placed first.
func Decide(cl *Cluster, allowed map[string]map[v1.DisruptionReason]int, opts Options) *Plan {
	plan := &Plan{}
	var eligible []*Candidate
	var hopeless []Score
	for _, c := range cl.Candidates {
		if reason := ineligible(c, opts.Now); reason != "" {
			if c.Drift == "" {
				plan.Blocked = append(plan.Blocked, Blocked{c, reason})
			}
			continue
		}
		if Balanced(c.Pool) && !c.Empty() {
			// Removing it outright is the best any of its moves could score.
			if s := deleteScore(c, cl.Totals); !s.Approved() {
				plan.Blocked = append(plan.Blocked, Blocked{c, fmt.Sprintf("consolidationPolicy Balanced: even deleting it would not be worth evicting its pods: %s", s)})
				hopeless = append(hopeless, s)
				continue
			}
		}
		eligible = append(eligible, c)
	}
	t := newTrial(cl)
	removed, results, rejected := t.balancedTarget(eligible, opts)
	gone := sets.New[*Candidate](removed...)
	for _, s := range rejected {
		gone.Insert(s.Candidates...)
	}
	for _, c := range eligible {
		if s, ok := t.rejectedAlone[c]; ok && !gone.Has(c) {
			rejected = append(rejected, s)
		}
	}
	for _, s := range rejected {
		for _, c := range s.Candidates {
			gone.Insert(c)
			plan.Blocked = append(plan.Blocked, Blocked{c, fmt.Sprintf("consolidationPolicy Balanced: the move that removes it is not worth its disruption: %s", s)})
		}
	}
	plan.Rejected = append(hopeless, rejected...)
	plan.Remove = removed
	if results != nil {
		plan.Replacements = results.NodeClaims
		plan.Moves = moves(removed, results)
		plan.Scores = scoreMoves(removed, results, cl.Totals)
	}
	plan.PriceRemoved = priceOf(removed)
	plan.PriceAdded = scheduling.PriceOf(plan.Replacements)
	for _, c := range eligible {
		if !gone.Has(c) {
			plan.Blocked = append(plan.Blocked, Blocked{c, "no cheaper fit: the cluster needs the node for its pods, and no cheaper node would hold them"})
		}
	}
	plan.Batches, plan.Blocked = batches(cl, plan, results, allowed, plan.Blocked, opts)
	plan.Batches, plan.Blocked = keepingMixes(cl, plan.Batches, plan.Blocked)
	return plan
}

// keepingMixes leaves out what of the batches would break a pool's capacity mix
// (a cheaper fleet that would is not taken). The controller runs the batches
// apart, and a batch that only removes nodes may go in part (what of it has held
// for the validation delay), so each batch is checked as the worst the batches
// kept before it may do: their on-demand removals without their spot ones
// (removing spot never brings a mix further from holding, removing on-demand
// may), or, for a batch with replacements (it goes whole, or its part replanned
// within the mixes), all of it. Of a batch that only removes nodes, the spot
// ones go and as many on-demand ones as the mix allows; a batch with
// replacements goes whole or not at all. Each candidate left out is blocked
// saying so.
func keepingMixes(cl *Cluster, batches []*Batch, blocked []Blocked) ([]*Batch, []Blocked) {
	if cl.Snapshot == nil {
		return batches, blocked
	}
	mixes := capacitymix.Mixes(cl.Snapshot.Pools)
	if mixes == nil {
		return batches, blocked
	}
	now := mixCounts(cl.Snapshot, mixes)
	worst := maps.Clone(now)
	kept := batches[:0:0]
	for i, b := range batches {
		if len(b.Replacements) > 0 {
			after := maps.Clone(worst)
			removeAll(after, b.Candidates)
			add(after, mixes, b.Replacements)
			if why := breaksAny(mixes, now, after); why != "" {
				for _, c := range b.Candidates {
					blocked = append(blocked, Blocked{c, why})
				}
				if hostsOthers(b) {
					// Its replacements also take pods of nodes being disrupted, or
					// of the batches beside it: none of those goes this pass.
					for j, other := range batches {
						for _, c := range other.Candidates {
							if j != i {
								blocked = append(blocked, Blocked{c, why})
							}
						}
					}
					return nil, blocked
				}
				continue
			}
			worst = after
			kept = append(kept, b)
			continue
		}
		trimmed := *b
		trimmed.Candidates = nil
		for _, c := range b.Candidates {
			if !capacitymix.MaySpot(c.Claim) {
				after := maps.Clone(worst)
				removeAll(after, []*Candidate{c})
				if why := breaksAny(mixes, now, after); why != "" {
					blocked = append(blocked, Blocked{c, why})
					continue
				}
				worst = after
			}
			trimmed.Candidates = append(trimmed.Candidates, c)
		}
		if len(trimmed.Candidates) > 0 {
			if trimmed.Type == TypeMulti && len(trimmed.Candidates) == 1 {
				trimmed.Type = TypeSingle
			}
			kept = append(kept, &trimmed)
		}
	}
	return kept, blocked
}

// removeAll takes the candidates' claims out of their pools' counts.
func removeAll(counts map[string]capacitymix.Counts, cands []*Candidate) {
	for _, c := range cands {
		if _, ok := counts[c.Pool.Name]; ok {
			counts[c.Pool.Name] = counts[c.Pool.Name].Without(c.Claim)
		}
	}
}

// add counts the replacements of pools with a mix, as Hold counts them.
func add(counts map[string]capacitymix.Counts, mixes map[string]capacitymix.Mix, replacements []*scheduling.NodeClaimPlan) {
	for _, r := range replacements {
		if hasKey(mixes, r.NodePool) {
			counts[r.NodePool] = counts[r.NodePool].WithPlan(r)
		}
	}
}

// breaksAny says which pool's mix the counts after break, from the counts now,
// or "".
func breaksAny(mixes map[string]capacitymix.Mix, now, after map[string]capacitymix.Counts) string {
	for _, pool := range slices.Sorted(maps.Keys(after)) {
		if mix := mixes[pool]; mix.Breaks(now[pool], after[pool]) {
			return fmt.Sprintf("it would break nodepool %s's capacity mix (%s; now %s)", pool, mix, now[pool])
		}
	}
	return ""
}

// hostsOthers reports whether the batch's replacements are planned to take pods
// other than its candidates'.
func hostsOthers(b *Batch) bool {
	own := sets.New[types.UID]()
	for _, c := range b.Candidates {
		for _, p := range c.Pods {
			own.Insert(p.UID)
		}
	}
	for _, r := range b.Replacements {
		for _, p := range r.Pods {
			if !own.Has(p.UID) {
				return true
			}
		}
	}
	return false
}

// ineligible says why a candidate is not for consolidation now, or "".
func ineligible(c *Candidate, now time.Time) string {
	switch {
	case c.Drift != "":
		return "drifted: " + c.Drift
	case c.Pool.Spec.Replicas != nil:
		return fmt.Sprintf("nodepool %s is static (spec.replicas): it keeps its count of nodes and is not consolidated", c.Pool.Name)
	case c.BlockedBy != "":
		return c.BlockedBy
	case c.ConsolidatableSince.IsZero():
		return fmt.Sprintf("nodepool %s has consolidateAfter: Never", c.Pool.Name)
	case !c.Consolidatable(now):
		return fmt.Sprintf("consolidateAfter has not passed since its last pod change (until %s)", c.ConsolidatableSince.UTC().Format(time.RFC3339))
	case !c.Empty() && c.Pool.Spec.Disruption.ConsolidationPolicy == v1.ConsolidationPolicyWhenEmpty:
		return fmt.Sprintf("nodepool %s consolidates only empty nodes (WhenEmpty)", c.Pool.Name)
	case !c.Empty() && math.IsNaN(c.Price):
		return fmt.Sprintf("the price of %s (%s) is unknown: a node whose price is unknown is removed only when empty", c.InstanceType, c.CapacityType)
	}
	return ""
}

func priceOf(cands []*Candidate) float64 {
	total := 0.0
	for _, c := range cands {
		if !math.IsNaN(c.Price) {
			total += c.Price
		}
	}
	return total
}

// moves lists where the target puts each pod of the removed candidates.
func moves(removed []*Candidate, r *scheduling.Results) []Move {
	to := map[types.UID]string{}
	for _, e := range r.Existing {
		for _, p := range e.Pods {
			to[p.UID] = e.Node.Name
		}
	}
	for _, nc := range r.NodeClaims {
		for _, p := range nc.Pods {
			to[p.UID] = fmt.Sprintf("new %s (%s)", nc.InstanceType.Name, nc.Name)
		}
	}
	var out []Move
	for _, c := range removed {
		for _, p := range c.Pods {
			out = append(out, Move{Pod: p, From: c.Node.Name, To: to[p.UID], NotRecreated: !Recreated(p)})
		}
	}
	return out
}

// String says what the batch does, for logs and events.
func (b *Batch) String() string { return Describe(b.Reason, b.Candidates, b.Replacements) }

// Describe says what a disruption does to its candidates (with why each drifted,
// if it did), for logs and events.
func Describe(reason v1.DisruptionReason, cands []*Candidate, replacements []*scheduling.NodeClaimPlan) string {
	names := make([]string, len(cands))
	for i, c := range cands {
		names[i] = c.Claim.Name + "/" + c.InstanceType
		if c.Drift != "" {
			names[i] += " (" + c.Drift + ")"
		}
	}
	action := "delete"
	if len(replacements) > 0 {
		its := make([]string, len(replacements))
		for i, r := range replacements {
			its[i] = r.InstanceType.Name
		}
		action = "replace with " + strings.Join(its, ", ")
	}
	return fmt.Sprintf("%s: %s %s", reason, action, strings.Join(names, ", "))
}
