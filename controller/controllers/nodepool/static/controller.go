// Package static keeps a static NodePool (spec.replicas, gate StaticCapacity) at
// its count: it launches claims from the pool's template while there are fewer,
// within limits.nodes, and deletes the ones cheapest to lose while there are more.
// Pending pods never launch into such a pool, and consolidation leaves it be.
package static

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/controller/cloudprovider"
	"github.com/dovetail-sh/dovetail/controller/consolidation"
	"github.com/dovetail-sh/dovetail/controller/scheduling"
	"github.com/dovetail-sh/dovetail/controller/state"
	"github.com/dovetail-sh/dovetail/controller/staticpool"
)

// Launcher creates a claim of a pool from a plan: the provisioner's Launch.
type Launcher interface {
	Launch(ctx context.Context, np *v1.NodePool, plan *scheduling.NodeClaimPlan, reason string) (*v1.NodeClaim, error)
}

// Controller keeps every static pool at its replicas.
type Controller struct {
	kube client.Client
	// live reads the pool's claims past the informer cache. Each reconcile
	// launches or deletes claims from the count it reads, and the next one (a
	// NodePool status write is enough to trigger it) may run before the cache
	// shows those changes: counting from the cache launched a third node under
	// limits.nodes 2.
	live   client.Reader
	cloud  cloudprovider.CloudProvider
	launch Launcher
	clock  clock.Clock
}

// NewController builds the controller.
func NewController(kube client.Client, live client.Reader, cloud cloudprovider.CloudProvider, launch Launcher, clk clock.Clock) *Controller {
	return &Controller{kube: kube, live: live, cloud: cloud, launch: launch, clock: clk}
}

func (c *Controller) Name() string { return "nodepool.static" }

// Register reconciles a static pool on its changes and its claims'.
func (c *Controller) Register(_ context.Context, mgr manager.Manager) error {
	return builder.ControllerManagedBy(mgr).Named(c.Name()).
		For(&v1.NodePool{}).
		Watches(&v1.NodeClaim{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			if pool := o.GetLabels()[v1.LabelNodePool]; pool != "" {
				return []reconcile.Request{{NamespacedName: client.ObjectKey{Name: pool}}}
			}
			return nil
		})).
		Complete(reconcile.AsReconciler(c.kube, c))
}

// Requeue is how often a static pool is checked without a change to it or its
// claims.
const Requeue = time.Minute

// Reconcile launches or deletes claims until the pool has spec.replicas.
func (c *Controller) Reconcile(ctx context.Context, np *v1.NodePool) (reconcile.Result, error) {
	if np.Spec.Replicas == nil || np.DeletionTimestamp != nil || !meta.IsStatusConditionTrue(np.Status.Conditions, v1.ConditionTypeReady) {
		return reconcile.Result{}, nil
	}
	var claims v1.NodeClaimList
	if err := c.live.List(ctx, &claims, client.MatchingLabels{v1.LabelNodePool: np.Name}); err != nil {
		return reconcile.Result{}, fmt.Errorf("listing the claims of nodepool %s, %w", np.Name, err)
	}
	// A node being disrupted (a drifted one, replaced one for one) counts apart
	// (staticpool.Delta).
	var active []*v1.NodeClaim
	disrupting := 0
	for i := range claims.Items {
		nc := &claims.Items[i]
		if nc.DeletionTimestamp != nil {
			continue
		}
		taken, err := c.disrupting(ctx, nc)
		if err != nil {
			return reconcile.Result{}, err
		}
		if taken {
			disrupting++
			continue
		}
		active = append(active, nc)
	}
	switch launch, remove := staticpool.Delta(int(*np.Spec.Replicas), len(active), disrupting); {
	case launch > 0:
		return c.scaleUp(ctx, np, launch, claims.Items)
	case remove > 0:
		return c.scaleDown(ctx, np, active, remove)
	}
	return reconcile.Result{RequeueAfter: Requeue}, nil
}

