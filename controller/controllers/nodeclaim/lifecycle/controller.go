// Package lifecycle drives a NodeClaim from creation to a node ready for pods:
// launch through the cloud provider, registration of the Node that appears with its
// providerID, initialization once it is Ready with its startup taints gone, and
// timeouts that give up on a launch that keeps failing or a node that never comes,
// deleting the claim so that its pods are planned again.
package lifecycle

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	dovetailv1alpha1 "github.com/dovetail-sh/dovetail/controller/apis/dovetail/v1alpha1"
	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/controller/cloudprovider"
	"github.com/dovetail-sh/dovetail/controller/metrics"
	"github.com/dovetail-sh/dovetail/controller/state"
)

// ProviderIDIndex indexes Nodes by spec.providerID.
const ProviderIDIndex = "spec.providerID"

// ClaimProviderIDIndex indexes NodeClaims by status.providerID.
const ClaimProviderIDIndex = "status.providerID"

// Retry bounds for a launch the cloud provider refused for a reason other than
// capacity (node class not ready, no image, permissions): the claim is tried again
// with backoff until the registration TTL, counted from its creation, runs out.
const (
	launchRetryInitial = time.Second
	launchRetryMax     = time.Minute
)

// maxConditionMessage keeps a cloud error that quotes a whole request out of the
// claim's status.
const maxConditionMessage = 1024

// Controller is the NodeClaim lifecycle controller.
type Controller struct {
	kube            client.Client
	cloud           cloudprovider.CloudProvider
	clock           clock.Clock
	recorder        record.EventRecorder
	registrationTTL time.Duration
	// launched remembers each launch until the cache shows it on the claim: a
	// Reconcile that reads the claim from before the launch must not launch again.
	launched sync.Map
	// refused holds the claims this process deleted because EC2 had no capacity,
	// until the cache shows them deleting: a Reconcile that reads the claim from
	// before the delete must not launch it again (the instance would be orphaned).
	refused sync.Map
	// retries spaces out failed launches of a claim; the status writes that record
	// a failure trigger a Reconcile of their own, which must not retry at once.
	retries *flowcontrol.Backoff
}

// NewController wires the controller.
func NewController(kube client.Client, cloud cloudprovider.CloudProvider, clk clock.Clock, recorder record.EventRecorder, registrationTTL time.Duration) *Controller {
	retries := flowcontrol.NewBackOff(launchRetryInitial, launchRetryMax)
	retries.Clock = clk
	return &Controller{kube: kube, cloud: cloud, clock: clk, recorder: recorder, registrationTTL: registrationTTL, retries: retries}
}

func (c *Controller) Name() string { return "nodeclaim.lifecycle" }

// Register indexes Nodes by providerID and watches NodeClaims and their Nodes.
func (c *Controller) Register(ctx context.Context, mgr manager.Manager) error {
	if err := mgr.GetFieldIndexer().IndexField(ctx, &corev1.Node{}, ProviderIDIndex, func(o client.Object) []string {
		return []string{o.(*corev1.Node).Spec.ProviderID}
	}); err != nil {
		return fmt.Errorf("indexing nodes by providerID, %w", err)
	}
	if err := mgr.GetFieldIndexer().IndexField(ctx, &v1.NodeClaim{}, ClaimProviderIDIndex, func(o client.Object) []string {
		return []string{o.(*v1.NodeClaim).Status.ProviderID}
	}); err != nil {
		return fmt.Errorf("indexing nodeclaims by providerID, %w", err)
	}
	return builder.ControllerManagedBy(mgr).Named(c.Name()).
		For(&v1.NodeClaim{}).
		Watches(&corev1.Node{}, handler.EnqueueRequestsFromMapFunc(c.claimForNode)).
		WithOptions(controller.Options{MaxConcurrentReconciles: 50}).
		Complete(reconcile.AsReconciler(mgr.GetClient(), c))
}

