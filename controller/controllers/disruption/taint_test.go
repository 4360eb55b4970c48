package disruption

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/dovetail-sh/dovetail/controller/apis/scheme"
	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/controller/state"
)

// A node someone else changed between the read and the taint (kubelet status, a
// label) is tainted on a fresh read; the conflict does not fail the disruption.
func TestDisruptedTaintRetriesAConflict(t *testing.T) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}, Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: "other", Effect: corev1.TaintEffectNoSchedule}}}}
	conflicts := 2
	kube := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(node).WithInterceptorFuncs(interceptor.Funcs{
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			if conflicts > 0 {
				conflicts--
				return apierrors.NewConflict(schema.GroupResource{Resource: "nodes"}, obj.GetName(), nil)
			}
			return c.Patch(ctx, obj, patch, opts...)
		}}).Build()
	c := &Controller{kube: kube}
	if err := c.setDisruptedTaint(context.Background(), node, true); err != nil {
		t.Fatalf("tainting after two conflicts: %v", err)
	}
	got := &corev1.Node{}
	if err := kube.Get(context.Background(), client.ObjectKeyFromObject(node), got); err != nil {
		t.Fatal(err)
	}
	if !state.HasTaint(got, v1.DisruptedNoScheduleTaint) || !state.HasTaint(got, corev1.Taint{Key: "other", Effect: corev1.TaintEffectNoSchedule}) {
		t.Errorf("taints %v: want the disrupted taint beside the other", got.Spec.Taints)
	}
}
