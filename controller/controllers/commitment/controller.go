// Package commitment reads the Commitments (dovetail.sh/v1alpha1): the valid
// ones go to the store every solve prices with, and each one's status says
// whether it is used to plan and how much of it the cluster's nodes use.
package commitment

import (
	"context"
	"errors"
	"fmt"
	"strconv"
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

	"github.com/dovetail-sh/dovetail/controller/apis/dovetail/v1alpha1"
	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/controller/cloudprovider"
	"github.com/dovetail-sh/dovetail/controller/commitment"
	"github.com/dovetail-sh/dovetail/controller/scheduling"
)

// ConditionTypeReady is True when the engine plans with the commitment.
const ConditionTypeReady = "Ready"

// Period is how often usage is written without a change to a commitment: nodes
// come and go between.
const Period = time.Minute

// Controller evaluates every commitment on any change, as one ledger.
type Controller struct {
	kube  client.Client
	cloud cloudprovider.CloudProvider
	store *commitment.Store
	clock clock.Clock
}

// NewController builds the controller.
func NewController(kube client.Client, cloud cloudprovider.CloudProvider, store *commitment.Store, clk clock.Clock) *Controller {
	return &Controller{kube: kube, cloud: cloud, store: store, clock: clk}
}

func (c *Controller) Name() string { return "commitment" }

// Register watches commitments and claims; any change evaluates them all.
func (c *Controller) Register(_ context.Context, mgr manager.Manager) error {
	all := handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []reconcile.Request {
		return []reconcile.Request{{NamespacedName: client.ObjectKey{Name: "all"}}}
	})
	return builder.ControllerManagedBy(mgr).Named(c.Name()).
		Watches(&v1alpha1.Commitment{}, all, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&v1.NodeClaim{}, all, builder.WithPredicates(predicate.LabelChangedPredicate{})).
		Complete(c)
}

// Reconcile parses every commitment, stores the valid ones and writes each
// one's status with what the cluster's launched claims use of it.
func (c *Controller) Reconcile(ctx context.Context, _ reconcile.Request) (reconcile.Result, error) {
	var list v1alpha1.CommitmentList
	if err := c.kube.List(ctx, &list); err != nil {
		return reconcile.Result{}, fmt.Errorf("listing commitments, %w", err)
	}
	var valid []commitment.Terms
	parsed := map[string]commitment.Terms{}
	refused := map[string]error{}
	for i := range list.Items {
		t, err := commitment.Parse(&list.Items[i])
		if err != nil {
			refused[list.Items[i].Name] = err
			continue
		}
		valid, parsed[t.Name] = append(valid, t), t
	}
	c.store.Set(valid)

	ledger := commitment.NewLedger(valid...)
	uses, err := c.charge(ctx, ledger)
	var errs []error
	if err != nil {
		errs = append(errs, err)
	}
	for i := range list.Items {
		cm := &list.Items[i]
		t, ok := parsed[cm.Name]
		if err := c.writeStatus(ctx, cm, t, ok, refused[cm.Name], ledger, uses); err != nil {
			errs = append(errs, err)
		}
	}
	log.FromContext(ctx).V(1).Info("evaluated commitments", "commitments", len(list.Items), "valid", len(valid))
	if err := errors.Join(errs...); err != nil {
		return reconcile.Result{}, err
	}
	return reconcile.Result{RequeueAfter: Period}, nil
}

// charge charges the launched claims to the ledger, as AWS bills them.
func (c *Controller) charge(ctx context.Context, ledger *commitment.Ledger) ([]commitment.Use, error) {
	if ledger.Empty() {
		return nil, nil
	}
	_, _, uses, err := ChargeClaims(ctx, c.kube, c.cloud, ledger)
	return uses, err
}

// ChargeClaims charges every launched claim to the ledger (nil: list prices),
// as AWS bills them, and returns the claims with each one's price (NaN when its
// offering is unknown) and use. An error reading a pool's types leaves its claims
// unpriced and is returned with the rest.
func ChargeClaims(ctx context.Context, kube client.Client, cloud cloudprovider.CloudProvider, ledger *commitment.Ledger) ([]*v1.NodeClaim, []float64, []commitment.Use, error) {
	var claims v1.NodeClaimList
	if err := kube.List(ctx, &claims); err != nil {
		return nil, nil, nil, fmt.Errorf("listing nodeclaims, %w", err)
	}
	var pools v1.NodePoolList
	if err := kube.List(ctx, &pools); err != nil {
		return nil, nil, nil, fmt.Errorf("listing nodepools, %w", err)
	}
	catalogs := map[string][]*scheduling.InstanceType{}
	var errs []error
	for i := range pools.Items {
		types, err := cloud.GetInstanceTypes(ctx, &pools.Items[i])
		if err != nil {
			errs = append(errs, fmt.Errorf("reading the instance types of nodepool %s, %w", pools.Items[i].Name, err))
			continue
		}
		catalogs[pools.Items[i].Name] = types
	}
	var launched []*v1.NodeClaim
	var nodes []*scheduling.ExistingNode
	for i := range claims.Items {
		nc := &claims.Items[i]
		if nc.Status.ProviderID == "" || nc.DeletionTimestamp != nil {
			continue
		}
		launched = append(launched, nc)
		nodes = append(nodes, &scheduling.ExistingNode{Name: nc.Name, Labels: nc.Labels, NodePool: nc.Labels[v1.LabelNodePool]})
	}
	prices, uses := scheduling.ChargeNodes(nodes, catalogs, ledger)
	return launched, prices, uses, errors.Join(errs...)
}

func (c *Controller) writeStatus(ctx context.Context, cm *v1alpha1.Commitment, t commitment.Terms, ok bool, refusal error, ledger *commitment.Ledger, uses []commitment.Use) error {
	stored := cm.DeepCopy()
	cond := metav1.Condition{Type: ConditionTypeReady, Status: metav1.ConditionTrue, Reason: "Planned", Message: "the engine prices on-demand capacity with this commitment", ObservedGeneration: cm.Generation, LastTransitionTime: metav1.NewTime(c.clock.Now())}
	cm.Status.ReservedInstances, cm.Status.SavingsPlans, cm.Status.CoveredNodes = nil, nil, 0
	if !ok {
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, "InvalidSpec", refusal.Error()
	} else {
		usage := ledger.Usage(t)
		for i, r := range t.Reservations {
			cm.Status.ReservedInstances = append(cm.Status.ReservedInstances, v1alpha1.ReservedInstanceStatus{InstanceType: r.InstanceType, Zone: r.Zone, Count: r.Count, Used: int32(usage.Reserved[i])})
		}
		for i, p := range cm.Spec.SavingsPlans {
			cm.Status.SavingsPlans = append(cm.Status.SavingsPlans, v1alpha1.SavingsPlanStatus{Type: p.Type, Family: p.Family, CommitmentPerHour: p.CommitmentPerHour,
				UsedPerHour: strconv.FormatFloat(usage.PlansPerHour[i], 'f', 4, 64)})
		}
		for _, u := range uses {
			if u.Covered() && u.Source == cm.Name {
				cm.Status.CoveredNodes++
			}
		}
	}
	meta.SetStatusCondition(&cm.Status.Conditions, cond)
	if equality.Semantic.DeepEqual(stored.Status, cm.Status) {
		return nil
	}
	if err := c.kube.Status().Patch(ctx, cm, client.MergeFrom(stored)); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("writing the status of commitment %s, %w", cm.Name, err)
	}
	return nil
}
