package disruption

import (
	"context"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/controller/metrics"
)

// execute carries a command out: the candidates are tainted so nothing new lands on
// them, replacements are launched, and the candidates are deleted (and drained by
// termination) only once every replacement has initialized.
func (c *Controller) execute(ctx context.Context, s *state, cmd *command) error {
	logger := log.FromContext(ctx).WithValues("command", cmd.String())
	for _, cand := range cmd.candidates {
		if err := c.setDisruptedTaint(ctx, cand.node, true); err != nil {
			c.untaint(ctx, cmd)
			return err
		}
		message := fmt.Sprintf("Disrupting NodeClaim: %s", cmd.reason)
		c.recorder.Event(cand.claim, corev1.EventTypeNormal, "DisruptionTerminating", message)
		c.recorder.Event(cand.node, corev1.EventTypeNormal, "DisruptionTerminating", message)
		for _, p := range cand.pods {
			c.recorder.Eventf(p, corev1.EventTypeNormal, "Disrupted", "Node %s is being disrupted (%s); the pod will be evicted", cand.node.Name, cmd.reason)
		}
	}
	for _, plan := range cmd.replacements {
		np := s.poolByName[plan.NodePool]
		if np == nil {
			c.untaint(ctx, cmd)
			return fmt.Errorf("launching a replacement: nodepool %s is gone", plan.NodePool)
		}
		nc, err := c.provisioner.Launch(ctx, np, plan, strings.ToLower(string(cmd.reason)))
		if err != nil {
			c.untaint(ctx, cmd)
			return fmt.Errorf("launching a replacement, %w", err)
		}
		cmd.launched = append(cmd.launched, nc.Name)
		for _, cand := range cmd.candidates {
			c.recorder.Eventf(cand.claim, corev1.EventTypeNormal, "DisruptionLaunching", "Launching NodeClaim %s to replace it: %s", nc.Name, cmd.reason)
		}
	}
	decision := "delete"
	if len(cmd.replacements) > 0 {
		decision = "replace"
	}
	metrics.VoluntaryDisruptionDecisions.WithLabelValues(decision, strings.ToLower(string(cmd.reason)), cmd.consolidationType).Inc()
	logger.Info("disrupting")
	if len(cmd.launched) == 0 {
		return c.deleteCandidates(ctx, cmd)
	}
	cmd.startedAt = c.clock.Now()
	c.inflight = append(c.inflight, cmd)
	return nil
}

// progress finishes commands whose replacements have initialized, and gives up on
// those whose replacements failed or took too long, leaving the candidates in service.
func (c *Controller) progress(ctx context.Context, s *state) error {
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
		case failed || c.clock.Since(cmd.startedAt) > c.opts.ReplacementTimeout:
			log.FromContext(ctx).Info("replacements did not come up; leaving the nodes in service", "command", cmd.String())
			c.untaint(ctx, cmd)
		case ready == len(cmd.launched):
			errs = append(errs, c.deleteCandidates(ctx, cmd))
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
		if err := c.kube.Delete(ctx, cand.claim); client.IgnoreNotFound(err) != nil {
			errs = append(errs, fmt.Errorf("deleting nodeclaim %s, %w", cand.claim.Name, err))
			continue
		}
		metrics.NodeClaimsDisrupted.WithLabelValues(strings.ToLower(string(cmd.reason)), cand.pool.Name, cand.capacityType).Inc()
	}
	return errors.Join(errs...)
}

func (c *Controller) untaint(ctx context.Context, cmd *command) {
	for _, cand := range cmd.candidates {
		if err := c.setDisruptedTaint(ctx, cand.node, false); err != nil {
			log.FromContext(ctx).Error(err, "removing the disrupted taint", "node", cand.node.Name)
		}
	}
}

func (c *Controller) setDisruptedTaint(ctx context.Context, node *corev1.Node, on bool) error {
	current := &corev1.Node{}
	if err := c.kube.Get(ctx, client.ObjectKeyFromObject(node), current); err != nil {
		return client.IgnoreNotFound(err)
	}
	if hasTaint(current, v1.DisruptedNoScheduleTaint) == on {
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
	if err := c.kube.Patch(ctx, current, patch); err != nil {
		return fmt.Errorf("tainting node %s, %w", node.Name, err)
	}
	return nil
}