// claimForNode maps a Node event to its NodeClaim by providerID. It runs for
// every Node update (kubelet heartbeats among them), so it looks the claim up by
// index: listing every claim here was most of what a large cluster allocated.
func (c *Controller) claimForNode(ctx context.Context, o client.Object) []reconcile.Request {
	node := o.(*corev1.Node)
	if node.Spec.ProviderID == "" {
		return nil
	}
	var claims v1.NodeClaimList
	if err := c.kube.List(ctx, &claims, client.MatchingFields{ClaimProviderIDIndex: node.Spec.ProviderID}, client.UnsafeDisableDeepCopy); err != nil {
		return nil
	}
	for _, nc := range claims.Items {
		if nc.Status.ProviderID == node.Spec.ProviderID {
			return []reconcile.Request{{NamespacedName: client.ObjectKey{Name: nc.Name}}}
		}
	}
	return nil
}

func (c *Controller) Reconcile(ctx context.Context, nc *v1.NodeClaim) (reconcile.Result, error) {
	if nc.DeletionTimestamp != nil {
		c.forget(nc)
		return reconcile.Result{}, nil
	}
	if !controllerutil.ContainsFinalizer(nc, v1.TerminationFinalizer) {
		patch := client.MergeFrom(nc.DeepCopy())
		controllerutil.AddFinalizer(nc, v1.TerminationFinalizer)
		if err := c.kube.Patch(ctx, nc, patch); err != nil {
			return reconcile.Result{}, client.IgnoreNotFound(err)
		}
	}
	if nc.Status.ProviderID == "" {
		return c.launch(ctx, nc)
	}
	if err := c.completeLaunch(ctx, nc); err != nil {
		return requeueOnConflict(err)
	}
	node, err := c.nodeFor(ctx, nc)
	if err != nil {
		return reconcile.Result{}, err
	}
	if node == nil {
		return c.awaitRegistration(ctx, nc)
	}
	if node.DeletionTimestamp != nil {
		// Someone deleted the Node (kubectl, or Karpenter's finalizer held it): the
		// claim goes the same way, drained and terminated, which releases the node.
		c.recorder.Event(nc, corev1.EventTypeNormal, "NodeDeleting", "The node of this NodeClaim is being deleted; deleting the NodeClaim")
		return reconcile.Result{}, client.IgnoreNotFound(c.kube.Delete(ctx, nc))
	}
	if err := c.register(ctx, nc, node); err != nil {
		return requeueOnConflict(err)
	}
	return c.initialize(ctx, nc, node)
}

func (c *Controller) forget(nc *v1.NodeClaim) {
	c.launched.Delete(nc.UID)
	c.refused.Delete(nc.UID)
	c.retries.DeleteEntry(string(nc.UID))
}

func (c *Controller) launch(ctx context.Context, nc *v1.NodeClaim) (reconcile.Result, error) {
	// The cache can lag our own status write; never launch twice for one claim.
	if launched, ok := c.launched.Load(nc.UID); ok {
		return c.recordLaunch(ctx, nc, launched.(*v1.NodeClaim))
	}
	if _, ok := c.refused.Load(nc.UID); ok {
		return reconcile.Result{}, nil
	}
	// Past the TTL the backoff no longer holds: one last attempt, then the claim goes.
	if now := c.clock.Now(); c.retries.IsInBackOffSinceUpdate(string(nc.UID), now) && c.clock.Since(nc.CreationTimestamp.Time) < c.registrationTTL {
		return reconcile.Result{RequeueAfter: c.untilRetry(nc, c.retries.Get(string(nc.UID)))}, nil
	}
	launched, err := c.cloud.Create(ctx, nc)
	if err != nil {
		if cloudprovider.IsInsufficientCapacity(err) {
			c.recorder.Eventf(nc, corev1.EventTypeWarning, "InsufficientCapacityError", "NodeClaim %s event: %v", nc.Name, err)
			log.FromContext(ctx).Error(err, "launch failed, deleting the nodeclaim so its pods are planned again")
			c.refused.Store(nc.UID, struct{}{})
			return reconcile.Result{}, client.IgnoreNotFound(c.kube.Delete(ctx, nc))
		}
		return c.launchFailed(ctx, nc, err)
	}
	c.retries.DeleteEntry(string(nc.UID))
	c.retries.GC()
	c.launched.Store(nc.UID, launched)
	log.FromContext(ctx).Info("launched nodeclaim", "providerID", launched.Status.ProviderID, "instanceType", launched.Labels[v1.LabelInstanceType],
		"zone", launched.Labels[v1.LabelTopologyZone], "capacityType", launched.Labels[v1.LabelCapacityType])
	c.recorder.Eventf(nc, corev1.EventTypeNormal, "Launched", "Launched %s in %s (%s)", launched.Labels[v1.LabelInstanceType], launched.Labels[v1.LabelTopologyZone], launched.Labels[v1.LabelCapacityType])
	if cond := meta.FindStatusCondition(launched.Status.Conditions, v1.ConditionTypeLaunched); cond != nil && cond.Reason != "" && cond.Reason != "Launched" {
		c.recorder.Event(nc, corev1.EventTypeWarning, cond.Reason, cond.Message)
	}
	return c.recordLaunch(ctx, nc, launched)
}

