package disruption

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/controller/consolidation"
	"github.com/dovetail-sh/dovetail/controller/metrics"
	"github.com/dovetail-sh/dovetail/controller/state"
)

// execute carries a command out: the candidates are tainted so nothing new lands on
// them, replacements are launched, the command is recorded on the candidates (so a
// restart resumes it), and the candidates are deleted (and drained by termination)
// only once every replacement has initialized. A crash before the record leaves
// tainted nodes no record explains: the next pass puts them back in service.
func (c *Controller) execute(ctx context.Context, s *pass, cmd *command) error {
	if cmd.reboot {
		return c.commitReboot(ctx, cmd)
	}
	logger := log.FromContext(ctx).WithValues("command", cmd.String())
	cmd.id = state.NewDisruptionID(c.clock.Now(), cmd.candidates[0].Claim.Name)
	for _, cand := range cmd.candidates {
		if err := c.setDisruptedTaint(ctx, cand.Node, true); err != nil {
			c.rollBack(ctx, cmd)
			return err
		}
		message := fmt.Sprintf("Disrupting: %s, plan %s: %s; %s", cmd.reason, cmd.id, cmd.String(), cmd.explanation)
		if !math.IsNaN(cand.Price) {
			message += fmt.Sprintf("; this node costs $%.4f/h", cand.Price)
		}
		c.recorder.Event(cand.Claim, corev1.EventTypeNormal, "DisruptionTerminating", message)
		c.recorder.Event(cand.Node, corev1.EventTypeNormal, "DisruptionTerminating", message)
		for _, p := range cand.Pods {
			if !consolidation.Recreated(p) {
				// Karpenter evicts such pods too; say so where their owner will look.
				c.recorder.Eventf(p, corev1.EventTypeWarning, "Disrupted", "Node %s is being disrupted (%s); the pod will be evicted and, with no controller to recreate it, not come back", cand.Node.Name, cmd.reason)
				continue
			}
			c.recorder.Eventf(p, corev1.EventTypeNormal, "Disrupted", "Node %s is being disrupted (%s); the pod will be evicted", cand.Node.Name, cmd.reason)
		}
	}
	c.reportApproved(cmd)
	replacing := sets.New[string]()
	for _, cand := range cmd.candidates {
		replacing.Insert(cand.Claim.Name)
	}
	for _, plan := range cmd.replacements {
		np := s.poolByName[plan.NodePool]
		if np == nil {
			c.rollBack(ctx, cmd)
			return fmt.Errorf("launching a replacement: nodepool %s is gone", plan.NodePool)
		}
		nc, err := c.provisioner.LaunchReplacing(ctx, np, plan, strings.ToLower(string(cmd.reason)), replacing)
		if err != nil {
			c.rollBack(ctx, cmd)
			return fmt.Errorf("launching a replacement, %w", err)
		}
		cmd.launched = append(cmd.launched, nc.Name)
		for _, cand := range cmd.candidates {
			c.recorder.Eventf(cand.Claim, corev1.EventTypeNormal, "DisruptionLaunching", "Launching NodeClaim %s to replace it: %s", nc.Name, cmd.reason)
		}
	}
	cmd.recordDecision()
	logger.Info("disrupting")
	cmd.startedAt = c.clock.Now()
	if len(cmd.launched) > 0 {
		if err := state.RecordDisruption(ctx, c.kube, cmd.record(), cmd.claims()...); err != nil {
			// The replacements stay: empty, they are consolidated like any other node.
			c.rollBack(ctx, cmd)
			return err
		}
	}
	c.inflight = append(c.inflight, cmd)
	if len(cmd.launched) == 0 {
		// Nothing to wait for: delete now; progress retries what fails.
		return c.progress(ctx, s)
	}
	return nil
}

func (cmd *command) claims() []*v1.NodeClaim {
	out := make([]*v1.NodeClaim, len(cmd.candidates))
	for i, cand := range cmd.candidates {
		out[i] = cand.Claim
	}
	return out
}

