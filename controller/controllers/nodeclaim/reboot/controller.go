// Package reboot carries out a reboot repair committed to a NodeClaim (Karpenter
// v1.15's RebootForRepair, its nodeclaim.reboot controller): keep new pods off the
// node, drain it within the repair's bound, remember its boot ID, ask the cloud to
// reboot the instance, and wait for a new boot ID and a Ready node. A reboot the
// cloud refuses, or a node that does not come back within the observation window,
// falls back to replacing the node: the claim is deleted, its drain bounded.
package reboot

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/controller/cloudprovider"
	"github.com/dovetail-sh/dovetail/controller/controllers/nodeclaim/termination"
	"github.com/dovetail-sh/dovetail/controller/metrics"
	"github.com/dovetail-sh/dovetail/controller/scheduling"
	"github.com/dovetail-sh/dovetail/controller/state"
)

// Karpenter v1.15's timings.
const (
	// IssuanceTimeout is how long the cloud has to accept the reboot once the drain
	// is done; ObservationWindow how long the node has to come back after it.
	IssuanceTimeout   = 5 * time.Minute
	ObservationWindow = 20 * time.Minute
	// minDrainTime lets a bounded drain's evictions be asked before the reboot.
	minDrainTime = 5 * time.Second
	pollInterval = 15 * time.Second
)

// The results karpenter_nodes_reboots_total counts.
const (
	resultSucceeded       = "succeeded"
	resultProviderError   = "provider_error"
	resultRecoveryTimeout = "recovery_timeout"
	resultInvalidRequest  = "invalid_request"
)

// Controller is the nodeclaim.reboot controller.
type Controller struct {
	kube     client.Client
	cloud    cloudprovider.CloudProvider
	clock    clock.Clock
	recorder record.EventRecorder

	// issuing and issued are when each claim's issuance and observation began. Kept
	// in memory as Karpenter keeps its issuance timer: a restart starts them again,
	// so a timeout comes at most one window late.
	mu      sync.Mutex
	issuing map[types.UID]time.Time
	issued  map[types.UID]time.Time
}

// NewController wires the controller.
func NewController(kube client.Client, cloud cloudprovider.CloudProvider, clk clock.Clock, recorder record.EventRecorder) *Controller {
	return &Controller{kube: kube, cloud: cloud, clock: clk, recorder: recorder, issuing: map[types.UID]time.Time{}, issued: map[types.UID]time.Time{}}
}

func (c *Controller) Name() string { return "nodeclaim.reboot" }

func (c *Controller) Register(_ context.Context, mgr manager.Manager) error {
	return builder.ControllerManagedBy(mgr).Named(c.Name()).
		For(&v1.NodeClaim{}).
		WithOptions(controller.Options{MaxConcurrentReconciles: 10}).
		Complete(reconcile.AsReconciler(mgr.GetClient(), c))
}

func (c *Controller) Reconcile(ctx context.Context, nc *v1.NodeClaim) (reconcile.Result, error) {
	cond := meta.FindStatusCondition(nc.Status.Conditions, v1.ConditionTypeRebooting)
	if cond == nil || cond.Status != metav1.ConditionTrue || nc.DeletionTimestamp != nil {
		c.forget(nc.UID)
		return reconcile.Result{}, nil
	}
	ctx = log.IntoContext(ctx, log.FromContext(ctx).WithValues("nodeclaim", nc.Name))
	node, err := c.node(ctx, nc)
	if err != nil {
		return reconcile.Result{}, err
	}
	if cond.Reason == v1.RebootIssued {
		return c.observe(ctx, nc, node, cond)
	}
	return c.issue(ctx, nc, node, cond)
}