// scaleUp launches up to want claims, as many as limits.nodes and the
// dovetail.sh/usd-per-hour limit leave room for (claims still being deleted count:
// their instances may still run).
func (c *Controller) scaleUp(ctx context.Context, np *v1.NodePool, want int, claims []v1.NodeClaim) (reconcile.Result, error) {
	// At its node limit the pool waits without asking the cloud for its types.
	if room, why := staticpool.NodeRoom(np, claims); room <= 0 {
		log.FromContext(ctx).Info("static nodepool cannot grow: "+why, "nodepool", np.Name, "replicas", *np.Spec.Replicas)
		return reconcile.Result{RequeueAfter: 30 * time.Second}, nil
	}
	types, err := c.cloud.GetInstanceTypes(ctx, np)
	if err != nil {
		return reconcile.Result{}, fmt.Errorf("reading the instance types of nodepool %s, %w", np.Name, err)
	}
	n, plan, why, err := staticpool.ScaleUp(np, want, claims, types)
	if err != nil {
		return reconcile.Result{}, err
	}
	if n <= 0 {
		log.FromContext(ctx).Info("static nodepool cannot grow: "+why, "nodepool", np.Name, "replicas", *np.Spec.Replicas)
		return reconcile.Result{RequeueAfter: 30 * time.Second}, nil
	}
	log.FromContext(ctx).Info("launching nodeclaims to reach the static nodepool's replicas", "nodepool", np.Name, "replicas", *np.Spec.Replicas, "launching", n)
	var errs []error
	for range n {
		// Each claim is its own: Launch names it and fills its status.
		p := *plan
		if _, err := c.launch.Launch(ctx, np, &p, "provisioned"); err != nil {
			errs = append(errs, err)
		}
	}
	return reconcile.Result{RequeueAfter: Requeue}, errors.Join(errs...)
}

// scaleDown deletes n claims, those cheapest to lose first: not launched yet, then
// empty (DaemonSet pods only), then by their pods' disruption cost, nodes with a
// do-not-disrupt pod last (it orders them, as in Karpenter, but does not hold
// them: the pool's size is what its owner asked for). Their drain is termination's,
// which honours PodDisruptionBudgets.
func (c *Controller) scaleDown(ctx context.Context, np *v1.NodePool, active []*v1.NodeClaim, n int) (reconcile.Result, error) {
	type ranked struct {
		claim      *v1.NodeClaim
		tier       int
		disruption float64
	}
	var order []ranked
	for _, nc := range active {
		r := ranked{claim: nc}
		switch {
		case nc.Status.ProviderID == "":
			r.tier = 0
		default:
			pods, err := c.podsOn(ctx, nc.Status.NodeName)
			if err != nil {
				return reconcile.Result{}, err
			}
			movable := consolidation.Reschedulable(pods)
			now := c.clock.Now()
			protected := slices.ContainsFunc(pods, func(p *corev1.Pod) bool { ok, _ := v1.PodDoNotDisrupt(p, now); return ok })
			switch {
			case protected:
				r.tier = 3
			case len(movable) == 0:
				r.tier = 1
			default:
				r.tier = 2
			}
			for _, p := range movable {
				r.disruption += max(consolidation.EvictionCost(p), 0)
			}
		}
		order = append(order, r)
	}
	slices.SortStableFunc(order, func(a, b ranked) int {
		switch {
		case a.tier != b.tier:
			return a.tier - b.tier
		case a.disruption < b.disruption:
			return -1
		case a.disruption > b.disruption:
			return 1
		}
		return 0
	})
	log.FromContext(ctx).Info("deleting nodeclaims to reach the static nodepool's replicas", "nodepool", np.Name, "replicas", *np.Spec.Replicas, "deleting", n)
	var errs []error
	for _, r := range order[:n] {
		if err := c.kube.Delete(ctx, r.claim); client.IgnoreNotFound(err) != nil {
			errs = append(errs, fmt.Errorf("deleting nodeclaim %s, %w", r.claim.Name, err))
		}
	}
	return reconcile.Result{RequeueAfter: Requeue}, errors.Join(errs...)
}

// disrupting reports whether a disruption has taken the claim: recorded on it, or
// its node tainted for it (the taint comes first).
func (c *Controller) disrupting(ctx context.Context, nc *v1.NodeClaim) (bool, error) {
	if state.Recorded(nc) != nil || nc.Status.NodeName == "" {
		return state.Disrupting(nc, nil), nil
	}
	node := &corev1.Node{}
	if err := c.kube.Get(ctx, client.ObjectKey{Name: nc.Status.NodeName}, node); err != nil {
		return false, client.IgnoreNotFound(err)
	}
	return state.Disrupting(nc, node), nil
}

func (c *Controller) podsOn(ctx context.Context, node string) ([]*corev1.Pod, error) {
	if node == "" {
		return nil, nil
	}
	var pods corev1.PodList
	if err := c.kube.List(ctx, &pods, client.MatchingFields{"spec.nodeName": node}); err != nil {
		return nil, fmt.Errorf("listing the pods of node %s, %w", node, err)
	}
	out := make([]*corev1.Pod, len(pods.Items))
	for i := range pods.Items {
		out[i] = &pods.Items[i]
	}
	return out, nil
}
