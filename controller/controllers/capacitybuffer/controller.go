// Package capacitybuffer resolves CapacityBuffers (gate CapacityBuffer) into the
// virtual pods the provisioner keeps room for: from a PodTemplate or a workload's
// template, as many as the buffer's replicas, percentage and limits say, with the
// status Karpenter reports.
package capacitybuffer

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/dovetail-sh/dovetail/controller/apis/autoscaling/v1beta1"
	"github.com/dovetail-sh/dovetail/controller/buffer"
)

// Requeue is how often a buffer is resolved again: its workload's replicas (which
// percentage follows) are not watched, and its Provisioning condition follows the
// provisioner's plans.
const Requeue = 10 * time.Second

// Trigger asks the provisioner for a solve.
type Trigger interface{ Trigger() }

// Controller keeps the cache of virtual pods and the buffers' status.
type Controller struct {
	kube        client.Client
	cache       *buffer.Cache
	provisioner Trigger
	clock       clock.Clock
}

// NewController builds the controller.
func NewController(kube client.Client, cache *buffer.Cache, provisioner Trigger, clk clock.Clock) *Controller {
	return &Controller{kube: kube, cache: cache, provisioner: provisioner, clock: clk}
}

func (c *Controller) Name() string { return "capacitybuffer" }

// Register watches buffers and the PodTemplates they name.
func (c *Controller) Register(_ context.Context, mgr manager.Manager) error {
	return builder.ControllerManagedBy(mgr).Named(c.Name()).
		For(&v1beta1.CapacityBuffer{}).
		Watches(&corev1.PodTemplate{}, handler.EnqueueRequestsFromMapFunc(c.buffersOf)).
		Complete(c)
}

func (c *Controller) buffersOf(ctx context.Context, o client.Object) []reconcile.Request {
	var list v1beta1.CapacityBufferList
	if err := c.kube.List(ctx, &list, client.InNamespace(o.GetNamespace())); err != nil {
		return nil
	}
	var out []reconcile.Request
	for _, cb := range list.Items {
		if cb.Spec.PodTemplateRef != nil && cb.Spec.PodTemplateRef.Name == o.GetName() {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&cb)})
		}
	}
	return out
}

// Reconcile resolves the buffer, updates the virtual pods and writes its status.
func (c *Controller) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	key := buffer.Key(req.Namespace, req.Name)
	cb := &v1beta1.CapacityBuffer{}
	if err := c.kube.Get(ctx, req.NamespacedName, cb); err != nil {
		if apierrors.IsNotFound(err) {
			c.cache.Set(key, nil)
			c.provisioner.Trigger()
			return reconcile.Result{}, nil
		}
		return reconcile.Result{}, err
	}
	stored := cb.DeepCopy()
	template, resolveErr := c.resolve(ctx, cb)
	if template != nil && cb.DeletionTimestamp == nil {
		c.cache.Set(key, buffer.VirtualPods(cb, *template, *cb.Status.Replicas))
	} else {
		c.cache.Set(key, nil)
	}
	cb.Status.ProvisioningStrategy = cb.Spec.ProvisioningStrategy
	ready := meta.IsStatusConditionTrue(cb.Status.Conditions, buffer.ConditionReadyForProvisioning)
	desired := int32(0)
	if cb.Status.Replicas != nil {
		desired = *cb.Status.Replicas
	}
	placed, planned := c.cache.Placed(key)
	if cond := buffer.ProvisioningCondition(ready, desired, placed, planned); cond != nil {
		c.setCondition(cb, *cond)
	}
	if !equality.Semantic.DeepEqual(stored.Status, cb.Status) {
		if err := c.kube.Status().Patch(ctx, cb, client.MergeFrom(stored)); err != nil {
			if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
				return reconcile.Result{RequeueAfter: time.Second}, nil
			}
			return reconcile.Result{}, fmt.Errorf("writing the status of capacitybuffer %s, %w", key, err)
		}
	}
	if resolveErr != nil {
		return reconcile.Result{}, resolveErr
	}
	c.provisioner.Trigger()
	return reconcile.Result{RequeueAfter: Requeue}, nil
}

