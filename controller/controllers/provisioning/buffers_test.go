package provisioning

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/dovetail-sh/dovetail/controller/apis/autoscaling/v1beta1"
	"github.com/dovetail-sh/dovetail/controller/apis/scheme"
	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/controller/buffer"
	fakecloud "github.com/dovetail-sh/dovetail/controller/cloudprovider/fake"
	"github.com/dovetail-sh/dovetail/controller/scheduling"
	"github.com/dovetail-sh/dovetail/controller/state"
)

// A controller that starts with pods pending and a CapacityBuffer in the cluster
// plans them together, as `dovetail simulate` does: no solve runs before the buffer
// is resolved, since one would launch for the pods alone and for the buffer later.
func TestFirstSolveWaitsForTheBuffers(t *testing.T) {
	ctx := context.Background()
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))
	requests := corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("3"), corev1.ResourceMemory: resource.MustParse("1Gi")}}
	spec := corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: requests}}}
	two := int32(2)
	cb := &v1beta1.CapacityBuffer{ObjectMeta: metav1.ObjectMeta{Name: "spare", Namespace: "default", UID: "spare-uid"},
		Spec: v1beta1.CapacityBufferSpec{PodTemplateRef: &v1beta1.LocalObjectRef{Name: "spare"}, Replicas: &two}}
	kube := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(
		&v1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "default", UID: "pool-uid"}},
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "web-uid"}, Spec: spec},
		cb).Build()
	cloud := fakecloud.New(clk, fakecloud.InstanceType("m.xlarge", "4", "16Gi", "zone-a"))
	p := NewProvisioner(kube, state.NewCluster(kube, clk), cloud, clk, record.NewFakeRecorder(100), NewBatcher(clk, time.Second, 10*time.Second), scheduling.DefaultNodeCosts())
	cache := buffer.NewCache()
	p.WithBuffers(cache)
	claims := func() int {
		var list v1.NodeClaimList
		if err := kube.List(ctx, &list); err != nil {
			t.Fatal(err)
		}
		return len(list.Items)
	}

	more, err := p.Schedule(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n := claims(); n != 0 || !more {
		t.Fatalf("with the buffer not resolved: %d nodeclaims, look again %t; want none, and to look again", n, more)
	}
	cache.Set(buffer.Key(cb.Namespace, cb.Name), buffer.VirtualPods(cb, corev1.PodTemplateSpec{Spec: spec}, two))
	if _, err := p.Schedule(ctx); err != nil {
		t.Fatal(err)
	}
	if n := claims(); n != 3 {
		t.Errorf("the pod and the buffer's 2, 3 cpu each on 4-cpu types: %d nodeclaims; want 3", n)
	}

	// A buffer deleted (resolved to nothing) holds nothing up: a new pod is
	// planned, into the room the buffer kept.
	cache.Set(buffer.Key(cb.Namespace, cb.Name), nil)
	if err := kube.Delete(ctx, cb); err != nil {
		t.Fatal(err)
	}
	if err := kube.Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "api", Namespace: "default", UID: "api-uid"}, Spec: spec}); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Schedule(ctx); err != nil {
		t.Fatal(err)
	}
	if _, ok := p.nominations["api-uid"]; !ok || claims() != 3 {
		t.Errorf("a new pod once the buffer is gone: nominated %t, %d nodeclaims; want it nominated to the buffer's room", ok, claims())
	}
}
