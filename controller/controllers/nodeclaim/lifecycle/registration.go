package lifecycle

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	dovetailv1alpha1 "github.com/dovetail-sh/dovetail/controller/apis/dovetail/v1alpha1"
	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/controller/metrics"
	"github.com/dovetail-sh/dovetail/controller/state"
)

func (c *Controller) nodeFor(ctx context.Context, nc *v1.NodeClaim) (*corev1.Node, error) {
	var nodes corev1.NodeList
	if err := c.kube.List(ctx, &nodes, client.MatchingFields{ProviderIDIndex: nc.Status.ProviderID}); err != nil {
		return nil, fmt.Errorf("finding the node of nodeclaim, %w", err)
	}
	if len(nodes.Items) == 0 {
		return nil, nil
	}
	return &nodes.Items[0], nil
}

func (c *Controller) awaitRegistration(ctx context.Context, nc *v1.NodeClaim) (reconcile.Result, error) {
	if meta.IsStatusConditionTrue(nc.Status.Conditions, v1.ConditionTypeRegistered) {
		// The node was registered and is gone: the instance went away under us.
		c.recorder.Event(nc, corev1.EventTypeWarning, "NodeDeleted", "The node of this NodeClaim was deleted; deleting the NodeClaim")
		return reconcile.Result{}, client.IgnoreNotFound(c.kube.Delete(ctx, nc))
	}
	launched := meta.FindStatusCondition(nc.Status.Conditions, v1.ConditionTypeLaunched)
	since := nc.CreationTimestamp.Time
	if launched != nil {
		since = launched.LastTransitionTime.Time
	}
	if waited := c.clock.Since(since); waited > c.registrationTTL {
		c.recorder.Eventf(nc, corev1.EventTypeWarning, "RegistrationTimeout", "The node did not register within %s; deleting the NodeClaim", c.registrationTTL)
		log.FromContext(ctx).Info("registration timed out, deleting nodeclaim", "waited", waited.String())
		return reconcile.Result{}, c.deleteDisrupted(ctx, nc, "registration_timeout")
	}
	return reconcile.Result{RequeueAfter: 5 * time.Second}, nil
}

// forgetDropped clears the claim's record of the keys an in-place update took
// off once the node no longer has them: a key someone sets on the node later
// (a node feature labeller, an operator) is theirs and stays.
func (c *Controller) forgetDropped(ctx context.Context, nc *v1.NodeClaim, node *corev1.Node) error {
	labels := dovetailv1alpha1.SplitKeys(nc.Annotations[dovetailv1alpha1.DroppedLabelsAnnotationKey])
	annotations := dovetailv1alpha1.SplitKeys(nc.Annotations[dovetailv1alpha1.DroppedAnnotationsAnnotationKey])
	if len(labels)+len(annotations) == 0 {
		return nil
	}
	for _, k := range labels {
		if _, on := node.Labels[k]; on {
			return nil
		}
	}
	for _, k := range annotations {
		if _, on := node.Annotations[k]; on {
			return nil
		}
	}
	patch := client.MergeFrom(nc.DeepCopy())
	delete(nc.Annotations, dovetailv1alpha1.DroppedLabelsAnnotationKey)
	delete(nc.Annotations, dovetailv1alpha1.DroppedAnnotationsAnnotationKey)
	if err := c.patchClaim(ctx, nc, patch, false); err != nil {
		return client.IgnoreNotFound(fmt.Errorf("forgetting the keys taken off node %s, %w", node.Name, err))
	}
	return nil
}