// issue fences and drains the node, records its boot ID and asks for the reboot.
func (c *Controller) issue(ctx context.Context, nc *v1.NodeClaim, node *corev1.Node, cond *metav1.Condition) (reconcile.Result, error) {
	now := c.clock.Now()
	requestedAt := cond.LastTransitionTime.Time
	bound, err := drainBound(nc)
	if err != nil {
		return reconcile.Result{}, c.fail(ctx, nc, node, resultInvalidRequest, err.Error())
	}
	if node == nil {
		if now.After(requestedAt.Add(IssuanceTimeout)) {
			return reconcile.Result{}, c.fail(ctx, nc, nil, resultProviderError, "the node is gone and the reboot was not issued within the issuance timeout")
		}
		return reconcile.Result{RequeueAfter: pollInterval}, nil
	}
	if err := c.setTaint(ctx, node, true); err != nil {
		return reconcile.Result{}, err
	}
	pre := nc.Annotations[v1.RebootPreBootIDAnnotationKey]
	if pre != "" && node.Status.NodeInfo.BootID != pre {
		// Issued before a restart, and the node has rebooted since.
		return reconcile.Result{Requeue: true}, c.toIssued(ctx, nc)
	}
	if bound == nil || *bound > 0 {
		var deadline *time.Time
		if bound != nil {
			d := requestedAt.Add(max(*bound, minDrainTime))
			deadline = &d
		}
		remaining, err := c.drain(ctx, node)
		if err != nil {
			return reconcile.Result{}, err
		}
		switch {
		case remaining > 0 && (deadline == nil || now.Before(*deadline)):
			return reconcile.Result{RequeueAfter: time.Second}, nil
		case remaining == 0 && now.Before(requestedAt.Add(minDrainTime)):
			return reconcile.Result{RequeueAfter: requestedAt.Add(minDrainTime).Sub(now)}, nil
		}
		// Past the bound, the pods still there (PDBs, do-not-disrupt) ride the
		// reboot: a reboot keeps them, unlike a replacement.
	}
	if pre == "" {
		pre = node.Status.NodeInfo.BootID
		patch := client.MergeFromWithOptions(nc.DeepCopy(), client.MergeFromWithOptimisticLock{})
		if nc.Annotations == nil {
			nc.Annotations = map[string]string{}
		}
		nc.Annotations[v1.RebootPreBootIDAnnotationKey] = pre
		if err := c.kube.Patch(ctx, nc, patch); err != nil {
			return reconcile.Result{}, fmt.Errorf("recording the boot id before the reboot, %w", err)
		}
	}
	started := c.since(c.issuing, nc.UID, now)
	if now.After(started.Add(IssuanceTimeout)) {
		return reconcile.Result{}, c.fail(ctx, nc, node, resultProviderError, "the reboot was not issued within the issuance timeout")
	}
	operation := fmt.Sprintf("%s-%d-%s", nc.UID, requestedAt.UnixNano(), pre)
	if err := c.cloud.Reboot(ctx, nc, operation); err != nil {
		if cloudprovider.IsNodeRebootRefused(err) || cloudprovider.IsNodeClaimNotFound(err) {
			return reconcile.Result{}, c.fail(ctx, nc, node, resultProviderError, err.Error())
		}
		return reconcile.Result{}, fmt.Errorf("rebooting the instance, %w", err)
	}
	log.FromContext(ctx).Info("rebooting the node in place", "node", node.Name, "operation", operation)
	return reconcile.Result{RequeueAfter: pollInterval}, c.toIssued(ctx, nc)
}

// observe waits for the node to come back: a new boot ID, then Ready.
func (c *Controller) observe(ctx context.Context, nc *v1.NodeClaim, node *corev1.Node, cond *metav1.Condition) (reconcile.Result, error) {
	now := c.clock.Now()
	issuedAt := c.since(c.issued, nc.UID, now)
	if node != nil && node.Status.NodeInfo.BootID != nc.Annotations[v1.RebootPreBootIDAnnotationKey] {
		if fenced(node) {
			if err := c.setTaint(ctx, node, false); err != nil {
				return reconcile.Result{}, err
			}
			c.recorder.Event(nc, corev1.EventTypeNormal, "RebootObserved", "New boot observed (bootID changed); awaiting node readiness")
		}
		if nodeReady(node) {
			return reconcile.Result{}, c.succeed(ctx, nc, cond, issuedAt)
		}
	}
	if now.After(issuedAt.Add(ObservationWindow)) {
		return reconcile.Result{}, c.fail(ctx, nc, node, resultRecoveryTimeout, "the node did not recover within the observation window")
	}
	return reconcile.Result{RequeueAfter: pollInterval}, nil
}

