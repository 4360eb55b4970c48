package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/controller/apis/v1alpha1"
	"github.com/dovetail-sh/dovetail/tests/localstack"
)

// TestNodeOverlayPricesAndCapacity runs the controller with --feature-gates
// NodeOverlay=true, as the installed ServiceAccount. A pool may launch m5.large or
// m7i.large (m5 is cheaper); an overlay prices m5.large at $5/h, so the pod's
// node is an m7i.large, and its NodeClaim says a price overlay applied. A capacity
// overlay's resource is on the claim. An overlay of the same weight over the same
// type is refused with Conflict, the others are Ready.
func TestNodeOverlayPricesAndCapacity(t *testing.T) {
	c := startClusterWithGates(t, "NodeOverlay=true")
	ctx := context.Background()
	weight := int32(10)
	price, dearer := "5", "-50%"
	instanceType := func(values ...string) []v1alpha1.NodeSelectorRequirement {
		return []v1alpha1.NodeSelectorRequirement{{Key: v1.LabelInstanceType, Operator: corev1.NodeSelectorOpIn, Values: values}}
	}
	for _, o := range []*v1alpha1.NodeOverlay{
		{ObjectMeta: metav1.ObjectMeta{Name: "m5-dear"}, Spec: v1alpha1.NodeOverlaySpec{Weight: &weight, Requirements: instanceType("m5.large"), Price: &price}},
		{ObjectMeta: metav1.ObjectMeta{Name: "a-clash"}, Spec: v1alpha1.NodeOverlaySpec{Weight: &weight, Requirements: instanceType("m5.large", "m7i.large"), PriceAdjustment: &dearer}},
		{ObjectMeta: metav1.ObjectMeta{Name: "fuse"}, Spec: v1alpha1.NodeOverlaySpec{Capacity: corev1.ResourceList{"smarter-devices/fuse": resource.MustParse("4")}}},
	} {
		must(t, c.Create(ctx, o))
	}
	must(t, c.Create(ctx, localstack.NodePool("default",
		localstack.Requirement(v1.LabelInstanceType, v1.OpIn, "m5.large", "m7i.large"),
		localstack.Requirement(v1.LabelCapacityType, v1.OpIn, v1.CapacityTypeOnDemand))))
	eventually(t, 30*time.Second, "the overlays evaluated", func() error {
		for name, ready := range map[string]bool{"m5-dear": true, "fuse": true, "a-clash": false} {
			o := &v1alpha1.NodeOverlay{}
			if err := c.Get(ctx, client.ObjectKey{Name: name}, o); err != nil {
				return err
			}
			cond := meta.FindStatusCondition(o.Status.Conditions, "Ready")
			if cond == nil || (cond.Status == metav1.ConditionTrue) != ready || (!ready && cond.Reason != "Conflict") {
				return fmt.Errorf("%s: Ready %+v, want ready %v", name, cond, ready)
			}
		}
		return nil
	})
	must(t, c.Create(ctx, localstack.Deployment("web", 1, "1", "1Gi")))
	pods := allRunning(t, c, "web", 1, 90*time.Second)
	node := &corev1.Node{}
	must(t, c.Get(ctx, client.ObjectKey{Name: pods[0].Spec.NodeName}, node))
	if got := node.Labels[v1.LabelInstanceType]; got != "m7i.large" {
		t.Errorf("the pod runs on a %s; at the overlaid prices m7i.large is the cheaper", got)
	}
	var claims v1.NodeClaimList
	must(t, c.List(ctx, &claims))
	if len(claims.Items) != 1 {
		t.Fatalf("%d nodeclaims, want 1", len(claims.Items))
	}
	nc := claims.Items[0]
	if nc.Annotations[v1alpha1.PriceOverlayAppliedAnnotationKey] != "true" || nc.Annotations[v1alpha1.CapacityOverlayAppliedAnnotationKey] != "true" {
		t.Errorf("nodeclaim annotations %v; want both overlay marks", nc.Annotations)
	}
	if q := nc.Status.Capacity["smarter-devices/fuse"]; q.Value() != 4 {
		t.Errorf("nodeclaim capacity %v; want smarter-devices/fuse 4 from the overlay", nc.Status.Capacity)
	}
}
