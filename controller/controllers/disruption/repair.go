package disruption

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/log"

	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/controller/consolidation"
	"github.com/dovetail-sh/dovetail/controller/repair"
	"github.com/dovetail-sh/dovetail/controller/state"
)

// repairCommand repairs one unhealthy node per pass, as Karpenter v1.15's repair
// disruption method: of the registered nodes of a NodePool whose conditions a
// repair policy finds eligible, the most urgent one its pool's Unhealthy budget
// (initialized nodes only) and unhealthy share allow, whose pods have a place. Its
// replacement launches first when its pods need one, and its drain is bounded by
// the policy.
// A node annotated karpenter.sh/do-not-repair, or whose pods block eviction with
// no bound to override them, is left alone and says why.
func (c *Controller) repairCommand(ctx context.Context, s *pass) *command {
	if c.opts.Repair == nil {
		return nil
	}
	now := c.clock.Now()
	tripped := c.opts.Repair.TrippedPools(s.view.Nodes, func(n *corev1.Node) string { return n.Labels[v1.LabelNodePool] })
	type target struct {
		cand   *candidate
		result repair.Result
		bound  *time.Duration
	}
	targets := map[string]target{}
	var eligible []repair.Candidate
	for i := range s.view.Claims {
		nc := &s.view.Claims[i]
		node := s.view.NodeOf(nc)
		if node == nil || nc.DeletionTimestamp != nil || node.DeletionTimestamp != nil || s.inflight.Has(nc.Name) ||
			state.HasTaint(node, v1.DisruptedNoScheduleTaint) || nc.Rebooting() {
			continue
		}
		// A condition a reboot left behind is tolerated afresh from the reboot's end.
		var rebootEnded time.Time
		if cond := meta.FindStatusCondition(nc.Status.Conditions, v1.ConditionTypeRebooting); cond != nil {
			rebootEnded = cond.LastTransitionTime.Time
		}
		result := repair.Resolve(c.opts.Repair.Match(node), now, rebootEnded)
		if result.Action == "" {
			continue
		}
		if c.reboots.Escalate(&result, nc.UID, now) {
			log.FromContext(ctx).Info("the node was rebooted twice within a day for its faults: replacing it", "node", node.Name, "reboot-escalated", true)
		}
		// A node its claim has not seen register may not be the claim's yet.
		if !meta.IsStatusConditionTrue(nc.Status.Conditions, v1.ConditionTypeInitialized) && !meta.IsStatusConditionTrue(nc.Status.Conditions, v1.ConditionTypeRegistered) {
			c.repairBlocked(ctx, node, nc, "DisruptionBlocked", "Node isn't initialized nor registered")
			continue
		}
		if nc.Labels[v1.LabelNodePool] == "" {
			c.repairBlocked(ctx, node, nc, "DisruptionBlocked", "repair requires a NodePool to construct and budget a safe replacement")
			continue
		}
		// A pool that is deleting, not Ready, or whose types do not resolve is not
		// planned with: its nodes wait for it.
		np := s.poolByName[nc.Labels[v1.LabelNodePool]]
		if np == nil {
			continue
		}
		if node.Annotations[v1.DoNotRepairAnnotationKey] == "true" {
			c.repairBlocked(ctx, node, nc, "DisruptionBlocked", fmt.Sprintf("repair is blocked through the %q annotation", v1.DoNotRepairAnnotationKey))
			continue
		}
		cand := s.cluster.RepairCandidate(s.view, nc, node, np, now)
		var claimTGP *time.Duration
		if nc.Spec.TerminationGracePeriod != nil {
			claimTGP = &nc.Spec.TerminationGracePeriod.Duration
		}
		bound := repair.DrainBound(result, claimTGP)
		if cand.BlockedBy != "" && bound == nil && claimTGP == nil {
			c.repairBlocked(ctx, node, nc, "DisruptionBlocked", "repair requires a termination grace period to bypass blocking pods: "+cand.BlockedBy)
			continue
		}
		if tripped.Has(np.Name) {
			c.repairBlocked(ctx, node, nc, "NodeRepairBlocked", fmt.Sprintf("more than 20%% of nodes in nodepool %q are unhealthy", np.Name))
			continue
		}
		targets[node.Name] = target{cand: cand, result: result, bound: bound}
		eligible = append(eligible, repair.Candidate{Node: node.Name, Result: result, DisruptionCost: cand.DisruptionCost})
	}
	repair.Order(eligible, now)
	for _, e := range eligible {
		t := targets[e.Node]
		pool := t.cand.Pool
		// Only an initialized node takes from the budget: one that never became
		// Ready serves nothing, and repairing it disrupts no one.
		if meta.IsStatusConditionTrue(t.cand.Claim.Status.Conditions, v1.ConditionTypeInitialized) {
			allowed, err := consolidation.Allowed(pool, v1.DisruptionReasonUnhealthy, s.cluster.Total[pool.Name], s.cluster.Consuming(pool.Name, v1.DisruptionReasonUnhealthy), now)
			if err != nil || allowed < 1 {
				c.repairBlocked(ctx, t.cand.Node, t.cand.Claim, "DisruptionBlocked", "No allowed disruptions for disruption reason Unhealthy due to blocking budget")
				continue
			}
		}
		if t.result.Action == repair.Reboot {
			log.FromContext(ctx).WithValues(append([]any{"node", e.Node}, t.result.LogValues()...)...).Info("selected repair policy")
			bound := t.bound
			if bound == nil && t.cand.Claim.Spec.TerminationGracePeriod != nil {
				bound = &t.cand.Claim.Spec.TerminationGracePeriod.Duration
			}
			return &command{reason: v1.DisruptionReasonUnhealthy, candidates: []*candidate{t.cand}, reboot: true, drainBound: bound,
				condition: string(t.result.Condition), explanation: fmt.Sprintf("rebooting for %s/%s", t.result.Condition, t.result.Reason)}
		}
		cmd, blocked := c.repairOf(s, t.cand)
		if cmd == nil {
			c.repairBlocked(ctx, t.cand.Node, t.cand.Claim, "DisruptionBlocked", blocked)
			continue
		}
		log.FromContext(ctx).WithValues(append([]any{"node", e.Node}, t.result.LogValues()...)...).Info("selected repair policy")
		cmd.reason, cmd.drainBound, cmd.condition = v1.DisruptionReasonUnhealthy, t.bound, string(t.result.Condition)
		cmd.explanation = fmt.Sprintf("node condition %s=%s (%s) since %s past its repair policy's toleration", t.result.Condition, t.result.Status, t.result.Reason,
			t.result.EligibleAt.UTC().Format(time.RFC3339))
		if cmd.terminateFirst != "" {
			cmd.explanation += "; nothing can replace it while it runs, so it goes first (TerminateFirstRepair)"
		}
		delete(c.blockedRepairs, e.Node)
		return cmd
	}
	return nil
}

