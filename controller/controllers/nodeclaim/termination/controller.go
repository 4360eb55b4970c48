// Package termination runs a NodeClaim's finalizer: cordon its node, drain it through
// the Eviction API so PodDisruptionBudgets are respected (until the NodePool's
// terminationGracePeriod runs out), terminate the instance, and only then let the
// NodeClaim go, so no instance outlives the record of it.
package termination

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/smithy-go"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/controller/cloudprovider"
	"github.com/dovetail-sh/dovetail/controller/metrics"
	"github.com/dovetail-sh/dovetail/controller/scheduling"
)

// Controller is the NodeClaim termination controller.
type Controller struct {
	kube     client.Client
	cloud    cloudprovider.CloudProvider
	clock    clock.Clock
	recorder record.EventRecorder

	// waves holds, per claim being drained, its drain's first pass, and
	// recentWaves those begun in the last waveWait, the claim gone or not (see
	// wave.go).
	mu          sync.Mutex
	waves       map[string]*firstWave
	recentWaves []*firstWave
	landedCheck landedCheck
}

// NewController wires the controller.
func NewController(kube client.Client, cloud cloudprovider.CloudProvider, clk clock.Clock, recorder record.EventRecorder) *Controller {
	return &Controller{kube: kube, cloud: cloud, clock: clk, recorder: recorder, waves: map[string]*firstWave{}}
}

func (c *Controller) Name() string { return "nodeclaim.termination" }

func (c *Controller) Register(_ context.Context, mgr manager.Manager) error {
	return builder.ControllerManagedBy(mgr).Named(c.Name()).
		For(&v1.NodeClaim{}).
		WithOptions(controller.Options{MaxConcurrentReconciles: 50}).
		Complete(reconcile.AsReconciler(mgr.GetClient(), c))
}

func (c *Controller) Reconcile(ctx context.Context, nc *v1.NodeClaim) (reconcile.Result, error) {
	if nc.DeletionTimestamp == nil || !controllerutil.ContainsFinalizer(nc, v1.TerminationFinalizer) {
		return reconcile.Result{}, nil
	}
	node, err := c.node(ctx, nc)
	if err != nil {
		return reconcile.Result{}, err
	}
	if node != nil {
		if err := c.cordon(ctx, node); err != nil {
			return reconcile.Result{}, err
		}
		deadline := terminationDeadline(nc)
		reason := disruptionReason(nc)
		if deadline == nil || c.clock.Now().Before(*deadline) {
			remaining, err := c.drain(ctx, nc.Name, node, deadline, reason)
			if err != nil {
				return reconcile.Result{}, err
			}
			if remaining > 0 {
				return reconcile.Result{RequeueAfter: time.Second}, nil
			}
		} else if remaining, err := c.drain(ctx, nc.Name, node, deadline, reason); err == nil && remaining > 0 {
			// The grace period is the bound on a drain: whatever still runs goes with
			// the instance, and the pod garbage collector removes it with the node.
			c.recorder.Eventf(nc, corev1.EventTypeWarning, "TerminationGracePeriodElapsed",
				"%d pods still on node %s past the termination deadline (%s); terminating the instance", remaining, node.Name, deadline.UTC().Format(time.RFC3339))
		}
	}
	if nc.Status.ProviderID != "" {
		start := c.clock.Now()
		if err := c.cloud.Delete(ctx, nc); err != nil && !cloudprovider.IsNodeClaimNotFound(err) {
			return reconcile.Result{}, c.terminationFailed(ctx, nc, err)
		}
		metrics.NodeClaimsInstanceTerminationDuration.WithLabelValues(nc.Labels[v1.LabelNodePool]).Observe(c.clock.Since(start).Seconds())
	}
	if node != nil {
		if err := c.kube.Delete(ctx, node); client.IgnoreNotFound(err) != nil {
			return reconcile.Result{}, fmt.Errorf("deleting node, %w", err)
		}

		// Nodes Karpenter registered carry its termination finalizer; with the
		// instance gone nothing else would ever release them.
		if controllerutil.ContainsFinalizer(node, v1.TerminationFinalizer) {
			patch := client.MergeFrom(node.DeepCopy())
			controllerutil.RemoveFinalizer(node, v1.TerminationFinalizer)
			if err := c.kube.Patch(ctx, node, patch); client.IgnoreNotFound(err) != nil {
				return reconcile.Result{}, fmt.Errorf("releasing the node's termination finalizer, %w", err)
			}
		}
	}
	// Nothing drains past this point, whether the release below succeeds or is
	// retried.
	c.forget(nc.Name)
	patch := client.MergeFrom(nc.DeepCopy())
	controllerutil.RemoveFinalizer(nc, v1.TerminationFinalizer)
	if err := c.kube.Patch(ctx, nc, patch); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	// Counted once the claim is released, which happens once.
	pool, zone := nc.Labels[v1.LabelNodePool], nc.Labels[v1.LabelTopologyZone]
	metrics.NodeClaimsTerminated.WithLabelValues(pool, nc.Labels[v1.LabelCapacityType], zone).Inc()
	metrics.NodeClaimsTerminationDuration.WithLabelValues(pool).Observe(c.clock.Since(nc.DeletionTimestamp.Time).Seconds())
	if node != nil {
		metrics.NodesDrained.WithLabelValues(pool).Inc()
		metrics.NodesTerminated.WithLabelValues(pool, zone).Inc()
		metrics.NodesTerminationDuration.WithLabelValues(pool).Observe(c.clock.Since(nc.DeletionTimestamp.Time).Seconds())
		metrics.NodesLifetime.WithLabelValues(pool).Observe(c.clock.Since(node.CreationTimestamp.Time).Seconds())
	}
	log.FromContext(ctx).Info("terminated nodeclaim", "providerID", nc.Status.ProviderID)
	return reconcile.Result{}, nil
}

