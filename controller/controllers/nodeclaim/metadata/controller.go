// Package metadata applies a NodePool template's labels and annotations to the
// pool's NodeClaims and Nodes in place when they are all that changed, instead of
// drifting every node (kubernetes-sigs/karpenter#1123). --drift-on-metadata keeps
// Karpenter's behaviour, and this controller is not started.
package metadata

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	dovetailv1alpha1 "github.com/dovetail-sh/dovetail/controller/apis/dovetail/v1alpha1"
	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
)

// Controller brings claims whose pool's template metadata alone changed up to date.
type Controller struct {
	kube     client.Client
	recorder record.EventRecorder
}

// NewController wires the controller.
func NewController(kube client.Client, recorder record.EventRecorder) *Controller {
	return &Controller{kube: kube, recorder: recorder}
}

func (c *Controller) Name() string { return "nodeclaim.metadata" }

// Register reconciles a claim on its changes and its pool's.
func (c *Controller) Register(_ context.Context, mgr manager.Manager) error {
	return builder.ControllerManagedBy(mgr).Named(c.Name()).
		For(&v1.NodeClaim{}).
		Watches(&v1.NodePool{}, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
			var claims v1.NodeClaimList
			if err := c.kube.List(ctx, &claims, client.MatchingLabels{v1.LabelNodePool: o.GetName()}, client.UnsafeDisableDeepCopy); err != nil {
				return nil
			}
			out := make([]reconcile.Request, len(claims.Items))
			for i := range claims.Items {
				out[i] = reconcile.Request{NamespacedName: client.ObjectKey{Name: claims.Items[i].Name}}
			}
			return out
			// Only a template change concerns the claims; the pool's status,
			// written on every claim change, would list them all each time.
		}), builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Complete(reconcile.AsReconciler(mgr.GetClient(), c))
}

// Reconcile applies the template's labels and annotations to the claim and
// stamps its pool hash; the lifecycle controller's node sync, the one writer of
// the claim's labels on its node, carries them to the node (and takes the
// dropped keys off). Until the stamp the claim is not drifted either: disruption
// sees that only metadata changed.
func (c *Controller) Reconcile(ctx context.Context, nc *v1.NodeClaim) (reconcile.Result, error) {
	if nc.DeletionTimestamp != nil || !meta.IsStatusConditionTrue(nc.Status.Conditions, v1.ConditionTypeInitialized) {
		return reconcile.Result{}, nil
	}
	if nc.Annotations[v1.NodePoolHashVersionAnnotationKey] != v1.NodePoolHashVersion {
		// nodeclaim.hash re-stamps it first.
		return reconcile.Result{}, nil
	}
	np := &v1.NodePool{}
	if err := c.kube.Get(ctx, client.ObjectKey{Name: nc.Labels[v1.LabelNodePool]}, np); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if !np.OnlyMetadataChanged(nc) {
		return reconcile.Result{}, nil
	}
	labels, annotations := np.Spec.Template.Labels, np.Spec.Template.Annotations
	dropLabels := dropped(np, nc, dovetailv1alpha1.TemplateLabelsAnnotationKey, dovetailv1alpha1.DroppedLabelsAnnotationKey, labels, true)
	dropAnnotations := dropped(np, nc, dovetailv1alpha1.TemplateAnnotationsAnnotationKey, dovetailv1alpha1.DroppedAnnotationsAnnotationKey, annotations, false)
	patch := client.MergeFrom(nc.DeepCopy())
	nc.Labels = apply(nc.Labels, labels, dropLabels)
	nc.Annotations = apply(nc.Annotations, annotations, dropAnnotations)
	nc.Annotations[dovetailv1alpha1.TemplateLabelsAnnotationKey] = dovetailv1alpha1.JoinKeys(labels)
	nc.Annotations[dovetailv1alpha1.TemplateAnnotationsAnnotationKey] = dovetailv1alpha1.JoinKeys(annotations)
	nc.Annotations[dovetailv1alpha1.DroppedLabelsAnnotationKey] = strings.Join(dropLabels, ",")
	nc.Annotations[dovetailv1alpha1.DroppedAnnotationsAnnotationKey] = strings.Join(dropAnnotations, ",")
	nc.Annotations[v1.NodePoolHashAnnotationKey] = np.Hash()
	if err := c.kube.Patch(ctx, nc, patch); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(fmt.Errorf("updating the labels and annotations of nodeclaim %s, %w", nc.Name, err))
	}
	log.FromContext(ctx).Info("applied the nodepool template's labels and annotations in place", "nodeclaim", nc.Name, "node", nc.Status.NodeName,
		"removedLabels", dropLabels, "removedAnnotations", dropAnnotations)
	c.recorder.Eventf(nc, corev1.EventTypeNormal, "MetadataUpdatedInPlace", "Applied NodePool %s's template labels and annotations to the NodeClaim and its Node in place; nothing else in the template changed", np.Name)
	return reconcile.Result{}, nil
}

// dropped lists the keys the template gave the claim before (and those an
// earlier update dropped, which the node's sync has not taken off yet) that the
// template no longer has. A label the instance decides, or one a requirement of
// the pool sets, is the node's own and is never dropped.
func dropped(np *v1.NodePool, nc *v1.NodeClaim, recordedKey, droppedKey string, now map[string]string, labels bool) []string {
	var out []string
	for _, k := range append(dovetailv1alpha1.SplitKeys(nc.Annotations[recordedKey]), dovetailv1alpha1.SplitKeys(nc.Annotations[droppedKey])...) {
		if _, ok := now[k]; ok || slices.Contains(out, k) {
			continue
		}
		if labels && (v1.InstanceDecides(k) || setByRequirement(np, k)) {
			continue
		}
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// setByRequirement reports whether the pool's requirements give every node one
// value of the key (the claim's own requirements hold the template's labels
// too, so they cannot tell).
func setByRequirement(np *v1.NodePool, key string) bool {
	for _, r := range np.Spec.Template.Spec.Requirements {
		if r.Key == key && r.Operator == v1.OpIn && len(r.Values) == 1 {
			return true
		}
	}
	return false
}

func apply(m, set map[string]string, drop []string) map[string]string {
	if m == nil {
		m = map[string]string{}
	}
	for _, k := range drop {
		delete(m, k)
	}
	for k, v := range set {
		m[k] = v
	}
	return m
}
