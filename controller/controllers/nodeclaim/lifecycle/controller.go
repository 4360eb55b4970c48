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
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/controller/cloudprovider"
)

// ProviderIDIndex indexes Nodes by spec.providerID.
const ProviderIDIndex = "spec.providerID"

// ClaimProviderIDIndex indexes NodeClaims by status.providerID.
const ClaimProviderIDIndex = "status.providerID"

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
	writes  ownWrites
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
		Watches(&v1.NodeClaim{}, c.deletions()).
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
		if launched, ok := c.launched.Load(nc.UID); ok && nc.Status.ProviderID == "" {
			// Its launch was never recorded (the claim went deleting meanwhile), so
			// termination cannot terminate it by providerID.
			c.terminateUnrecorded(ctx, launched.(*v1.NodeClaim))
		}
		c.forget(nc.UID)
		return reconcile.Result{}, nil
	}
	if c.writes.outdated(nc) {
		return reconcile.Result{}, nil
	}
	if !controllerutil.ContainsFinalizer(nc, v1.TerminationFinalizer) {
		patch := client.MergeFrom(nc.DeepCopy())
		controllerutil.AddFinalizer(nc, v1.TerminationFinalizer)
		if err := c.patchClaim(ctx, nc, patch, false); err != nil {
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

// deletions drops what this process remembers of a claim once it is gone. A claim
// whose finalizer went before a Reconcile saw it deleting is never reconciled
// again (a missing object ends the Reconcile before it starts), so without this its
// entries would stay for the life of the process.
func (c *Controller) deletions() handler.EventHandler {
	return handler.Funcs{DeleteFunc: func(ctx context.Context, e event.TypedDeleteEvent[client.Object], _ workqueue.TypedRateLimitingInterface[reconcile.Request]) {
		if launched, ok := c.launched.Load(e.Object.GetUID()); ok {
			if nc, isClaim := e.Object.(*v1.NodeClaim); isClaim && nc.Status.ProviderID == "" {
				// Gone before its launch was recorded on it: nothing else knows of
				// the instance but garbage collection. Not on the informer's goroutine.
				go func(launched *v1.NodeClaim) {
					ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
					defer cancel()
					c.terminateUnrecorded(ctx, launched)
				}(launched.(*v1.NodeClaim))
			}
		}
		c.forget(e.Object.GetUID())
	}}
}

func (c *Controller) forget(uid types.UID) {
	c.launched.Delete(uid)
	c.refused.Delete(uid)
	c.retries.DeleteEntry(string(uid))
	c.writes.forget(uid)
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