// terminationFailed surfaces an instance that cannot be terminated (a policy that
// denies TerminateInstances, an API outage): it keeps running and billing while the
// claim waits, so the claim says why in its InstanceTerminating condition and a
// Warning event, and the cloud provider's error counter
// (karpenter_cloudprovider_errors_total, controller nodeclaim.termination, method
// Delete) counts each try. The error it returns retries with the controller's
// exponential backoff; the condition is written only when it changes, so writing it
// does not cut the backoff short.
func (c *Controller) terminationFailed(ctx context.Context, nc *v1.NodeClaim, cause error) error {
	message := fmt.Sprintf("terminating instance %s: %s", nc.Status.ProviderID, stableMessage(cause))
	c.recorder.Event(nc, corev1.EventTypeWarning, "FailedTerminatingInstance", message)
	stored := nc.DeepCopy()
	if meta.SetStatusCondition(&nc.Status.Conditions, metav1.Condition{Type: v1.ConditionTypeInstanceTerminating, Status: metav1.ConditionFalse,
		Reason: "TerminationFailed", Message: message, ObservedGeneration: nc.Generation}) {
		if err := c.kube.Status().Patch(ctx, nc, client.MergeFrom(stored)); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("recording the failed termination, %w (terminating instance, %v)", err, cause)
		}
	}
	return fmt.Errorf("terminating instance, %w", cause)
}

// stableMessage is what an error says without what changes from one try to the
// next (an AWS request id, an encoded authorization message): the provider's error
// code and the first sentence of its message.
func stableMessage(err error) string {
	var apiErr smithy.APIError
	if !errors.As(err, &apiErr) {
		return err.Error()
	}
	msg, _, _ := strings.Cut(apiErr.ErrorMessage(), ". ")
	return apiErr.ErrorCode() + ": " + strings.TrimSuffix(msg, ".")
}

// terminationDeadline is when the claim's terminationGracePeriod, counted from its
// deletion, runs out, or the karpenter.sh/nodeclaim-termination-timestamp node
// repair sets (now: a repair is forceful), whichever is first; nil when neither.
func terminationDeadline(nc *v1.NodeClaim) *time.Time {
	if nc.DeletionTimestamp == nil {
		return nil
	}
	var deadline *time.Time
	if nc.Spec.TerminationGracePeriod != nil {
		t := nc.DeletionTimestamp.Add(nc.Spec.TerminationGracePeriod.Duration)
		deadline = &t
	}
	if t, err := time.Parse(time.RFC3339, nc.Annotations[v1.NodeClaimTerminationTimestampAnnotationKey]); err == nil && (deadline == nil || t.Before(*deadline)) {
		deadline = &t
	}
	return deadline
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
		return nil, err
	}
	return node, nil
}

