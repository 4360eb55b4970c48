// Package expiration deletes NodeClaims that have lived past their expireAfter.
// Expiration is forceful: no budget or do-not-disrupt holds it back; the drain that
// follows respects PodDisruptionBudgets and do-not-disrupt pods only until the
// claim's terminationGracePeriod runs out.
package expiration

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/controller/controllers/drainable"
	"github.com/dovetail-sh/dovetail/controller/metrics"
)

// Controller is the expiration controller.
type Controller struct {
	kube     client.Client
	clock    clock.Clock
	recorder record.EventRecorder
}

// NewController wires the controller.
func NewController(kube client.Client, clk clock.Clock, recorder record.EventRecorder) *Controller {
	return &Controller{kube: kube, clock: clk, recorder: recorder}
}

func (c *Controller) Name() string { return "nodeclaim.expiration" }

func (c *Controller) Register(_ context.Context, mgr manager.Manager) error {
	return builder.ControllerManagedBy(mgr).Named(c.Name()).
		For(&v1.NodeClaim{}).
		Complete(reconcile.AsReconciler(mgr.GetClient(), c))
}

func (c *Controller) Reconcile(ctx context.Context, nc *v1.NodeClaim) (reconcile.Result, error) {
	after := nc.Spec.ExpireAfter.Duration
	if nc.DeletionTimestamp != nil || after == nil {
		return reconcile.Result{}, nil
	}
	expiresAt := nc.CreationTimestamp.Add(*after)
	if wait := expiresAt.Sub(c.clock.Now()); wait > 0 {
		return reconcile.Result{RequeueAfter: wait}, nil
	}
	patch := client.MergeFrom(nc.DeepCopy())
	if nc.SetDisruptionReason("Expired", c.clock.Now()) {
		if err := c.kube.Status().Patch(ctx, nc, patch); err != nil {
			return reconcile.Result{}, client.IgnoreNotFound(err)
		}
	}
	if err := c.kube.Delete(ctx, nc); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	c.recorder.Eventf(nc, corev1.EventTypeNormal, "Expired", "NodeClaim lived past expireAfter (%s)", after.String())
	metrics.Disruption{Reason: "expired", NodePool: nc.Labels[v1.LabelNodePool], CapacityType: nc.Labels[v1.LabelCapacityType],
		TerminationMode: metrics.TerminationMode(nc.Spec.TerminationGracePeriod)}.Record(drainable.Count(ctx, c.kube, nc.Status.NodeName))
	log.FromContext(ctx).Info("expired nodeclaim", "age", c.clock.Since(nc.CreationTimestamp.Time).Round(time.Second).String())
	return reconcile.Result{}, nil
}