// launchFailed records why the launch failed on the claim's Launched condition and
// retries with backoff; once the claim has existed for the registration TTL it is
// deleted, so that its pods are planned again, maybe on another pool or type,
// instead of waiting for a launch that may never succeed.
func (c *Controller) launchFailed(ctx context.Context, nc *v1.NodeClaim, launchErr error) (reconcile.Result, error) {
	age := c.clock.Since(nc.CreationTimestamp.Time)
	timedOut := age >= c.registrationTTL
	reason, message := "LaunchFailed", conditionMessage(launchErr.Error())
	if timedOut {
		reason = "LaunchTimeout"
		message = conditionMessage(fmt.Sprintf("no instance launched within %s; last error: %v", c.registrationTTL, launchErr))
	}
	patch := client.MergeFrom(nc.DeepCopy())
	if c.setCondition(nc, v1.ConditionTypeLaunched, metav1.ConditionFalse, reason, message) {
		if err := c.kube.Status().Patch(ctx, nc, patch); err != nil {
			if apierrors.IsNotFound(err) {
				return reconcile.Result{}, nil
			}
			return reconcile.Result{}, fmt.Errorf("recording launch failure, %w", err)
		}
	}
	if timedOut {
		c.recorder.Eventf(nc, corev1.EventTypeWarning, "LaunchTimeout", "No instance launched within %s; deleting the NodeClaim so its pods are planned again. Last error: %v", c.registrationTTL, launchErr)
		log.FromContext(ctx).Error(launchErr, "launch timed out, deleting nodeclaim", "age", age.String())
		c.forget(nc)
		return reconcile.Result{}, client.IgnoreNotFound(c.kube.Delete(ctx, nc))
	}
	c.recorder.Eventf(nc, corev1.EventTypeWarning, "LaunchFailed", "Launching the NodeClaim failed, retrying: %v", launchErr)
	log.FromContext(ctx).Error(launchErr, "launch failed, retrying")
	c.retries.Next(string(nc.UID), c.clock.Now())
	return reconcile.Result{RequeueAfter: c.untilRetry(nc, c.retries.Get(string(nc.UID)))}, nil
}

// untilRetry caps a retry delay so that the launch timeout is checked on time.
func (c *Controller) untilRetry(nc *v1.NodeClaim, delay time.Duration) time.Duration {
	if left := c.registrationTTL - c.clock.Since(nc.CreationTimestamp.Time); left < delay {
		delay = max(left, time.Second)
	}
	return delay
}

func conditionMessage(s string) string {
	if len(s) > maxConditionMessage {
		return s[:maxConditionMessage-3] + "..."
	}
	return s
}

// launchLabels are what a launch adds to a claim and every launched claim has.
var launchLabels = []string{v1.LabelInstanceType, v1.LabelTopologyZone, v1.LabelCapacityType}

func hasLaunchLabels(nc *v1.NodeClaim) bool {
	for _, k := range launchLabels {
		if nc.Labels[k] == "" {
			return false
		}
	}
	return true
}