// cordon taints the node so nothing new schedules while it drains.
func (c *Controller) cordon(ctx context.Context, node *corev1.Node) error {
	for _, t := range node.Spec.Taints {
		if t.MatchTaint(&v1.DisruptedNoScheduleTaint) {
			return nil
		}
	}
	patch := client.MergeFrom(node.DeepCopy())
	node.Spec.Taints = append(node.Spec.Taints, v1.DisruptedNoScheduleTaint)
	if err := c.kube.Patch(ctx, node, patch); err != nil {
		return fmt.Errorf("cordoning node, %w", err)
	}
	c.recorder.Event(node, corev1.EventTypeNormal, "Disrupted", "Cordoned and draining")
	return nil
}

// stuckTerminatingMargin is how long past its deletionTimestamp (the moment of its
// deletion plus its grace period) a pod may still be listed before the drain stops
// waiting for it, as Karpenter does: by then its containers were killed if the
// kubelet lives, and if the kubelet is dead (or a finalizer holds the object) the
// pod would never go while the node stays.
const stuckTerminatingMargin = time.Minute

// drain evicts the node's pods and returns how many still have to leave. With a
// terminationGracePeriod, each pod is deleted once the time left before the
// deadline is no more than its own grace period, with the time left as its grace
// period, so that it still ends cleanly before the instance goes: the period
// exists so that a blocking PDB or do-not-disrupt pod cannot hold a node forever.
// Evicted pods count in karpenter_pods_drained_total under reason, why the node goes.
func (c *Controller) drain(ctx context.Context, claim string, node *corev1.Node, deadline *time.Time, reason string) (int, error) {
	var pods corev1.PodList
	if err := c.kube.List(ctx, &pods, client.MatchingFields{"spec.nodeName": node.Name}); err != nil {
		return 0, fmt.Errorf("listing pods to drain, %w", err)
	}
	now := c.clock.Now()
	remaining := 0
	sizeOf := podSizer(node)
	group := firstEvictionGroup(pods.Items, now)
	first, wave := c.wave(claim, now)
	if first {
		others, err := c.podsOfOtherDrains(ctx, node.Name)
		if err != nil {
			// The order is an optimization; the drain (and a deadline's deletions)
			// must not wait on it.
			log.FromContext(ctx).Error(err, "ordering the drain by the other drains' pods; ordering it by its own")
		}
		wave.threshold = evictionWave(sizeOf, append(pods.Items, others...), group, now)
	} else if wave.threshold > 0 && c.landed(ctx, wave, now) {
		wave.threshold = 0
	}
	for i := range pods.Items {
		pod := &pods.Items[i]
		if !needsEviction(pod) {
			continue
		}
		if pod.DeletionTimestamp != nil {
			if now.Sub(pod.DeletionTimestamp.Time) <= stuckTerminatingMargin {
				remaining++
			}
			continue
		}
		remaining++
		if deadline != nil && !now.Before(deadline.Add(-podGracePeriod(pod))) {
			left := int64(max(deadline.Sub(now), 0) / time.Second)
			if err := c.kube.Delete(ctx, pod, client.GracePeriodSeconds(left)); client.IgnoreNotFound(err) != nil {
				return 0, fmt.Errorf("deleting pod before the termination grace period runs out, %w", err)
			}
			continue
		}
		if protected, _ := v1.PodDoNotDisrupt(pod, now); protected {
			// The pod asked not to be disrupted (for good, or for a while after it
			// started); only the grace period overrides it.
			continue
		}
		if evictionGroup(pod) != group {
			// A later group waits until every pod of this one has been asked.
			continue
		}
		if sizeOf(pod) < wave.threshold {
			// A smaller pod goes in a later pass, once the larger ones have landed.
			continue
		}
		evicted, gone, err := Evict(ctx, c.kube, c.recorder, pod, reason)
		if err != nil {
			return 0, err
		}
		if gone {
			remaining--
		}
		if evicted && first {
			c.evictedPod(wave, pod)
		}
	}
	return remaining, nil
}

