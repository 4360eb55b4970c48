package disruption

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"sigs.k8s.io/controller-runtime/pkg/log"

	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/controller/consolidation"
	"github.com/dovetail-sh/dovetail/controller/metrics"
	"github.com/dovetail-sh/dovetail/controller/scheduling"
	"github.com/dovetail-sh/dovetail/controller/staticpool"
)

// reportPlan keeps the eligibility metrics, puts an event on each node a graceful
// disruption may not touch (once per distinct reason), and logs the plan.
func (c *Controller) reportPlan(ctx context.Context, s *pass, plan *consolidation.Plan) {
	now := c.clock.Now()
	var drifted, empty, underutilized int
	for _, cand := range s.cluster.Candidates {
		c.reportBlocked(ctx, cand)
		switch {
		case cand.Drift != "":
			drifted++
		case !cand.Consolidatable(now):
		case cand.Empty():
			empty++
		case cand.Pool.Spec.Disruption.ConsolidationPolicy != v1.ConsolidationPolicyWhenEmpty:
			underutilized++
		}
	}
	metrics.VoluntaryDisruptionEligibleNodes.WithLabelValues("drifted").Set(float64(drifted))
	metrics.VoluntaryDisruptionEligibleNodes.WithLabelValues("empty").Set(float64(empty))
	metrics.VoluntaryDisruptionEligibleNodes.WithLabelValues("underutilized").Set(float64(underutilized))
	if len(plan.Remove) > 0 {
		log.FromContext(ctx).V(1).Info("consolidation plan", "removes", len(plan.Remove), "launches", len(plan.Replacements),
			"savesPerHour", fmt.Sprintf("%.4f", plan.Savings()), "batches", len(plan.Batches))
	}
	for _, b := range plan.Blocked {
		log.FromContext(ctx).V(2).Info("node kept", "node", b.Candidate.Node.Name, "why", b.Reason)
		c.reportUnconsolidatable(b)
	}
	for _, s := range plan.Rejected {
		for _, cand := range s.Candidates {
			// Once per node and score: a steady cluster scores the same every pass.
			msg := fmt.Sprintf("NodePool %q (consolidationPolicy Balanced) rejects the move: %s", s.Pool, s)
			if c.unconsolidatable[cand.Node.Name] == msg {
				continue
			}
			c.unconsolidatable[cand.Node.Name] = msg
			c.recorder.Event(cand.Node, corev1.EventTypeNormal, "Unconsolidatable", msg)
			c.recorder.Event(cand.Claim, corev1.EventTypeNormal, "Unconsolidatable", msg)
		}
	}
	for _, scores := range [][]consolidation.Score{plan.Scores, plan.Rejected} {
		for _, s := range scores {
			decision := "approved"
			if !s.Approved() {
				decision = "rejected"
			}
			metrics.ConsolidationScore.WithLabelValues(decision, s.Pool, string(v1.ConsolidationPolicyBalanced)).Observe(s.Value())
			metrics.ConsolidationMoves.WithLabelValues(decision, s.Pool, string(v1.ConsolidationPolicyBalanced)).Inc()
			log.FromContext(ctx).V(1).Info("consolidation score", "nodepool", s.Pool, "decision", decision, "score", s.Value(),
				"savingsFraction", s.SavingsFraction, "disruptionFraction", s.DisruptionFraction, "candidates", len(s.Candidates))
		}
	}
}

// reportUnconsolidatable puts an Unconsolidatable event with the reason the plan
// keeps a node (the one `dovetail explain node` prints) on the node and its
// claim, once per distinct reason. DisruptionBlocked reports what blocks a node
// (a do-not-disrupt pod, a PDB), a Balanced rejection carries its score, and a
// node waiting out consolidateAfter has no lasting reason to report.
func (c *Controller) reportUnconsolidatable(b consolidation.Blocked) {
	cand := b.Candidate
	if cand.BlockedBy != "" || consolidation.BalancedRejection(b.Reason) || cand.Drift != "" || !cand.Consolidatable(c.clock.Now()) {
		return
	}
	if c.unconsolidatable[cand.Node.Name] == b.Reason {
		return
	}
	c.unconsolidatable[cand.Node.Name] = b.Reason
	c.recorder.Event(cand.Node, corev1.EventTypeNormal, "Unconsolidatable", b.Reason)
	c.recorder.Event(cand.Claim, corev1.EventTypeNormal, "Unconsolidatable", b.Reason)
}