// register adopts the Node: the claim's labels and taints, its owner, and the end of
// the unregistered taint.
func (c *Controller) register(ctx context.Context, nc *v1.NodeClaim, node *corev1.Node) error {
	desired := node.DeepCopy()
	if desired.Labels == nil {
		desired.Labels = map[string]string{}
	}
	for k, v := range nc.Labels {
		desired.Labels[k] = v
	}
	desired.Labels[v1.LabelNodeRegistered] = "true"
	// An in-place update of the pool's template metadata (nodeclaim.metadata)
	// changes the claim; this sync, the one writer of those keys on the node,
	// carries it over: dropped keys go, and the template's annotations follow the
	// claim's after registration too.
	for _, k := range dovetailv1alpha1.SplitKeys(nc.Annotations[dovetailv1alpha1.DroppedLabelsAnnotationKey]) {
		if _, kept := nc.Labels[k]; !kept {
			delete(desired.Labels, k)
		}
	}
	if meta.IsStatusConditionTrue(nc.Status.Conditions, v1.ConditionTypeRegistered) {
		for _, k := range dovetailv1alpha1.SplitKeys(nc.Annotations[dovetailv1alpha1.DroppedAnnotationsAnnotationKey]) {
			if _, kept := nc.Annotations[k]; !kept {
				delete(desired.Annotations, k)
			}
		}
		for _, k := range dovetailv1alpha1.SplitKeys(nc.Annotations[dovetailv1alpha1.TemplateAnnotationsAnnotationKey]) {
			if v, ok := nc.Annotations[k]; ok {
				if desired.Annotations == nil {
					desired.Annotations = map[string]string{}
				}
				desired.Annotations[k] = v
			}
		}
	}
	taints := make([]corev1.Taint, 0, len(desired.Spec.Taints))
	for _, t := range desired.Spec.Taints {
		if t.MatchTaint(&v1.UnregisteredNoExecuteTaint) {
			continue
		}
		taints = append(taints, t)
	}
	if !meta.IsStatusConditionTrue(nc.Status.Conditions, v1.ConditionTypeRegistered) {
		// Taints are synced once, at registration; afterwards they belong to the node.
		for _, want := range nc.Spec.Taints {
			if !hasTaint(taints, want) {
				taints = append(taints, want)
			}
		}
		// So are the claim's annotations (the pool template's among them), as in
		// Karpenter; what the node already says wins, and the record of a
		// disruption in progress is the claim's alone.
		for k, v := range nc.Annotations {
			if _, set := desired.Annotations[k]; set || k == state.DisruptionAnnotationKey {
				continue
			}
			if desired.Annotations == nil {
				desired.Annotations = map[string]string{}
			}
			desired.Annotations[k] = v
		}
	}
	desired.Spec.Taints = taints
	// A node already Ready when it registers is initialized in the same writes, not
	// in two more: in a scale-out every write waits on a busy API server.
	registering := !meta.IsStatusConditionTrue(nc.Status.Conditions, v1.ConditionTypeRegistered) || nc.Status.NodeName != node.Name
	uninitialized := notInitialized(nc, desired)
	if registering && uninitialized == "" {
		desired.Labels[v1.LabelNodeInitialized] = "true"
	}
	if !ownedBy(desired, nc) {
		desired.OwnerReferences = append(desired.OwnerReferences, metav1.OwnerReference{
			APIVersion: v1.SchemeGroupVersion.String(), Kind: "NodeClaim", Name: nc.Name, UID: nc.UID, BlockOwnerDeletion: ptrTo(true),
		})
	}
	if !equality.Semantic.DeepEqual(desired.Labels, node.Labels) || !equality.Semantic.DeepEqual(desired.Annotations, node.Annotations) ||
		!equality.Semantic.DeepEqual(desired.Spec.Taints, node.Spec.Taints) || len(desired.OwnerReferences) != len(node.OwnerReferences) {
		// Locked: the patch replaces the taint list whole, and a Node read from a cache
		// that lags the registration's own write (the unregistered taint still on it)
		// would otherwise drop the claim's taints or put back a removed startup taint.
		if err := c.kube.Patch(ctx, desired, client.MergeFromWithOptions(node, client.MergeFromWithOptimisticLock{})); err != nil {
			return fmt.Errorf("syncing the node of nodeclaim, %w", err)
		}
	}
	if err := c.forgetDropped(ctx, nc, desired); err != nil {
		return err
	}
	if !registering {
		return nil
	}
	patch := lockedPatch(nc)
	nc.Status.NodeName = node.Name
	c.setCondition(nc, v1.ConditionTypeRegistered, metav1.ConditionTrue, "Registered", "")
	c.setInitialized(nc, uninitialized)
	if err := c.patchClaim(ctx, nc, patch, true); err != nil {
		return fmt.Errorf("recording registration, %w", err)
	}
	metrics.NodesCreated.WithLabelValues(nc.Labels[v1.LabelNodePool], node.Labels[v1.LabelTopologyZone]).Inc()
	return nil
}

func hasTaint(taints []corev1.Taint, want corev1.Taint) bool {
	for i := range taints {
		if taints[i].MatchTaint(&want) {
			return true
		}
	}
	return false
}

func ownedBy(node *corev1.Node, nc *v1.NodeClaim) bool {
	for _, o := range node.OwnerReferences {
		if o.UID == nc.UID {
			return true
		}
	}
	return false
}

// deleteDisrupted deletes a claim that never became a node and counts it in
// karpenter_nodeclaims_disrupted_total under reason, as Karpenter v1.15 does (no
// pods were on it).
func (c *Controller) deleteDisrupted(ctx context.Context, nc *v1.NodeClaim, reason string) error {
	if err := c.kube.Delete(ctx, nc); err != nil {
		return client.IgnoreNotFound(err)
	}
	metrics.Disruption{Reason: reason, NodePool: nc.Labels[v1.LabelNodePool], CapacityType: nc.Labels[v1.LabelCapacityType],
		TerminationMode: metrics.TerminationMode(nc.Spec.TerminationGracePeriod)}.Record(-1)
	return nil
}