// Evict asks the Eviction API to evict the pod, so its PodDisruptionBudgets are
// respected, and counts it (karpenter_pods_eviction_requests_total, and
// karpenter_pods_drained_total under reason). evicted says the API accepted; gone
// that the pod no longer exists. A budget that allows no disruption now is no
// error: an event on the pod says the drain retries.
func Evict(ctx context.Context, kube client.Client, recorder record.EventRecorder, pod *corev1.Pod, reason string) (evicted, gone bool, err error) {
	eviction := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace}}
	err = kube.SubResource("eviction").Create(ctx, pod, eviction)
	metrics.PodsEvictionRequests.WithLabelValues(evictionCode(err)).Inc()
	switch {
	case err == nil:
		metrics.PodsDrained.WithLabelValues(reason).Inc()
		return true, false, nil
	case apierrors.IsNotFound(err):
		return false, true, nil
	case apierrors.IsTooManyRequests(err):
		recorder.Eventf(pod, corev1.EventTypeWarning, "FailedDraining", "Eviction blocked by a PodDisruptionBudget; retrying")
		return false, false, nil
	}
	return false, false, fmt.Errorf("evicting pod %s/%s, %w", pod.Namespace, pod.Name, err)
}

// The built-in priority classes a drain treats as critical, as Karpenter does.
const (
	systemClusterCritical = "system-cluster-critical"
	systemNodeCritical    = "system-node-critical"
)

// evictionGroup is the pod's turn in a drain, Karpenter's order (and the kubelet's
// in a graceful node shutdown): workloads, then DaemonSet pods, then critical
// workloads, then critical DaemonSet pods. The services a workload leans on while
// it stops (a log shipper, DNS) are asked to go after it.
func evictionGroup(pod *corev1.Pod) int {
	group := 0
	if scheduling.OwnedByDaemonSet(pod) {
		group++
	}
	if pod.Spec.PriorityClassName == systemClusterCritical || pod.Spec.PriorityClassName == systemNodeCritical {
		group += 2
	}
	return group
}

// firstEvictionGroup is the group a drain pass evicts: the first with a pod it may
// ask to go now. As in Karpenter, a group goes once every pod of the one before has
// been asked (it may still be stopping), so that a drain reaches every pod within an
// interruption's two minutes; a do-not-disrupt pod, which only the termination grace
// period moves, does not hold the groups after it.
func firstEvictionGroup(pods []corev1.Pod, now time.Time) int {
	first := math.MaxInt
	for i := range pods {
		pod := &pods[i]
		if !needsEviction(pod) || pod.DeletionTimestamp != nil {
			continue
		}
		if protected, _ := v1.PodDoNotDisrupt(pod, now); !protected {
			first = min(first, evictionGroup(pod))
		}
	}
	return first
}

// evictionCode is the HTTP status the eviction API answered.
func evictionCode(err error) string {
	if err == nil {
		return "200"
	}
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		return strconv.Itoa(int(status.Status().Code))
	}
	return "error"
}

// disruptionReason is why the claim is being deleted, in lower case: a disruption
// reason (drifted, empty, underutilized, expired, interrupted, ...) or "deleted".
func disruptionReason(nc *v1.NodeClaim) string {
	if c := meta.FindStatusCondition(nc.Status.Conditions, v1.ConditionTypeDisruptionReason); c != nil && c.Reason != "" {
		return strings.ToLower(c.Reason)
	}
	return "deleted"
}

// podGracePeriod is the pod's terminationGracePeriodSeconds, or the API's default.
func podGracePeriod(pod *corev1.Pod) time.Duration {
	if s := pod.Spec.TerminationGracePeriodSeconds; s != nil {
		return time.Duration(*s) * time.Second
	}
	return corev1.DefaultTerminationGracePeriodSeconds * time.Second
}

// needsEviction: mirror pods, finished pods and pods that tolerate the drain's
// taint stay until the node goes, as in Karpenter. A pod that tolerates the taint
// could be scheduled straight back; most DaemonSets tolerate every taint. A
// DaemonSet pod that does not is evicted, in its turn, so that it stops cleanly:
// its controller does not recreate it on a node with a taint it does not tolerate.
func needsEviction(pod *corev1.Pod) bool { return Drainable(pod, v1.DisruptedNoScheduleTaint) }

// Drainable says whether a drain behind the taint moves the pod: not a mirror pod,
// a finished one, or one that tolerates the taint.
func Drainable(pod *corev1.Pod, taint corev1.Taint) bool {
	if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return false
	}
	if _, mirror := pod.Annotations[corev1.MirrorPodAnnotationKey]; mirror {
		return false
	}
	for i := range pod.Spec.Tolerations {
		if pod.Spec.Tolerations[i].ToleratesTaint(&taint) {
			return false
		}
	}
	return true
}
