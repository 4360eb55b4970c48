// Package nodeoverlay evaluates the NodeOverlays (gate NodeOverlay): which apply,
// which are invalid or conflict, written to each overlay's status; the accepted
// ones go to the store the cloud provider applies them from.
package nodeoverlay

import (
	"context"
	"errors"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/controller/apis/v1alpha1"
	"github.com/dovetail-sh/dovetail/controller/cloudprovider"
	"github.com/dovetail-sh/dovetail/controller/overlay"
)

// Condition types of a NodeOverlay, as Karpenter's.
const (
	ConditionTypeValidationSucceeded = "ValidationSucceeded"
	ConditionTypeReady               = "Ready"
)

// Period is how often the overlays are evaluated again without a change to them or
// to a pool: the types a pool offers change with the cloud (new types, offerings),
// and a conflict may appear or go with them.
const Period = time.Minute

// Controller evaluates every overlay on every change, as one decision.
type Controller struct {
	kube  client.Client
	cloud cloudprovider.CloudProvider
	store *overlay.Store
	clock clock.Clock
}

// NewController builds the controller; cloud must not apply overlays itself, so
// they never compound.
func NewController(kube client.Client, cloud cloudprovider.CloudProvider, store *overlay.Store, clk clock.Clock) *Controller {
	return &Controller{kube: kube, cloud: cloud, store: store, clock: clk}
}

func (c *Controller) Name() string { return "nodeoverlay" }

// Register watches overlays and pools; any change evaluates them all.
func (c *Controller) Register(_ context.Context, mgr manager.Manager) error {
	all := handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []reconcile.Request {
		return []reconcile.Request{{NamespacedName: client.ObjectKey{Name: "all"}}}
	})
	return builder.ControllerManagedBy(mgr).Named(c.Name()).
		Watches(&v1alpha1.NodeOverlay{}, all, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&v1.NodePool{}, all, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Complete(c)
}

// Reconcile evaluates every overlay against every pool's types.
func (c *Controller) Reconcile(ctx context.Context, _ reconcile.Request) (reconcile.Result, error) {
	var overlays v1alpha1.NodeOverlayList
	if err := c.kube.List(ctx, &overlays); err != nil {
		return reconcile.Result{}, fmt.Errorf("listing nodeoverlays, %w", err)
	}
	var pools v1.NodePoolList
	if err := c.kube.List(ctx, &pools); err != nil {
		return reconcile.Result{}, fmt.Errorf("listing nodepools, %w", err)
	}
	var evaluated []overlay.Pool
	var errs []error
	for i := range pools.Items {
		np := &pools.Items[i]
		types, err := c.cloud.GetInstanceTypes(ctx, np)
		if err != nil {
			// A pool whose types cannot be read cannot conflict now; the others
			// must not wait for it.
			errs = append(errs, fmt.Errorf("reading the instance types of nodepool %s, %w", np.Name, err))
			continue
		}
		evaluated = append(evaluated, overlay.Pool{NodePool: np, Types: types})
	}
	items := make([]*v1alpha1.NodeOverlay, len(overlays.Items))
	for i := range overlays.Items {
		items[i] = &overlays.Items[i]
	}
	accepted, verdicts := overlay.Evaluate(items, evaluated)
	for _, o := range items {
		if err := c.writeStatus(ctx, o, verdicts[o.Name]); err != nil {
			errs = append(errs, err)
		}
	}
	c.store.Set(accepted)
	log.FromContext(ctx).V(1).Info("evaluated nodeoverlays", "overlays", len(items), "applied", len(accepted), "nodepools", len(evaluated))
	if err := errors.Join(errs...); err != nil {
		return reconcile.Result{}, err
	}
	return reconcile.Result{RequeueAfter: Period}, nil
}

func (c *Controller) writeStatus(ctx context.Context, o *v1alpha1.NodeOverlay, v overlay.Verdict) error {
	stored := o.DeepCopy()
	now := metav1.NewTime(c.clock.Now())
	status, reason, message := metav1.ConditionTrue, "Applied", ""
	if !v.Applied {
		status, reason, message = metav1.ConditionFalse, v.Reason, v.Message
	}
	for _, t := range []string{ConditionTypeValidationSucceeded, ConditionTypeReady} {
		meta.SetStatusCondition(&o.Status.Conditions, metav1.Condition{Type: t, Status: status, Reason: reason, Message: message, ObservedGeneration: o.Generation, LastTransitionTime: now})
	}
	if equality.Semantic.DeepEqual(stored.Status, o.Status) {
		return nil
	}
	if err := c.kube.Status().Patch(ctx, o, client.MergeFrom(stored)); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("writing the status of nodeoverlay %s, %w", o.Name, err)
	}
	return nil
}