func (cmd *command) record() *state.Disruption {
	d := &state.Disruption{ID: cmd.id, Reason: cmd.reason, ConsolidationType: cmd.consolidationType,
		Replacements: cmd.launched, StartedAt: metav1.NewTime(cmd.startedAt), Condition: cmd.condition}
	if cmd.drainBound != nil {
		d.DrainBound = &metav1.Duration{Duration: *cmd.drainBound}
	}
	for _, cand := range cmd.candidates {
		d.Candidates = append(d.Candidates, cand.Claim.Name)
	}
	return d
}

// progress finishes commands whose replacements have initialized, and gives up on
// those whose replacements failed or took too long, leaving the candidates in
// service. A candidate whose deletion fails keeps its command here, to be retried.
func (c *Controller) progress(ctx context.Context, s *pass) error {
	claims := map[string]*v1.NodeClaim{}
	for i := range s.claims {
		claims[s.claims[i].Name] = &s.claims[i]
	}
	var errs []error
	kept := c.inflight[:0]
	for _, cmd := range c.inflight {
		ready, failed := 0, false
		for _, name := range cmd.launched {
			nc, ok := claims[name]
			switch {
			case !ok || nc.DeletionTimestamp != nil:
				failed = true
			case meta.IsStatusConditionTrue(nc.Status.Conditions, v1.ConditionTypeInitialized):
				ready++
			}
		}
		switch {
		case cmd.deletionStarted():
			// Some candidates are draining already: going back would untaint nodes
			// being drained; finish the deletions instead.
			if err := c.deleteCandidates(ctx, cmd); err != nil {
				errs = append(errs, err)
				kept = append(kept, cmd)
			}
		case failed || c.clock.Since(cmd.startedAt) > c.opts.ReplacementTimeout:
			log.FromContext(ctx).Info("replacements did not come up; leaving the nodes in service", "command", cmd.String())
			metrics.VoluntaryDisruptionQueueFailures.WithLabelValues("replace", strings.ToLower(string(cmd.reason)), cmd.consolidationType).Inc()
			c.rollBack(ctx, cmd)
		case ready == len(cmd.launched):
			if err := c.deleteCandidates(ctx, cmd); err != nil {
				errs = append(errs, err)
				kept = append(kept, cmd)
			}
		default:
			kept = append(kept, cmd)
		}
	}
	c.inflight = kept
	return errors.Join(errs...)
}

func (c *Controller) deleteCandidates(ctx context.Context, cmd *command) error {
	var errs []error
	for _, cand := range cmd.candidates {
		if cand.Claim.DeletionTimestamp != nil {
			continue
		}
		// Termination reads why the node goes from the claim (pods_drained_total).
		// The claim shares the cache's slices: the reason is set on a copy.
		if updated := cand.Claim.DeepCopy(); updated.SetDisruptionReason(string(cmd.reason), c.clock.Now()) {
			if err := c.kube.Status().Patch(ctx, updated, client.MergeFrom(cand.Claim)); client.IgnoreNotFound(err) != nil {
				log.FromContext(ctx).V(1).Info("recording the disruption reason", "nodeclaim", cand.Claim.Name, "error", err.Error())
			}
			*cand.Claim = *updated
		}
		if cmd.drainBound != nil {
			// Stamped only now the replacements serve: the bound is the drain's,
			// not the wait's.
			if err := state.TightenDeadline(ctx, c.kube, cand.Claim, c.clock.Now().Add(*cmd.drainBound)); err != nil {
				errs = append(errs, err)
				continue
			}
		}
		if err := c.kube.Delete(ctx, cand.Claim); client.IgnoreNotFound(err) != nil {
			errs = append(errs, fmt.Errorf("deleting nodeclaim %s, %w", cand.Claim.Name, err))
			continue
		}
		now := metav1.NewTime(c.clock.Now())
		cand.Claim.DeletionTimestamp = &now
		cmd.recordDisrupted(cand, cand.Claim)
	}
	return errors.Join(errs...)
}