// reportApproved puts Karpenter's ConsolidationApproved event, with the score, on
// the node and claim a Balanced pool approved removing alone, or on the pool for
// a move of several of its nodes (the score describes the move, not one node).
func (c *Controller) reportApproved(cmd *command) {
	for _, s := range cmd.scores {
		if len(s.Candidates) == 1 {
			c.recorder.Event(s.Candidates[0].Node, corev1.EventTypeNormal, "ConsolidationApproved", s.String())
			c.recorder.Event(s.Candidates[0].Claim, corev1.EventTypeNormal, "ConsolidationApproved", s.String())
			continue
		}
		c.recorder.Event(s.Candidates[0].Pool, corev1.EventTypeNormal, "ConsolidationApproved", s.String())
	}
}

// reportBlocked puts an event on a blocked node, once per distinct reason.
func (c *Controller) reportBlocked(ctx context.Context, cand *candidate) {
	if cand.BlockedBy == "" || c.blocked[cand.Node.Name] == cand.BlockedBy {
		if cand.BlockedBy == "" {
			delete(c.blocked, cand.Node.Name)
		}
		return
	}
	c.blocked[cand.Node.Name] = cand.BlockedBy
	c.recorder.Eventf(cand.Node, corev1.EventTypeNormal, "DisruptionBlocked", "Cannot disrupt Node: %s", cand.BlockedBy)
	c.recorder.Eventf(cand.Claim, corev1.EventTypeNormal, "DisruptionBlocked", "Cannot disrupt NodeClaim: %s", cand.BlockedBy)
	log.FromContext(ctx).V(1).Info("disruption blocked", "node", cand.Node.Name, "why", cand.BlockedBy)
}

// driftCommand replaces as many drifted nodes of one pool as its budget allows.
func (c *Controller) driftCommand(ctx context.Context, s *pass) *command {
	used := map[string]int{}
	byPool := map[string][]*candidate{}
	var pools []string
	for _, cand := range s.cluster.Candidates {
		if cand.Drift == "" || cand.BlockedBy != "" {
			continue
		}
		pool := cand.Pool.Name
		if used[pool] >= s.allowed[pool][v1.DisruptionReasonDrifted] {
			continue
		}
		used[pool]++
		if _, ok := byPool[pool]; !ok {
			pools = append(pools, pool)
		}
		byPool[pool] = append(byPool[pool], cand)
	}
	for _, pool := range pools {
		if np := s.poolByName[pool]; np.Spec.Replicas != nil {
			if cmd := c.staticDriftCommand(ctx, s, np, byPool[pool]); cmd != nil {
				return cmd
			}
			continue
		}
		results := simulate(s, byPool[pool])
		if u := unplaced(results, byPool[pool]); u != nil {
			if c.opts.TerminateFirstDrift {
				for _, cand := range byPool[pool] {
					if id, ok := freesItsReservation(s, cand); ok {
						cmd := &command{reason: v1.DisruptionReasonDrifted, consolidationType: typeDrift, candidates: []*candidate{cand}, terminateFirst: terminateFirstNoReservedCapacity}
						cmd.explanation = fmt.Sprintf("the node no longer matches nodepool %s or its node class, and its replacement can launch only into the place it holds in capacity reservation %s: it goes first (TerminateFirstDrift)", pool, id)
						return cmd
					}
				}
			}
			log.FromContext(ctx).V(1).Info("drifted nodes wait: their pods would have no place", "nodepool", pool, "reason", u.Reason)
			continue
		}
		cmd := &command{reason: v1.DisruptionReasonDrifted, consolidationType: typeDrift, candidates: byPool[pool], replacements: results.NodeClaims}
		cmd.explanation = fmt.Sprintf("the node no longer matches nodepool %s or its node class; %d replacement(s): %s", pool, len(results.NodeClaims), typeNames(results.NodeClaims))
		return cmd
	}
	return nil
}

