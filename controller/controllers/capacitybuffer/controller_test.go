package capacitybuffer

import (
	"context"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	fakeclient "sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/dovetail-sh/dovetail/controller/apis/autoscaling/v1beta1"
	"github.com/dovetail-sh/dovetail/controller/apis/scheme"
	"github.com/dovetail-sh/dovetail/controller/buffer"
	"github.com/dovetail-sh/dovetail/controller/scheduling"
)

type triggers struct{ n int }

func (t *triggers) Trigger() { t.n++ }

func podTemplate() corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}}}}}
}

// TestCapacityBufferReconcile resolves buffers on a fake clock: a PodTemplate's,
// a Deployment's by percentage, one whose template is missing; the cache holds
// the resolved buffers' virtual pods, the provisioner is asked to solve, the
// status is Karpenter's, and the Provisioning condition follows the last plan.
func TestCapacityBufferReconcile(t *testing.T) {
	ctx := context.Background()
	ten, three, twenty := int32(10), int32(3), int32(20)
	objs := []client.Object{
		&corev1.PodTemplate{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "shop"}, Template: podTemplate()},
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "api", Namespace: "shop"}, Spec: appsv1.DeploymentSpec{Replicas: &ten, Template: podTemplate()}},
		&v1beta1.CapacityBuffer{ObjectMeta: metav1.ObjectMeta{Name: "fixed", Namespace: "shop", UID: "fixed-uid"},
			Spec: v1beta1.CapacityBufferSpec{PodTemplateRef: &v1beta1.LocalObjectRef{Name: "web"}, Replicas: &three}},
		&v1beta1.CapacityBuffer{ObjectMeta: metav1.ObjectMeta{Name: "share", Namespace: "shop", UID: "share-uid"},
			Spec: v1beta1.CapacityBufferSpec{ScalableRef: &v1beta1.ScalableRef{APIGroup: "apps", Kind: "Deployment", Name: "api"}, Percentage: &twenty}},
		&v1beta1.CapacityBuffer{ObjectMeta: metav1.ObjectMeta{Name: "orphan", Namespace: "shop"},
			Spec: v1beta1.CapacityBufferSpec{PodTemplateRef: &v1beta1.LocalObjectRef{Name: "gone"}, Replicas: &three}},
	}
	kube := fakeclient.NewClientBuilder().WithScheme(scheme.New()).WithObjects(objs...).WithStatusSubresource(&v1beta1.CapacityBuffer{}).Build()
	cache := buffer.NewCache()
	trig := &triggers{}
	c := NewController(kube, cache, trig, clocktesting.NewFakeClock(time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)))
	reconcileAll := func() {
		for _, name := range []string{"fixed", "share", "orphan"} {
			if _, err := c.Reconcile(ctx, reconcile.Request{NamespacedName: client.ObjectKey{Namespace: "shop", Name: name}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	reconcileAll()
	get := func(name string) *v1beta1.CapacityBuffer {
		cb := &v1beta1.CapacityBuffer{}
		if err := kube.Get(ctx, client.ObjectKey{Namespace: "shop", Name: name}, cb); err != nil {
			t.Fatal(err)
		}
		return cb
	}
	for name, want := range map[string]struct {
		reason   string
		replicas int32
	}{"fixed": {buffer.ReasonResolved, 3}, "share": {buffer.ReasonResolved, 2}, "orphan": {buffer.ReasonPodTemplateNotFound, 0}} {
		cb := get(name)
		cond := meta.FindStatusCondition(cb.Status.Conditions, buffer.ConditionReadyForProvisioning)
		if cond == nil || cond.Reason != want.reason || (want.replicas > 0 && (cb.Status.Replicas == nil || *cb.Status.Replicas != want.replicas)) {
			t.Errorf("%s: ReadyForProvisioning %+v, replicas %v; want %s and %d", name, cond, cb.Status.Replicas, want.reason, want.replicas)
		}
	}
	if ref := get("fixed").Status.PodTemplateRef; ref == nil || ref.Name != "web" {
		t.Errorf("fixed: status.podTemplateRef %v", ref)
	}
	if n := len(cache.Pods()); n != 5 {
		t.Errorf("%d virtual pods cached; want 3 + 2", n)
	}
	if trig.n < 2 {
		t.Errorf("the provisioner was asked %d times", trig.n)
	}
	if cond := meta.FindStatusCondition(get("orphan").Status.Conditions, buffer.ConditionProvisioning); cond == nil || cond.Reason != buffer.ReasonNotReadyForProvisioning {
		t.Errorf("orphan: Provisioning %+v", cond)
	}

	// A plan that put all of fixed's pods on existing nodes.
	var placed []*corev1.Pod
	for _, p := range cache.Pods() {
		if p.Annotations[buffer.NameAnnotation] == "fixed" {
			placed = append(placed, p)
		}
	}
	cache.Record(&scheduling.Results{Existing: []*scheduling.ExistingPlacement{{Pods: placed}}})
	reconcileAll()
	if cond := meta.FindStatusCondition(get("fixed").Status.Conditions, buffer.ConditionProvisioning); cond == nil || cond.Reason != buffer.ReasonFitsExistingCapacity || cond.Status != metav1.ConditionTrue {
		t.Errorf("fixed: Provisioning %+v; want FitsExistingCapacity", cond)
	}

	if err := kube.Delete(ctx, get("fixed")); err != nil {
		t.Fatal(err)
	}
	reconcileAll()
	if n := len(cache.Pods()); n != 2 {
		t.Errorf("%d virtual pods after the buffer of 3 was deleted; want 2", n)
	}
}