func (c *Controller) setCondition(cb *v1beta1.CapacityBuffer, cond metav1.Condition) {
	cond.ObservedGeneration = cb.Generation
	cond.LastTransitionTime = metav1.NewTime(c.clock.Now())
	meta.SetStatusCondition(&cb.Status.Conditions, cond)
}

// resolve finds the buffer's template and replicas and records them, with
// ReadyForProvisioning, in its status. A referent that does not exist is a
// status, not an error; anything else is returned to be tried again.
func (c *Controller) resolve(ctx context.Context, cb *v1beta1.CapacityBuffer) (*corev1.PodTemplateSpec, error) {
	fail := func(reason, msg string) {
		c.setCondition(cb, metav1.Condition{Type: buffer.ConditionReadyForProvisioning, Status: metav1.ConditionFalse, Reason: reason, Message: msg})
	}
	var template corev1.PodTemplateSpec
	var scalableReplicas *int32
	switch {
	case cb.Spec.PodTemplateRef != nil:
		pt := &corev1.PodTemplate{}
		if err := c.kube.Get(ctx, client.ObjectKey{Namespace: cb.Namespace, Name: cb.Spec.PodTemplateRef.Name}, pt); err != nil {
			if apierrors.IsNotFound(err) {
				fail(buffer.ReasonPodTemplateNotFound, err.Error())
				return nil, nil
			}
			fail(buffer.ReasonResolutionFailed, err.Error())
			return nil, err
		}
		template = pt.Template
		cb.Status.PodTemplateRef = &v1beta1.LocalObjectRef{Name: pt.Name}
		generation := pt.Generation
		cb.Status.PodTemplateGeneration = &generation
	case cb.Spec.ScalableRef != nil:
		t, replicas, err := c.scalable(ctx, cb.Namespace, cb.Spec.ScalableRef)
		if err != nil {
			if apierrors.IsNotFound(err) {
				fail(buffer.ReasonScalableRefNotFound, err.Error())
				return nil, nil
			}
			fail(buffer.ReasonResolutionFailed, err.Error())
			return nil, err
		}
		template, scalableReplicas = t, replicas
		cb.Status.PodTemplateRef, cb.Status.PodTemplateGeneration = nil, nil
	default:
		fail(buffer.ReasonResolutionFailed, "Neither podTemplateRef nor scalableRef is set")
		return nil, nil
	}
	n := buffer.Replicas(cb.Spec, scalableReplicas, template)
	cb.Status.Replicas = &n
	c.setCondition(cb, metav1.Condition{Type: buffer.ConditionReadyForProvisioning, Status: metav1.ConditionTrue, Reason: buffer.ReasonResolved, Message: "Pod template resolved successfully"})
	return &template, nil
}

// scalable reads a Deployment, StatefulSet or ReplicaSet: its pod template and its
// desired replicas (1 when unset, as the API defaults it).
func (c *Controller) scalable(ctx context.Context, namespace string, ref *v1beta1.ScalableRef) (corev1.PodTemplateSpec, *int32, error) {
	if ref.APIGroup != "" && ref.APIGroup != "apps" {
		return corev1.PodTemplateSpec{}, nil, fmt.Errorf("unsupported scalableRef API group %q; a buffer follows a Deployment, StatefulSet or ReplicaSet of apps", ref.APIGroup)
	}
	key := client.ObjectKey{Namespace: namespace, Name: ref.Name}
	one := int32(1)
	replicasOr1 := func(r *int32) *int32 {
		if r == nil {
			return &one
		}
		return r
	}
	switch ref.Kind {
	case "Deployment":
		d := &appsv1.Deployment{}
		err := c.kube.Get(ctx, key, d)
		return d.Spec.Template, replicasOr1(d.Spec.Replicas), err
	case "StatefulSet":
		s := &appsv1.StatefulSet{}
		err := c.kube.Get(ctx, key, s)
		return s.Spec.Template, replicasOr1(s.Spec.Replicas), err
	case "ReplicaSet":
		r := &appsv1.ReplicaSet{}
		err := c.kube.Get(ctx, key, r)
		return r.Spec.Template, replicasOr1(r.Spec.Replicas), err
	}
	return corev1.PodTemplateSpec{}, nil, fmt.Errorf("unsupported kind %q; a buffer follows a Deployment, StatefulSet or ReplicaSet", ref.Kind)
}
