package nodeoverlay

import (
	"context"
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	fakeclient "sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/dovetail-sh/dovetail/controller/apis/scheme"
	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/controller/apis/v1alpha1"
	"github.com/dovetail-sh/dovetail/controller/cloudprovider/fake"
	"github.com/dovetail-sh/dovetail/controller/cloudprovider/overlaid"
	"github.com/dovetail-sh/dovetail/controller/overlay"
	"github.com/dovetail-sh/dovetail/controller/scheduling"
)

func priced(name string, price float64) *scheduling.InstanceType {
	it := fake.InstanceType(name, "2", "8Gi", "test-zone-a")
	it.Offerings[0].Price = price
	it.Refresh()
	return it
}

func overlayOf(name string, weight int32, spec v1alpha1.NodeOverlaySpec) *v1alpha1.NodeOverlay {
	spec.Weight = &weight
	return &v1alpha1.NodeOverlay{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec}
}

func instanceTypeIs(names ...string) []v1alpha1.NodeSelectorRequirement {
	return []v1alpha1.NodeSelectorRequirement{{Key: v1.LabelInstanceType, Operator: corev1.NodeSelectorOpIn, Values: names}}
}

func str(s string) *string { return &s }

// TestNodeOverlayReconcile evaluates overlays on a fake clock and checks what the
// decorated provider then does: an overlay that makes the cheaper type dear turns
// the launch to the other type; of two overlays of one weight over the same type
// the one sorting first by name conflicts and is applied nowhere; overlaid
// capacity goes on the launched claim, and changing it drifts the claim.
func TestNodeOverlayReconcile(t *testing.T) {
	ctx := context.Background()
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC))
	np := &v1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "default"}}
	objs := []client.Object{np,
		overlayOf("dear-cheap", 10, v1alpha1.NodeOverlaySpec{Requirements: instanceTypeIs("cheap.large"), PriceAdjustment: str("+1")}),
		overlayOf("fuse", 1, v1alpha1.NodeOverlaySpec{Capacity: corev1.ResourceList{"smarter-devices/fuse": resource.MustParse("2")}}),
		overlayOf("clash-b", 5, v1alpha1.NodeOverlaySpec{Requirements: instanceTypeIs("other.large"), Price: str("6")}),
		overlayOf("clash-a", 5, v1alpha1.NodeOverlaySpec{Price: str("5")}),
	}
	kube := fakeclient.NewClientBuilder().WithScheme(scheme.New()).WithObjects(objs...).WithStatusSubresource(&v1alpha1.NodeOverlay{}).Build()
	cloud := fake.New(clk, priced("cheap.large", 0.1), priced("dear.large", 0.2), priced("other.large", 0.3))
	store := &overlay.Store{}
	decorated := overlaid.Decorate(cloud, store)
	if _, err := decorated.GetInstanceTypes(ctx, np); !errors.As(err, new(*overlaid.UnevaluatedError)) {
		t.Fatalf("types read before the overlays were evaluated: %v", err)
	}
	c := NewController(kube, cloud, store, clk)
	if _, err := c.Reconcile(ctx, reconcile.Request{}); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"dear-cheap": "Applied", "fuse": "Applied", "clash-b": "Applied", "clash-a": overlay.ReasonConflict} {
		o := &v1alpha1.NodeOverlay{}
		if err := kube.Get(ctx, client.ObjectKey{Name: name}, o); err != nil {
			t.Fatal(err)
		}
		ready := meta.FindStatusCondition(o.Status.Conditions, ConditionTypeReady)
		valid := meta.FindStatusCondition(o.Status.Conditions, ConditionTypeValidationSucceeded)
		if ready == nil || valid == nil || ready.Reason != want || valid.Reason != want || (ready.Status == metav1.ConditionTrue) != (want == "Applied") {
			t.Errorf("%s: Ready %+v, ValidationSucceeded %+v; want reason %s", name, ready, valid, want)
		}
	}
	types, err := decorated.GetInstanceTypes(ctx, np)
	if err != nil {
		t.Fatal(err)
	}
	prices := map[string]float64{}
	for _, it := range types {
		prices[it.Name] = it.Offerings[0].Price
	}
	if prices["cheap.large"] != 1.1 || prices["dear.large"] != 0.2 || prices["other.large"] != 6 {
		t.Fatalf("prices %v; want cheap.large 1.1 (+1), dear.large 0.2 (clash-a applied nowhere), other.large 6 (clash-b)", prices)
	}

	claim := &v1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "default-abc", Labels: map[string]string{v1.LabelNodePool: "default"},
		Annotations: map[string]string{v1alpha1.PriceOverlayAppliedAnnotationKey: "true", v1alpha1.CapacityOverlayAppliedAnnotationKey: "true"}},
		Spec: v1.NodeClaimSpec{Requirements: []v1.NodeSelectorRequirementWithMinValues{{Key: v1.LabelInstanceType,
			RequirementBody: v1.RequirementBody{Operator: v1.OpIn, Values: []string{"cheap.large", "dear.large"}}}}}}
	launched, err := decorated.Create(ctx, claim)
	if err != nil {
		t.Fatal(err)
	}
	if got := launched.Labels[v1.LabelInstanceType]; got != "dear.large" {
		t.Errorf("launched %s; at overlaid prices dear.large ($0.20) is cheaper than cheap.large ($1.10)", got)
	}
	if len(launched.Spec.Requirements) != 1 || len(launched.Spec.Requirements[0].Values) != 2 {
		t.Errorf("the launched claim's requirements were narrowed: %v", launched.Spec.Requirements)
	}
	if q := launched.Status.Capacity["smarter-devices/fuse"]; q.Value() != 2 {
		t.Errorf("launched capacity %v; want smarter-devices/fuse 2 from the overlay", launched.Status.Capacity)
	}
	if reason, err := decorated.IsDrifted(ctx, launched); err != nil || reason != "" {
		t.Fatalf("a claim just launched is drifted: %q %v", reason, err)
	}

	// Raising the overlaid capacity drifts the claim; a price change would not.
	o := &v1alpha1.NodeOverlay{}
	if err := kube.Get(ctx, client.ObjectKey{Name: "fuse"}, o); err != nil {
		t.Fatal(err)
	}
	o.Spec.Capacity["smarter-devices/fuse"] = resource.MustParse("3")
	if err := kube.Update(ctx, o); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Reconcile(ctx, reconcile.Request{}); err != nil {
		t.Fatal(err)
	}
	if _, err := decorated.GetInstanceTypes(ctx, np); err != nil {
		t.Fatal(err)
	}
	if reason, err := decorated.IsDrifted(ctx, launched); err != nil || reason != overlaid.DriftCapacityOverlay {
		t.Errorf("after the overlay's capacity changed: drift %q (%v), want %s", reason, err, overlaid.DriftCapacityOverlay)
	}
}