// staticDriftCommand replaces a static pool's drifted nodes one for one with new
// nodes from its template, launched first, as Karpenter's StaticDrift.
func (c *Controller) staticDriftCommand(ctx context.Context, s *pass, np *v1.NodePool, cands []*candidate) *command {
	cmd, wait := staticCommand(s, np, cands, c.opts.TerminateFirstDrift)
	if cmd == nil {
		log.FromContext(ctx).V(1).Info("drifted nodes of a static nodepool wait: "+wait, "nodepool", np.Name)
		return nil
	}
	cmd.reason, cmd.consolidationType = v1.DisruptionReasonDrifted, typeDrift
	if cmd.terminateFirst != "" {
		cmd.explanation = fmt.Sprintf("the node no longer matches static nodepool %s or its node class; %s (TerminateFirstDrift)", np.Name, terminateFirstExplanation(cmd.terminateFirst, np))
	} else {
		cmd.explanation = fmt.Sprintf("the node no longer matches static nodepool %s or its node class; replaced one for one from its template", np.Name)
	}
	return cmd
}

// staticCommand replaces a static pool's nodes one for one with new nodes from its
// template, launched first: as many as limits.nodes leaves room for, and none while
// the pool has more nodes than its replicas (scale-down first). Static pools are not
// planned for pods, so their pods' places are not simulated. When the replacement
// cannot launch first and terminateFirst is on, the nodes that free what it needs
// go first (see staticTerminateFirst). Without a command, wait says why.
func staticCommand(s *pass, np *v1.NodePool, cands []*candidate, terminateFirst bool) (cmd *command, wait string) {
	claims := 0
	for i := range s.claims {
		if s.claims[i].Labels[v1.LabelNodePool] == np.Name {
			claims++
		}
	}
	room, wait := staticpool.DriftRoom(np, claims, s.cluster.Disrupting[np.Name], len(cands))
	if wait == staticpool.ScalingDown {
		return nil, wait
	}
	if terminateFirst {
		first, reason, err := staticTerminateFirst(s, np, cands, room == 0)
		switch {
		case err != nil:
			return nil, err.Error()
		case reason != "" && len(first) == 0:
			return nil, "its capacity reservations are full and none of these nodes holds a place in them"
		case reason != "":
			return &command{candidates: first, terminateFirst: reason}, ""
		}
	}
	if room == 0 {
		return nil, wait
	}
	plan, err := scheduling.TemplatePlan(np, s.snap.InstanceTypes[np.Name])
	if err != nil {
		return nil, err.Error()
	}
	cmd = &command{candidates: cands[:room]}
	for range cmd.candidates {
		p := *plan
		cmd.replacements = append(cmd.replacements, &p)
	}
	return cmd, ""
}

// unplaced is the first of the candidates' pods the plan leaves without a place,
// or nil. Pods of nodes already being disrupted that have no place either way are
// not the candidates' doing.
func unplaced(r *scheduling.Results, cands []*candidate) *scheduling.PodError {
	mine := sets.New[types.UID]()
	for _, cand := range cands {
		for _, p := range cand.Pods {
			mine.Insert(p.UID)
		}
	}
	for i := range r.Unschedulable {
		if mine.Has(r.Unschedulable[i].Pod.UID) {
			return &r.Unschedulable[i]
		}
	}
	return nil
}

func typeNames(plans []*scheduling.NodeClaimPlan) string {
	names := make([]string, len(plans))
	for i, p := range plans {
		names[i] = p.InstanceType.Name
	}
	return strings.Join(names, ", ")
}

// simulate plans the candidates' pods, and those of nodes already being disrupted,
// onto the cluster without the candidates.
func simulate(s *pass, cands []*candidate) *scheduling.Results {
	return simulateOn(s.snap, s, cands)
}

// simulateOn is simulate on another snapshot of the pass's cluster.
func simulateOn(snap *scheduling.Snapshot, s *pass, cands []*candidate) *scheduling.Results {
	gone := sets.New[string]()
	pods := append([]*corev1.Pod(nil), s.cluster.Moving...)
	for _, cand := range cands {
		gone.Insert(cand.Node.Name, cand.Claim.Name)
		pods = append(pods, cand.Pods...)
	}
	return snap.PlanWithout(gone, pods)
}