// recordDecision counts the command as Karpenter's decision metrics do: replace,
// delete, terminate-first or reboot, for its reason, once per pool it disrupts.
func (cmd *command) recordDecision() {
	decision := "delete"
	switch {
	case cmd.reboot:
		decision = "reboot"
	case len(cmd.replacements) > 0:
		decision = "replace"
	case cmd.terminateFirst != "":
		decision = "terminate-first"
	}
	reason := strings.ToLower(string(cmd.reason))
	metrics.VoluntaryDisruptionDecisions.WithLabelValues(decision, reason, cmd.consolidationType).Inc()
	pools := sets.New[string]()
	for _, cand := range cmd.candidates {
		pools.Insert(cand.Pool.Name)
	}
	for pool := range pools {
		metrics.VoluntaryDisruptionDecisionsByNodePool.WithLabelValues(pool, decision, reason, cmd.consolidationType).Inc()
		if cmd.terminateFirst != "" {
			metrics.VoluntaryDisruptionTerminateFirstDecisions.WithLabelValues(pool, reason, cmd.terminateFirst).Inc()
		}
	}
}

// recordDisrupted counts a candidate the command disrupts (nc is its claim as
// written): karpenter_nodeclaims_disrupted_total and the pods it moves, and for a
// repair karpenter_nodeclaims_unhealthy_disrupted_total, labelled by the repair's
// bound where Karpenter labels every other counter by the claim's own.
func (cmd *command) recordDisrupted(cand *candidate, nc *v1.NodeClaim) {
	mode := metrics.TerminationMode(nc.Spec.TerminationGracePeriod)
	if cmd.reason == v1.DisruptionReasonUnhealthy {
		repairMode := mode
		if cmd.drainBound != nil {
			repairMode = metrics.TerminationMode(&metav1.Duration{Duration: *cmd.drainBound})
		}
		metrics.NodeClaimsUnhealthyDisrupted.WithLabelValues(metrics.SnakeCase(cmd.condition), cand.Pool.Name, cand.CapacityType, nc.Status.ImageID, repairMode).Inc()
	}
	disruption := metrics.Disruption{Reason: strings.ToLower(string(cmd.reason)), NodePool: cand.Pool.Name, CapacityType: cand.CapacityType,
		TerminationMode: mode}
	// As Karpenter, the policy is named for consolidation only, not drift.
	if cmd.reason == v1.DisruptionReasonEmpty || cmd.reason == v1.DisruptionReasonUnderutilized {
		disruption.ConsolidationPolicy = metrics.SnakeCase(string(cand.Pool.Spec.Disruption.ConsolidationPolicy))
	}
	disruption.Record(len(cand.Pods))
}

// deletionStarted reports whether any candidate was deleted by this command.
func (cmd *command) deletionStarted() bool {
	for _, cand := range cmd.candidates {
		if cand.Claim.DeletionTimestamp != nil {
			return true
		}
	}
	return false
}

// rollBack puts the candidates back in service: taint and record removed. A
// candidate being deleted meanwhile (interruption, expiration) keeps its taint:
// termination is draining it.
func (c *Controller) rollBack(ctx context.Context, cmd *command) {
	for _, cand := range cmd.candidates {
		current := &v1.NodeClaim{}
		if err := c.kube.Get(ctx, client.ObjectKeyFromObject(cand.Claim), current); err != nil || current.DeletionTimestamp != nil {
			continue
		}
		if err := c.setDisruptedTaint(ctx, cand.Node, false); err != nil {
			log.FromContext(ctx).Error(err, "removing the disrupted taint", "node", cand.Node.Name)
		}
		if err := state.ClearDisruption(ctx, c.kube, cand.Claim); err != nil {
			log.FromContext(ctx).Error(err, "clearing the disruption record", "nodeclaim", cand.Claim.Name)
		}
	}
}