// repairOf is the command that repairs the candidate: its replacement launched
// first (a static pool's from its template, as Karpenter's repair mirrors
// StaticDrift), or, with TerminateFirstRepair, the node deleted first when only its
// going makes room for what replaces it. Without one, blocked says why.
func (c *Controller) repairOf(s *pass, cand *candidate) (cmd *command, blocked string) {
	if cand.Pool.Spec.Replicas != nil {
		cmd, wait := staticCommand(s, cand.Pool, []*candidate{cand}, c.opts.TerminateFirstRepair)
		if cmd == nil {
			return nil, fmt.Sprintf("static nodepool %s cannot replace it: %s", cand.Pool.Name, wait)
		}
		return cmd, ""
	}
	results := simulate(s, []*candidate{cand})
	u := unplaced(results, []*candidate{cand})
	if u == nil {
		return &command{candidates: []*candidate{cand}, replacements: results.NodeClaims}, ""
	}
	if c.opts.TerminateFirstRepair {
		if _, ok := freesItsReservation(s, cand); ok {
			return &command{candidates: []*candidate{cand}, terminateFirst: terminateFirstNoReservedCapacity}, ""
		}
	}
	return nil, fmt.Sprintf("repair would leave pod %s/%s without a place: %s", u.Pod.Namespace, u.Pod.Name, u.Reason)
}

// repairBlocked puts an event on the node and its claim saying why repair waits,
// once per distinct reason.
func (c *Controller) repairBlocked(ctx context.Context, node *corev1.Node, nc *v1.NodeClaim, reason, message string) {
	if c.blockedRepairs[node.Name] == message {
		return
	}
	c.blockedRepairs[node.Name] = message
	c.recorder.Eventf(node, corev1.EventTypeNormal, reason, "Cannot repair Node: %s", message)
	c.recorder.Eventf(nc, corev1.EventTypeNormal, reason, "Cannot repair NodeClaim: %s", message)
	log.FromContext(ctx).V(1).Info("repair blocked", "node", node.Name, "why", message)
}
