// Package counter keeps a NodePool's status current: the resources and number of the
// nodes it owns, which `kubectl get nodepools` shows and limits are checked against,
// and whether the pool is ready to launch (valid, with a node class that exists).
package counter

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	awsv1 "github.com/dovetail-sh/dovetail/controller/apis/aws/v1"
	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/controller/cloudprovider"
	"github.com/dovetail-sh/dovetail/controller/commitment"
	"github.com/dovetail-sh/dovetail/controller/metrics"
	"github.com/dovetail-sh/dovetail/controller/scheduling"
)

// setConditions: ValidationSucceeded when the requirements parse, NodeClassReady when
// the referenced node class exists and is not reported unready, Ready when both hold.
func (c *Controller) setConditions(ctx context.Context, np *v1.NodePool) {
	now := metav1.NewTime(c.clock.Now())
	set := func(t string, ok bool, reason, message string) {
		status := metav1.ConditionTrue
		if !ok {
			status = metav1.ConditionFalse
		}
		meta.SetStatusCondition(&np.Status.Conditions, metav1.Condition{Type: t, Status: status, Reason: reason, Message: message, ObservedGeneration: np.Generation, LastTransitionTime: now})
	}
	valid, validMsg := true, ""
	if _, err := scheduling.FromNodePoolRequirements(np.Spec.Template.Spec.Requirements); err != nil {
		valid, validMsg = false, err.Error()
	}
	if np.Spec.Replicas != nil && !c.StaticCapacity {
		valid, validMsg = false, "spec.replicas makes a static NodePool, which needs --feature-gates StaticCapacity=true (the chart's settings.featureGates.staticCapacity); without it nothing keeps the pool at its count"
	}
	set(v1.ConditionTypeValidationSucceeded, valid, reasonFor(valid, "Valid", "Invalid"), validMsg)
	classReady, classMsg := c.nodeClassReady(ctx, np)
	set(v1.ConditionTypeNodeClassReady, classReady, reasonFor(classReady, "NodeClassReady", "NodeClassNotReady"), classMsg)
	ready := valid && classReady
	msg := validMsg
	if msg == "" {
		msg = classMsg
	}
	set(v1.ConditionTypeReady, ready, reasonFor(ready, "Ready", "NotReady"), msg)
}

func (c *Controller) nodeClassReady(ctx context.Context, np *v1.NodePool) (bool, string) {
	ref := np.Spec.Template.Spec.NodeClassRef
	if ref == nil {
		return false, "spec.template.spec.nodeClassRef is not set"
	}
	if ref.Group != awsv1.Group || ref.Kind != "EC2NodeClass" {
		return false, fmt.Sprintf("nodeClassRef %s/%s is not supported; use group %s, kind EC2NodeClass", ref.Group, ref.Kind, awsv1.Group)
	}
	nc := &awsv1.EC2NodeClass{}
	if err := c.kube.Get(ctx, client.ObjectKey{Name: ref.Name}, nc); err != nil {
		if apierrors.IsNotFound(err) {
			return false, fmt.Sprintf("EC2NodeClass %q not found; create it or fix nodeClassRef.name", ref.Name)
		}
		return false, err.Error()
	}
	if cond := meta.FindStatusCondition(nc.Status.Conditions, awsv1.ConditionTypeReady); cond != nil && cond.Status == metav1.ConditionFalse {
		return false, fmt.Sprintf("EC2NodeClass %q is not ready: %s", ref.Name, cond.Message)
	}
	return true, ""
}

func reasonFor(ok bool, yes, no string) string {
	if ok {
		return yes
	}
	return no
}

// Controller is the NodePool counter.
type Controller struct {
	kube  client.Client
	clock clock.Clock
	// cloud prices the pool's nodes; nil leaves the cost gauge out.
	cloud cloudprovider.CloudProvider
	// Commitments price the pool's spend against its dovetail.sh/usd-per-hour
	// limit (nil: list prices).
	Commitments *commitment.Store
	// StaticCapacity is the feature gate: without it a static pool (spec.replicas)
	// is not valid, rather than silently never scaled.
	StaticCapacity bool
}

// NewController wires the controller.
func NewController(kube client.Client, clk clock.Clock, cloud cloudprovider.CloudProvider) *Controller {
	return &Controller{kube: kube, clock: clk, cloud: cloud}
}

func (c *Controller) Name() string { return "nodepool.counter" }

