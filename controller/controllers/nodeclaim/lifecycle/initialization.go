package lifecycle

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
)

// initialize marks the claim ready once its node is Ready, its startup taints are
// gone and every extended resource its pods asked for is advertised.
func (c *Controller) initialize(ctx context.Context, nc *v1.NodeClaim, node *corev1.Node) (reconcile.Result, error) {
	if meta.IsStatusConditionTrue(nc.Status.Conditions, v1.ConditionTypeInitialized) {
		return reconcile.Result{}, nil
	}
	if reason := notInitialized(nc, node); reason != "" {
		patch := client.MergeFrom(nc.DeepCopy())
		if c.setInitialized(nc, reason) {
			if err := c.patchClaim(ctx, nc, patch, true); err != nil {
				return reconcile.Result{}, err
			}
		}
		return reconcile.Result{RequeueAfter: 2 * time.Second}, nil
	}
	nodePatch := client.MergeFrom(node.DeepCopy())
	node.Labels[v1.LabelNodeInitialized] = "true"
	if err := c.kube.Patch(ctx, node, nodePatch); err != nil {
		return reconcile.Result{}, fmt.Errorf("labelling initialized node, %w", err)
	}
	patch := lockedPatch(nc)
	c.setInitialized(nc, "")
	if err := c.patchClaim(ctx, nc, patch, true); err != nil {
		return requeueOnConflict(fmt.Errorf("recording initialization, %w", err))
	}
	return reconcile.Result{}, nil
}

// setInitialized records why the claim's node is not initialized yet or, when
// reason is empty, that it is initialized and ready; it reports a change.
func (c *Controller) setInitialized(nc *v1.NodeClaim, reason string) bool {
	if reason != "" {
		return c.setCondition(nc, v1.ConditionTypeInitialized, metav1.ConditionUnknown, "NotInitialized", reason)
	}
	initialized := c.setCondition(nc, v1.ConditionTypeInitialized, metav1.ConditionTrue, "Initialized", "")
	return c.setCondition(nc, v1.ConditionTypeReady, metav1.ConditionTrue, "Ready", "") || initialized
}

// notInitialized says why the node is not initialized yet, or "" when it is.
func notInitialized(nc *v1.NodeClaim, node *corev1.Node) string {
	ready := false
	for _, cond := range node.Status.Conditions {
		if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
			ready = true
		}
	}
	if !ready {
		return "node is not Ready"
	}
	for _, t := range nc.Spec.StartupTaints {
		if hasTaint(node.Spec.Taints, t) {
			return fmt.Sprintf("startup taint %s is still on the node", t.ToString())
		}
	}
	for name, q := range nc.Spec.Resources.Requests {
		if name == corev1.ResourceCPU || name == corev1.ResourceMemory || name == corev1.ResourcePods || name == corev1.ResourceEphemeralStorage {
			continue
		}
		if have, ok := node.Status.Allocatable[name]; !ok || have.Cmp(q) < 0 {
			return fmt.Sprintf("resource %s is not advertised yet", name)
		}
	}
	return ""
}