// recordLaunch writes the launch to the claim: status first, so that once anything
// is written the providerID is, and a restart can never launch the claim again;
// then the labels, which completeLaunch re-derives if this process dies before.
func (c *Controller) recordLaunch(ctx context.Context, nc, launched *v1.NodeClaim) (reconcile.Result, error) {
	statusPatch := lockedPatch(nc)
	nc.Status.ProviderID = launched.Status.ProviderID
	nc.Status.ImageID = launched.Status.ImageID
	nc.Status.Capacity = launched.Status.Capacity
	nc.Status.Allocatable = launched.Status.Allocatable
	// A provider that launched other than as planned (on-demand for a spot claim)
	// says why on its Launched condition.
	reason, message := "Launched", ""
	if cond := meta.FindStatusCondition(launched.Status.Conditions, v1.ConditionTypeLaunched); cond != nil && cond.Reason != "" {
		reason, message = cond.Reason, conditionMessage(cond.Message)
	}
	c.setCondition(nc, v1.ConditionTypeLaunched, metav1.ConditionTrue, reason, message)
	c.setCondition(nc, v1.ConditionTypeRegistered, metav1.ConditionUnknown, "AwaitingRegistration", "waiting for the node to register")
	if err := c.kube.Status().Patch(ctx, nc, statusPatch); err != nil {
		if apierrors.IsNotFound(err) {
			// Deleted while launching: termination has nothing to terminate by
			// providerID, and garbage collection takes the orphaned instance.
			c.forget(nc)
			return reconcile.Result{}, nil
		}
		return requeueOnConflict(fmt.Errorf("recording launch, %w", err))
	}
	if err := c.label(ctx, nc, launched); err != nil {
		return reconcile.Result{}, err
	}
	// The guard stays until a Reconcile reads the providerID from the cache.
	return reconcile.Result{RequeueAfter: time.Second}, nil
}

// completeLaunch gives a launched claim the labels of its instance when it lacks
// them: they come from this process's record of the launch or, after a restart,
// from the cloud provider. The claim then no longer needs the launch guard.
func (c *Controller) completeLaunch(ctx context.Context, nc *v1.NodeClaim) error {
	if hasLaunchLabels(nc) {
		c.launched.Delete(nc.UID)
		return nil
	}
	var from *v1.NodeClaim
	if l, ok := c.launched.Load(nc.UID); ok && l.(*v1.NodeClaim).Status.ProviderID == nc.Status.ProviderID {
		from = l.(*v1.NodeClaim)
	} else {
		inst, err := c.cloud.Get(ctx, nc.Status.ProviderID)
		if cloudprovider.IsNodeClaimNotFound(err) {
			// Nothing to learn the labels from; garbage collection deletes a claim
			// whose instance is gone.
			log.FromContext(ctx).Info("launched nodeclaim has no instance labels and its instance is not found", "providerID", nc.Status.ProviderID)
			return nil
		}
		if err != nil {
			return fmt.Errorf("getting the instance of nodeclaim, %w", err)
		}
		from = inst
	}
	if err := c.label(ctx, nc, from); err != nil {
		return err
	}
	c.launched.Delete(nc.UID)
	return nil
}

