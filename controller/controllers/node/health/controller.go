// Package health repairs nodes (gate NodeRepair): a node whose condition says it
// is unhealthy for longer than the repair policy tolerates has its NodeClaim
// deleted at once, its pods deleted rather than evicted, as Karpenter's node
// repair does, unless too many of its pool's nodes are unhealthy at once (then
// the cause is likelier the pool's than the nodes').
package health

import (
	"context"
	"fmt"
	"math"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/controller/consolidation"
	"github.com/dovetail-sh/dovetail/controller/controllers/drainable"
	"github.com/dovetail-sh/dovetail/controller/metrics"
	"k8s.io/client-go/tools/record"
)

// RepairPolicy is a node condition that means the node is unhealthy, and how long
// it may hold before the node is replaced.
type RepairPolicy struct {
	ConditionType      corev1.NodeConditionType
	ConditionStatus    corev1.ConditionStatus
	TolerationDuration time.Duration
}

// AWSRepairPolicies are the AWS provider's: the kubelet's Ready, and the EKS node
// monitoring agent's conditions.
var AWSRepairPolicies = []RepairPolicy{
	{corev1.NodeReady, corev1.ConditionFalse, 30 * time.Minute},
	{corev1.NodeReady, corev1.ConditionUnknown, 30 * time.Minute},
	{"AcceleratedHardwareReady", corev1.ConditionFalse, 10 * time.Minute},
	{"StorageReady", corev1.ConditionFalse, 30 * time.Minute},
	{"NetworkingReady", corev1.ConditionFalse, 30 * time.Minute},
	{"KernelReady", corev1.ConditionFalse, 30 * time.Minute},
	{"ContainerRuntimeReady", corev1.ConditionFalse, 30 * time.Minute},
}

// MaxUnhealthyShare is the share of a pool's nodes (rounded up) that may be
// unhealthy for repair to go on; beyond, repairs in the pool wait.
const MaxUnhealthyShare = 0.2

// BlockedRequeue is how soon a blocked repair is tried again.
const BlockedRequeue = 5 * time.Minute

// Controller repairs the nodes of NodeClaims.
type Controller struct {
	kube     client.Client
	clock    clock.Clock
	recorder record.EventRecorder
	policies []RepairPolicy
	// budgets says how many more of a pool's nodes its budgets with reason
	// Unhealthy let go now (ok false when no budget names that reason).
	budgets func(ctx context.Context, np *v1.NodePool) (allowed int, ok bool, err error)
}

// NewController builds the controller for the policies.
func NewController(kube client.Client, clk clock.Clock, recorder record.EventRecorder, policies []RepairPolicy) *Controller {
	c := &Controller{kube: kube, clock: clk, recorder: recorder, policies: policies}
	c.budgets = c.unhealthyBudget
	return c
}

func (c *Controller) Name() string { return "node.health" }

// Register watches nodes; a status update that only renews heartbeats is not a
// change.
func (c *Controller) Register(_ context.Context, mgr manager.Manager) error {
	return builder.ControllerManagedBy(mgr).Named(c.Name()).
		For(&corev1.Node{}, builder.WithPredicates(predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
			return conditionsChanged(e.ObjectOld.(*corev1.Node), e.ObjectNew.(*corev1.Node))
		}})).
		Complete(reconcile.AsReconciler(c.kube, c))
}

func conditionsChanged(old, cur *corev1.Node) bool {
	if len(old.Status.Conditions) != len(cur.Status.Conditions) {
		return true
	}
	for _, o := range old.Status.Conditions {
		n := condition(cur, o.Type)
		if n == nil || n.Status != o.Status || !n.LastTransitionTime.Equal(&o.LastTransitionTime) {
			return true
		}
	}
	return false
}

func condition(n *corev1.Node, t corev1.NodeConditionType) *corev1.NodeCondition {
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == t {
			return &n.Status.Conditions[i]
		}
	}
	return nil
}