func (c *Controller) toIssued(ctx context.Context, nc *v1.NodeClaim) error {
	cond := meta.FindStatusCondition(nc.Status.Conditions, v1.ConditionTypeRebooting)
	patch := client.MergeFromWithOptions(nc.DeepCopy(), client.MergeFromWithOptimisticLock{})
	meta.SetStatusCondition(&nc.Status.Conditions, metav1.Condition{Type: v1.ConditionTypeRebooting, Status: metav1.ConditionTrue,
		Reason: v1.RebootIssued, Message: cond.Message, ObservedGeneration: nc.Generation})
	if err := c.kube.Status().Patch(ctx, nc, patch); err != nil {
		return fmt.Errorf("recording the reboot as issued, %w", err)
	}
	c.mu.Lock()
	c.issued[nc.UID] = c.clock.Now()
	c.mu.Unlock()
	return nil
}

// succeed ends the reboot: the node serves again, with its fault cleared.
func (c *Controller) succeed(ctx context.Context, nc *v1.NodeClaim, cond *metav1.Condition, issuedAt time.Time) error {
	if err := c.terminal(ctx, nc, v1.RebootSucceeded, "node rebooted and rejoined the cluster"); err != nil {
		return err
	}
	now := c.clock.Now()
	metrics.NodesReboots.WithLabelValues(resultSucceeded).Inc()
	metrics.NodesRebootDuration.WithLabelValues(resultSucceeded).Observe(now.Sub(cond.LastTransitionTime.Time).Seconds())
	metrics.NodesRebootRecoveryDuration.Observe(now.Sub(issuedAt).Seconds())
	log.FromContext(ctx).Info("node rebooted and rejoined the cluster")
	c.forget(nc.UID)
	return nil
}

// fail ends a reboot that cannot go on. An invalid request leaves the node as it
// is; any other failure falls back to replacing it, its drain bounded as the
// reboot's was.
func (c *Controller) fail(ctx context.Context, nc *v1.NodeClaim, node *corev1.Node, result, message string) error {
	if node != nil {
		if err := c.setTaint(ctx, node, false); err != nil {
			return err
		}
	}
	requestedAt := nc.CreationTimestamp.Time
	if cond := meta.FindStatusCondition(nc.Status.Conditions, v1.ConditionTypeRebooting); cond != nil {
		requestedAt = cond.LastTransitionTime.Time
	}
	if result == resultInvalidRequest {
		if err := c.terminal(ctx, nc, v1.RebootFailed, message); err != nil {
			return err
		}
	} else {
		if bound, err := drainBound(nc); err == nil && bound != nil {
			if err := state.TightenDeadline(ctx, c.kube, nc, c.clock.Now().Add(*bound)); err != nil {
				return err
			}
		}
		if err := c.kube.Delete(ctx, nc, client.Preconditions{ResourceVersion: &nc.ResourceVersion}); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("replacing the node whose reboot failed, %w", err)
		}
		log.FromContext(ctx).Info("reboot failed, replacing node", "result", result, "why", message)
	}
	c.recorder.Event(nc, corev1.EventTypeWarning, "RebootFailed", message)
	metrics.NodesReboots.WithLabelValues(result).Inc()
	metrics.NodesRebootDuration.WithLabelValues(result).Observe(c.clock.Since(requestedAt).Seconds())
	c.forget(nc.UID)
	return nil
}

// terminal sets Rebooting False with the reason, and clears what the reboot kept
// on the claim.
func (c *Controller) terminal(ctx context.Context, nc *v1.NodeClaim, reason, message string) error {
	if _, ok := nc.Annotations[v1.RebootPreBootIDAnnotationKey]; ok {
		patch := client.MergeFromWithOptions(nc.DeepCopy(), client.MergeFromWithOptimisticLock{})
		delete(nc.Annotations, v1.RebootPreBootIDAnnotationKey)
		if err := c.kube.Patch(ctx, nc, patch); err != nil {
			return fmt.Errorf("clearing the boot id kept for the reboot, %w", err)
		}
	}
	patch := client.MergeFromWithOptions(nc.DeepCopy(), client.MergeFromWithOptimisticLock{})
	meta.SetStatusCondition(&nc.Status.Conditions, metav1.Condition{Type: v1.ConditionTypeRebooting, Status: metav1.ConditionFalse,
		Reason: reason, Message: message, ObservedGeneration: nc.Generation, LastTransitionTime: metav1.NewTime(c.clock.Now())})
	meta.RemoveStatusCondition(&nc.Status.Conditions, v1.ConditionTypeDisruptionReason)
	if err := c.kube.Status().Patch(ctx, nc, patch); err != nil {
		return fmt.Errorf("ending the reboot, %w", err)
	}
	return nil
}