// label adds the launched instance's labels and annotations the claim lacks.
func (c *Controller) label(ctx context.Context, nc, launched *v1.NodeClaim) error {
	patch := client.MergeFrom(nc.DeepCopy())
	changed := false
	for k, v := range launched.Labels {
		if _, ok := nc.Labels[k]; !ok {
			if nc.Labels == nil {
				nc.Labels = map[string]string{}
			}
			nc.Labels[k], changed = v, true
		}
	}
	for k, v := range launched.Annotations {
		if _, ok := nc.Annotations[k]; !ok {
			if nc.Annotations == nil {
				nc.Annotations = map[string]string{}
			}
			nc.Annotations[k], changed = v, true
		}
	}
	if !changed {
		return nil
	}
	if err := c.kube.Patch(ctx, nc, patch); err != nil {
		return fmt.Errorf("labelling launched nodeclaim, %w", err)
	}
	return nil
}

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
		return reconcile.Result{}, client.IgnoreNotFound(c.kube.Delete(ctx, nc))
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
	if err := c.kube.Patch(ctx, nc, patch); err != nil {
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
	if !ownedBy(desired, nc) {
		desired.OwnerReferences = append(desired.OwnerReferences, metav1.OwnerReference{
			APIVersion: v1.SchemeGroupVersion.String(), Kind: "NodeClaim", Name: nc.Name, UID: nc.UID, BlockOwnerDeletion: ptrTo(true),
		})
	}
	if !equality.Semantic.DeepEqual(desired.Labels, node.Labels) || !equality.Semantic.DeepEqual(desired.Annotations, node.Annotations) ||
		!equality.Semantic.DeepEqual(desired.Spec.Taints, node.Spec.Taints) || len(desired.OwnerReferences) != len(node.OwnerReferences) {
		if err := c.kube.Patch(ctx, desired, client.MergeFrom(node)); err != nil {
			return fmt.Errorf("syncing the node of nodeclaim, %w", err)
		}
	}
	if err := c.forgetDropped(ctx, nc, desired); err != nil {
		return err
	}
	if meta.IsStatusConditionTrue(nc.Status.Conditions, v1.ConditionTypeRegistered) && nc.Status.NodeName == node.Name {
		return nil
	}
	patch := lockedPatch(nc)
	nc.Status.NodeName = node.Name
	c.setCondition(nc, v1.ConditionTypeRegistered, metav1.ConditionTrue, "Registered", "")
	c.setCondition(nc, v1.ConditionTypeInitialized, metav1.ConditionUnknown, "AwaitingInitialization", "waiting for the node to be ready")
	if err := c.kube.Status().Patch(ctx, nc, patch); err != nil {
		return fmt.Errorf("recording registration, %w", err)
	}
	metrics.NodesCreated.WithLabelValues(nc.Labels[v1.LabelNodePool], node.Labels[v1.LabelTopologyZone]).Inc()
	return nil
}

// initialize marks the claim ready once its node is Ready, its startup taints are
// gone and every extended resource its pods asked for is advertised.
func (c *Controller) initialize(ctx context.Context, nc *v1.NodeClaim, node *corev1.Node) (reconcile.Result, error) {
	if meta.IsStatusConditionTrue(nc.Status.Conditions, v1.ConditionTypeInitialized) {
		return reconcile.Result{}, nil
	}
	if reason := notInitialized(nc, node); reason != "" {
		patch := client.MergeFrom(nc.DeepCopy())
		if c.setCondition(nc, v1.ConditionTypeInitialized, metav1.ConditionUnknown, "NotInitialized", reason) {
			if err := c.kube.Status().Patch(ctx, nc, patch); err != nil {
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
	c.setCondition(nc, v1.ConditionTypeInitialized, metav1.ConditionTrue, "Initialized", "")
	c.setCondition(nc, v1.ConditionTypeReady, metav1.ConditionTrue, "Ready", "")
	if err := c.kube.Status().Patch(ctx, nc, patch); err != nil {
		return requeueOnConflict(fmt.Errorf("recording initialization, %w", err))
	}
	return reconcile.Result{}, nil
}

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

// setCondition sets a condition and reports whether anything changed.
func (c *Controller) setCondition(nc *v1.NodeClaim, t string, status metav1.ConditionStatus, reason, message string) bool {
	return meta.SetStatusCondition(&nc.Status.Conditions, metav1.Condition{
		Type: t, Status: status, Reason: reason, Message: message, ObservedGeneration: nc.Generation,
		LastTransitionTime: metav1.NewTime(c.clock.Now()),
	})
}

func ptrTo[T any](v T) *T { return &v }

// lockedPatch makes a status patch that fails if the claim changed since it was read.
// The cache can lag our own writes; without the lock a stale read would record a
// transition twice (and count it twice in the metrics).
func lockedPatch(nc *v1.NodeClaim) client.Patch {
	return client.MergeFromWithOptions(nc.DeepCopy(), client.MergeFromWithOptimisticLock{})
}

// requeueOnConflict turns a conflict from a locked patch into a quiet retry.
func requeueOnConflict(err error) (reconcile.Result, error) {
	if apierrors.IsConflict(err) {
		return reconcile.Result{RequeueAfter: 100 * time.Millisecond}, nil
	}
	return reconcile.Result{}, err
}