// unhealthy is the policy the node breaks whose toleration ends first, and when.
func (c *Controller) unhealthy(n *corev1.Node) (*corev1.NodeCondition, time.Time, bool) {
	var found *corev1.NodeCondition
	var deadline time.Time
	for _, p := range c.policies {
		cond := condition(n, p.ConditionType)
		if cond == nil || cond.Status != p.ConditionStatus {
			continue
		}
		if d := cond.LastTransitionTime.Add(p.TolerationDuration); found == nil || d.Before(deadline) {
			found, deadline = cond, d
		}
	}
	return found, deadline, found != nil
}

func (c *Controller) breaks(n *corev1.Node) bool {
	_, _, ok := c.unhealthy(n)
	return ok
}

// Reconcile replaces the node's claim once its unhealthy condition has held past
// the policy's toleration.
func (c *Controller) Reconcile(ctx context.Context, node *corev1.Node) (reconcile.Result, error) {
	cond, deadline, ok := c.unhealthy(node)
	if !ok || node.DeletionTimestamp != nil {
		return reconcile.Result{}, nil
	}
	nc, err := c.claimOf(ctx, node)
	if err != nil || nc == nil {
		return reconcile.Result{}, err
	}
	if nc.DeletionTimestamp != nil {
		return reconcile.Result{}, nil
	}
	now := c.clock.Now()
	if now.Before(deadline) {
		return reconcile.Result{RequeueAfter: deadline.Sub(now)}, nil
	}
	pool := nc.Labels[v1.LabelNodePool]
	if why, err := c.blocked(ctx, pool); err != nil || why != "" {
		if why != "" {
			c.recorder.Eventf(node, corev1.EventTypeWarning, "NodeRepairBlocked", "%s", why)
			c.recorder.Eventf(nc, corev1.EventTypeWarning, "NodeRepairBlocked", "%s", why)
			log.FromContext(ctx).Info("node repair blocked", "node", node.Name, "condition", cond.Type, "why", why)
		}
		return reconcile.Result{RequeueAfter: BlockedRequeue}, err
	}
	// The claim's deletion is forceful: pods are deleted, not evicted, and the
	// instance goes at once, whatever the terminationGracePeriod says.
	patch := client.MergeFrom(nc.DeepCopy())
	if nc.Annotations == nil {
		nc.Annotations = map[string]string{}
	}
	if t, err := time.Parse(time.RFC3339, nc.Annotations[v1.NodeClaimTerminationTimestampAnnotationKey]); err != nil || !t.Before(now) {
		nc.Annotations[v1.NodeClaimTerminationTimestampAnnotationKey] = now.UTC().Format(time.RFC3339)
		if err := c.kube.Patch(ctx, nc, patch); err != nil {
			return reconcile.Result{}, client.IgnoreNotFound(err)
		}
	}
	if err := c.kube.Delete(ctx, nc); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	msg := fmt.Sprintf("Node %s has been %s=%s since %s, past the %s its repair policy tolerates; replacing it", node.Name, cond.Type, cond.Status,
		cond.LastTransitionTime.UTC().Format(time.RFC3339), deadline.Sub(cond.LastTransitionTime.Time))
	c.recorder.Event(node, corev1.EventTypeWarning, "NodeRepair", msg)
	c.recorder.Event(nc, corev1.EventTypeWarning, "NodeRepair", msg)
	log.FromContext(ctx).Info("deleting unhealthy node", "node", node.Name, "nodeclaim", nc.Name, "condition", cond.Type, "status", cond.Status)
	capacityType := node.Labels[v1.LabelCapacityType]
	// The mode is the claim's, as Karpenter's standalone repair labels it, though
	// the deletion above is forceful whatever the claim says.
	mode := metrics.TerminationMode(nc.Spec.TerminationGracePeriod)
	metrics.NodeClaimsUnhealthyDisrupted.WithLabelValues(metrics.SnakeCase(string(cond.Type)), pool, capacityType, nc.Status.ImageID, mode).Inc()
	metrics.Disruption{Reason: "unhealthy", NodePool: pool, CapacityType: capacityType, TerminationMode: mode}.Record(drainable.Count(ctx, c.kube, node.Name))
	return reconcile.Result{}, nil
}