// drain evicts the node's pods through the Eviction API (PDBs and do-not-disrupt
// respected) and returns how many still have to leave. DaemonSet pods, mirror pods,
// finished pods and pods that tolerate the reboot's taint stay: the reboot restarts
// them where they are.
func (c *Controller) drain(ctx context.Context, node *corev1.Node) (int, error) {
	var pods corev1.PodList
	if err := c.kube.List(ctx, &pods, client.MatchingFields{"spec.nodeName": node.Name}); err != nil {
		return 0, fmt.Errorf("listing pods to drain, %w", err)
	}
	now := c.clock.Now()
	remaining := 0
	for i := range pods.Items {
		pod := &pods.Items[i]
		if !drained(pod) {
			continue
		}
		remaining++
		if pod.DeletionTimestamp != nil {
			continue
		}
		if protected, _ := v1.PodDoNotDisrupt(pod, now); protected {
			continue
		}
		_, gone, err := termination.Evict(ctx, c.kube, c.recorder, pod, "unhealthy")
		if err != nil {
			return 0, err
		}
		if gone {
			remaining--
		}
	}
	return remaining, nil
}

// drained: a reboot moves the pods a drain would, but DaemonSet pods, which the
// reboot restarts where they are.
func drained(pod *corev1.Pod) bool {
	return termination.Drainable(pod, v1.RebootingNoScheduleTaint) && !scheduling.OwnedByDaemonSet(pod)
}

// drainBound is the reboot's drain bound: nil unbounded, 0 none.
func drainBound(nc *v1.NodeClaim) (*time.Duration, error) {
	v, ok := nc.Annotations[v1.RebootTerminationGracePeriodAnnotationKey]
	if !ok {
		return nil, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return nil, fmt.Errorf("annotation %s=%q is not a duration of 0s or more", v1.RebootTerminationGracePeriodAnnotationKey, v)
	}
	return &d, nil
}

func (c *Controller) node(ctx context.Context, nc *v1.NodeClaim) (*corev1.Node, error) {
	if nc.Status.NodeName == "" {
		return nil, nil
	}
	node := &corev1.Node{}
	if err := c.kube.Get(ctx, client.ObjectKey{Name: nc.Status.NodeName}, node); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("getting node, %w", err)
	}
	return node, nil
}

func fenced(node *corev1.Node) bool {
	for i := range node.Spec.Taints {
		if node.Spec.Taints[i].MatchTaint(&v1.RebootingNoScheduleTaint) {
			return true
		}
	}
	return false
}

func (c *Controller) setTaint(ctx context.Context, node *corev1.Node, on bool) error {
	if fenced(node) == on {
		return nil
	}
	patch := client.MergeFromWithOptions(node.DeepCopy(), client.MergeFromWithOptimisticLock{})
	if on {
		node.Spec.Taints = append(node.Spec.Taints, v1.RebootingNoScheduleTaint)
	} else {
		kept := node.Spec.Taints[:0:0]
		for _, t := range node.Spec.Taints {
			if !t.MatchTaint(&v1.RebootingNoScheduleTaint) {
				kept = append(kept, t)
			}
		}
		node.Spec.Taints = kept
	}
	if err := c.kube.Patch(ctx, node, patch); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("setting the reboot taint on node %s, %w", node.Name, err)
	}
	return nil
}

func nodeReady(node *corev1.Node) bool {
	for _, cond := range node.Status.Conditions {
		if cond.Type == corev1.NodeReady {
			return cond.Status == corev1.ConditionTrue
		}
	}
	return false
}

// since is when the phase began for the claim, now if this process has not seen
// it begin.
func (c *Controller) since(m map[types.UID]time.Time, uid types.UID, now time.Time) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t, ok := m[uid]; ok {
		return t
	}
	m[uid] = now
	return now
}

func (c *Controller) forget(uid types.UID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.issuing, uid)
	delete(c.issued, uid)
}
