package consolidation

import (
	"fmt"
	"math"
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
// (a cheaper fleet that would is not taken), counting each batch kept as done for
// the next: a batch with replacements whole, of one that only removes nodes the
// nodes the mix needs; each candidate left out is blocked saying so.
func keepingMixes(cl *Cluster, batches []*Batch, blocked []Blocked) ([]*Batch, []Blocked) {
	if cl.Snapshot == nil || capacitymix.Mixes(cl.Snapshot.Pools) == nil {
		return batches, blocked
	}
	var claims []v1.NodeClaim
	for _, nc := range cl.Snapshot.Claims {
		claims = append(claims, *nc)
	}
	done := mixChanges{gone: sets.New[string](), added: map[string][]string{}}
	kept := batches[:0:0]
	// held are the nodes of removal-only batches the mix kept, each with the
	// batch it would go with; they are tried again once every batch is counted,
	// since a later batch may make room (spot nodes going free on-demand nodes an
	// emptiness batch before it had to keep).
	var held []*Candidate
	heldIn := map[*Candidate]*Batch{}
	for _, b := range batches {
		why := breaksMix(cl, b, claims, done)
		if why == "" {
			kept = append(kept, b)
			done.record(b)
			continue
		}
		if len(b.Replacements) > 0 {
			// Its replacements were sized for all of its candidates, and the other
			// batches may count on them for the pods of nodes being disrupted: none
			// goes this pass.
			for _, other := range batches {
				for _, c := range other.Candidates {
					blocked = append(blocked, Blocked{c, why})
				}
			}
			return nil, blocked
		}
		// Nodes removed outright: as many go as the mix allows, in the batch's order.
		trimmed := *b
		trimmed.Candidates = nil
		for _, c := range b.Candidates {
			if breaksMix(cl, &Batch{Candidates: []*Candidate{c}}, claims, done) != "" {
				held = append(held, c)
				heldIn[c] = &trimmed
				continue
			}
			trimmed.Candidates = append(trimmed.Candidates, c)
			done.record(&Batch{Candidates: []*Candidate{c}})
		}
		if len(trimmed.Candidates) > 0 {
			kept = append(kept, &trimmed)
		}
	}
	for _, c := range held {
		one := &Batch{Candidates: []*Candidate{c}}
		if why := breaksMix(cl, one, claims, done); why != "" {
			blocked = append(blocked, Blocked{c, why})
			continue
		}
		b := heldIn[c]
		if len(b.Candidates) == 0 {
			kept = append(kept, b)
		}
		b.Candidates = append(b.Candidates, c)
		done.record(one)
	}
	return kept, blocked
}

// mixChanges are what the batches kept so far remove and launch.
type mixChanges struct {
	gone  sets.Set[string]
	added map[string][]string
}

func (m mixChanges) record(b *Batch) {
	for _, c := range b.Candidates {
		m.gone.Insert(c.Claim.Name)
	}
	for _, r := range b.Replacements {
		m.added[r.NodePool] = append(m.added[r.NodePool], r.Offering.CapacityType)
	}
}

// breaksMix says which pool's mix the batch would break after the batches kept
// before it, or "".
func breaksMix(cl *Cluster, b *Batch, claims []v1.NodeClaim, done mixChanges) string {
	removed := map[string][]*v1.NodeClaim{}
	pools := map[string]*v1.NodePool{}
	for _, c := range b.Candidates {
		removed[c.Pool.Name] = append(removed[c.Pool.Name], c.Claim)
		pools[c.Pool.Name] = c.Pool
	}
	added := map[string][]string{}
	for _, r := range b.Replacements {
		added[r.NodePool] = append(added[r.NodePool], r.Offering.CapacityType)
		if np := cl.Snapshot.Pool(r.NodePool); np != nil {
			pools[r.NodePool] = np
		}
	}
	left := make([]v1.NodeClaim, 0, len(claims))
	for i := range claims {
		if !done.gone.Has(claims[i].Name) {
			left = append(left, claims[i])
		}
	}
	for name, np := range pools {
		mix, ok, err := capacitymix.Of(np)
		if err != nil || !ok {
			continue
		}
		before := capacitymix.CountPool(left, name)
		for _, ct := range done.added[name] {
			if ct == v1.CapacityTypeSpot {
				before.Spot++
			} else {
				before.OnDemand++
			}
		}
		if mix.Breaks(before, removed[name], added[name]) {
			return fmt.Sprintf("it would break nodepool %s's capacity mix (%s; now %s)", name, mix, before)
		}
	}
	return ""
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