func (c *Controller) Register(_ context.Context, mgr manager.Manager) error {
	return builder.ControllerManagedBy(mgr).Named(c.Name()).
		For(&v1.NodePool{}).
		Watches(&awsv1.EC2NodeClass{}, handler.EnqueueRequestsFromMapFunc(c.poolsForClass)).
		Watches(&v1.NodeClaim{}, handler.EnqueueRequestsFromMapFunc(poolOf)).
		// A Node counts when it has no claim; its status heartbeats change nothing here.
		Watches(&corev1.Node{}, handler.EnqueueRequestsFromMapFunc(poolOf), builder.WithPredicates(predicate.LabelChangedPredicate{})).
		Complete(reconcile.AsReconciler(mgr.GetClient(), c))
}

func poolOf(_ context.Context, o client.Object) []reconcile.Request {
	if pool := o.GetLabels()[v1.LabelNodePool]; pool != "" {
		return []reconcile.Request{{NamespacedName: client.ObjectKey{Name: pool}}}
	}
	return nil
}

func (c *Controller) Reconcile(ctx context.Context, np *v1.NodePool) (reconcile.Result, error) {
	// Read only, and run on every change of any of the pool's claims: the cache's
	// objects are read in place rather than copied each time.
	var claims v1.NodeClaimList
	if err := c.kube.List(ctx, &claims, client.MatchingLabels{v1.LabelNodePool: np.Name}, client.UnsafeDisableDeepCopy); err != nil {
		return reconcile.Result{}, fmt.Errorf("listing nodeclaims of nodepool, %w", err)
	}
	var nodes corev1.NodeList
	if err := c.kube.List(ctx, &nodes, client.MatchingLabels{v1.LabelNodePool: np.Name}, client.UnsafeDisableDeepCopy); err != nil {
		return reconcile.Result{}, fmt.Errorf("listing nodes of nodepool, %w", err)
	}
	resources := Usage(claims.Items, nodes.Items)[np.Name]
	if resources == nil {
		resources = Resources(scheduling.Resources{}, 0)
	}
	count := resources[v1.ResourceNodes]
	nodeCount := count.Value()
	for name, q := range resources {
		metrics.NodePoolUsage.WithLabelValues(np.Name, string(name)).Set(q.AsApproximateFloat64())
	}
	for name, q := range np.Spec.Limits {
		metrics.NodePoolLimit.WithLabelValues(np.Name, string(name)).Set(q.AsApproximateFloat64())
	}
	c.recordCost(ctx, np, claims.Items)
	c.recordMix(ctx, np, claims.Items)
	patch := client.MergeFrom(np.DeepCopy())
	before := np.Status.DeepCopy()
	np.Status.Resources = resources
	np.Status.Nodes = &nodeCount
	c.setConditions(ctx, np)
	if equality.Semantic.DeepEqual(before, &np.Status) {
		return reconcile.Result{}, nil
	}
	return reconcile.Result{}, client.IgnoreNotFound(c.kube.Status().Patch(ctx, np, patch))
}

// Usage is what each pool's NodeClaims (and Nodes no claim stands for) hold
// against its limits, by pool name, with the node count as the "nodes" resource. Every claim of the pool counts,
// including claims that are deleting or whose nodes are cordoned or disrupted:
// their instances run, and are paid for, until they are gone, as Karpenter counts
// them. A claim not launched yet counts what it asked for (its instance will have
// at least that), so that a launch in flight does not read as free room.
func Usage(claims []v1.NodeClaim, nodes []corev1.Node) map[string]corev1.ResourceList {
	out := map[string]corev1.ResourceList{}
	for pool, u := range scheduling.UsageOfClaimsAndNodes(claims, nodes) {
		out[pool] = Resources(u.Resources, u.Nodes)
	}
	return out
}

// Resources is a pool's usage as its status shows it: resources plus "nodes".
func Resources(total scheduling.Resources, nodes int64) corev1.ResourceList {
	rl := total.ToResourceList()
	rl[v1.ResourceNodes] = *resource.NewQuantity(nodes, resource.DecimalSI)
	return rl
}

func (c *Controller) poolsForClass(ctx context.Context, o client.Object) []reconcile.Request {
	var pools v1.NodePoolList
	if err := c.kube.List(ctx, &pools); err != nil {
		return nil
	}
	var out []reconcile.Request
	for _, np := range pools.Items {
		if ref := np.Spec.Template.Spec.NodeClassRef; ref != nil && ref.Name == o.GetName() {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKey{Name: np.Name}})
		}
	}
	return out
}