// resume takes up the disruptions recorded on candidates that no command here
// carries: those a previous process or leader started. Their replacements are
// judged as if this process had launched them.
func (c *Controller) resume(ctx context.Context, view *state.View) {
	running := sets.New[string]()
	for _, cmd := range c.inflight {
		running.Insert(cmd.id)
	}
	pools := map[string]*v1.NodePool{}
	for i := range view.Pools {
		pools[view.Pools[i].Name] = &view.Pools[i]
	}
	for _, d := range view.RecordedDisruptions() {
		if running.Has(d.ID) {
			continue
		}
		cmd := &command{id: d.ID, reason: d.Reason, consolidationType: d.ConsolidationType, launched: d.Replacements, startedAt: d.StartedAt.Time, condition: d.Condition}
		if d.DrainBound != nil {
			cmd.drainBound = &d.DrainBound.Duration
		}
		for _, name := range d.Candidates {
			nc := claimNamed(view, name)
			if nc == nil || nc.DeletionTimestamp != nil || state.Recorded(nc) == nil || state.Recorded(nc).ID != d.ID {
				continue
			}
			node := view.NodeOf(nc)
			if node == nil {
				continue
			}
			pool := pools[nc.Labels[v1.LabelNodePool]]
			if pool == nil {
				pool = &v1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: nc.Labels[v1.LabelNodePool]}}
			}
			cmd.candidates = append(cmd.candidates, &candidate{Claim: nc, Node: node, Pool: pool, Price: math.NaN(),
				InstanceType: nc.Labels[v1.LabelInstanceType], CapacityType: nc.Labels[v1.LabelCapacityType]})
		}
		if len(cmd.candidates) == 0 {
			continue
		}
		// The taint may have been taken off by hand; the replacements are coming, so
		// nothing new should land on the candidates meanwhile.
		for _, cand := range cmd.candidates {
			if err := c.setDisruptedTaint(ctx, cand.Node, true); err != nil {
				log.FromContext(ctx).Error(err, "tainting a resumed disruption's node", "node", cand.Node.Name)
			}
		}
		log.FromContext(ctx).Info("resuming a disruption recorded in the cluster", "command", cmd.String(), "startedAt", cmd.startedAt)
		c.inflight = append(c.inflight, cmd)
	}
}

// removeStaleTaints puts back in service the nodes tainted for a disruption that
// nothing carries on (see state.View.StaleDisrupted).
func (c *Controller) removeStaleTaints(ctx context.Context, view *state.View) {
	active := sets.New[string]()
	for _, cmd := range c.inflight {
		for _, cand := range cmd.candidates {
			active.Insert(cand.Claim.Name)
		}
	}
	for _, node := range view.StaleDisrupted(active) {
		log.FromContext(ctx).Info("removing the disrupted taint of a node no disruption carries on", "node", node.Name)
		if err := c.setDisruptedTaint(ctx, node, false); err != nil {
			log.FromContext(ctx).Error(err, "removing a stale disrupted taint", "node", node.Name)
		}
	}
}

func claimNamed(view *state.View, name string) *v1.NodeClaim {
	for i := range view.Claims {
		if view.Claims[i].Name == name {
			return &view.Claims[i]
		}
	}
	return nil
}

// setDisruptedTaint adds or removes the disrupted taint. The patch is
// conditional on the node's version, so that no one else's taint change is lost;
// nodes change often (kubelet status, other controllers), so a conflict is
// retried on a fresh read rather than failing the whole disruption.
func (c *Controller) setDisruptedTaint(ctx context.Context, node *corev1.Node, on bool) error {
	err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		current := &corev1.Node{}
		if err := c.kube.Get(ctx, client.ObjectKeyFromObject(node), current); err != nil {
			return client.IgnoreNotFound(err)
		}
		if state.HasTaint(current, v1.DisruptedNoScheduleTaint) == on {
			return nil
		}
		patch := client.MergeFromWithOptions(current.DeepCopy(), client.MergeFromWithOptimisticLock{})
		if on {
			current.Spec.Taints = append(current.Spec.Taints, v1.DisruptedNoScheduleTaint)
		} else {
			var taints []corev1.Taint
			for _, t := range current.Spec.Taints {
				if !t.MatchTaint(&v1.DisruptedNoScheduleTaint) {
					taints = append(taints, t)
				}
			}
			current.Spec.Taints = taints
		}
		return c.kube.Patch(ctx, current, patch)
	})
	if err != nil {
		return fmt.Errorf("tainting node %s, %w", node.Name, err)
	}
	return nil
}