// blocked says why the pool's repairs wait, or "": more than MaxUnhealthyShare of
// its nodes (rounded up) break a policy now, or a budget for reason Unhealthy
// allows no more. A claim of no pool answers to the whole cluster's share.
func (c *Controller) blocked(ctx context.Context, pool string) (string, error) {
	var nodes corev1.NodeList
	opts := []client.ListOption{}
	if pool != "" {
		opts = append(opts, client.MatchingLabels{v1.LabelNodePool: pool})
	}
	if err := c.kube.List(ctx, &nodes, opts...); err != nil {
		return "", fmt.Errorf("listing nodes, %w", err)
	}
	bad := 0
	for i := range nodes.Items {
		if c.breaks(&nodes.Items[i]) {
			bad++
		}
	}
	where := "the cluster"
	if pool != "" {
		where = "nodepool " + pool
	}
	if allowed := int(math.Ceil(MaxUnhealthyShare * float64(len(nodes.Items)))); bad > allowed {
		return fmt.Sprintf("more than %d%% of the nodes of %s are unhealthy (%d of %d); repairs there wait, as the cause is likelier not the nodes'", int(MaxUnhealthyShare*100), where, bad, len(nodes.Items)), nil
	}
	if pool == "" {
		return "", nil
	}
	np := &v1.NodePool{}
	if err := c.kube.Get(ctx, client.ObjectKey{Name: pool}, np); err != nil {
		return "", client.IgnoreNotFound(err)
	}
	allowed, ok, err := c.budgets(ctx, np)
	if err != nil || !ok || allowed > 0 {
		return "", err
	}
	return fmt.Sprintf("the disruption budgets of nodepool %s for reason Unhealthy allow no more nodes now", pool), nil
}

// unhealthyBudget is how many more of the pool's nodes its budgets naming reason
// Unhealthy allow disrupted now; a budget without reasons does not hold repairs
// (as in Karpenter, where repair answers to no budget): only one that names
// Unhealthy does.
func (c *Controller) unhealthyBudget(ctx context.Context, np *v1.NodePool) (int, bool, error) {
	named := false
	for _, b := range np.Spec.Disruption.Budgets {
		for _, r := range b.Reasons {
			named = named || r == v1.DisruptionReasonUnhealthy
		}
	}
	if !named {
		return 0, false, nil
	}
	var claims v1.NodeClaimList
	if err := c.kube.List(ctx, &claims, client.MatchingLabels{v1.LabelNodePool: np.Name}); err != nil {
		return 0, false, fmt.Errorf("listing the claims of nodepool %s, %w", np.Name, err)
	}
	disrupting := 0
	for _, nc := range claims.Items {
		if nc.DeletionTimestamp != nil {
			disrupting++
		}
	}
	allowed, err := consolidation.Allowed(np, v1.DisruptionReasonUnhealthy, len(claims.Items), disrupting, c.clock.Now())
	return allowed, true, err
}

// claimOf is the NodeClaim of the node, or nil for a node no claim has.
func (c *Controller) claimOf(ctx context.Context, node *corev1.Node) (*v1.NodeClaim, error) {
	var claims v1.NodeClaimList
	if err := c.kube.List(ctx, &claims); err != nil {
		return nil, fmt.Errorf("listing nodeclaims, %w", err)
	}
	for i := range claims.Items {
		nc := &claims.Items[i]
		if nc.Status.NodeName == node.Name || (node.Spec.ProviderID != "" && nc.Status.ProviderID == node.Spec.ProviderID) {
			return nc, nil
		}
	}
	return nil, nil
}

// snakeCase is Karpenter's condition label: AcceleratedHardwareReady becomes
// accelerated_hardware_ready.
