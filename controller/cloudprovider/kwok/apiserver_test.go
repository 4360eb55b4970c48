package kwok_test

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/dovetail-sh/dovetail/controller/apis/scheme"
	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/controller/catalog"
	"github.com/dovetail-sh/dovetail/controller/cloudprovider/kwok"
	"github.com/dovetail-sh/dovetail/controller/scheduling"
	"github.com/dovetail-sh/dovetail/tests/testenv"
)

// A real kube-apiserver keeps a Node's status on create, as for a kubelet's
// registration: the provider's Node has its instance's resources from the first
// moment anything (kwok) can read it, with no status write after.
func TestNodeIsCreatedWithItsStatus(t *testing.T) {
	if testing.Short() {
		t.Skip("starts kube-apiserver")
	}
	api := testenv.StartAPIServer(t)
	statusWrites := 0
	watching, err := client.NewWithWatch(api.Config, client.Options{Scheme: scheme.New()})
	if err != nil {
		t.Fatal(err)
	}
	kube := interceptor.NewClient(watching, interceptor.Funcs{
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
			statusWrites++
			return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
		},
	})
	cat, err := catalog.EmbeddedAWS()
	if err != nil {
		t.Fatal(err)
	}
	p := kwok.New(kube, cat, scheduling.DefaultAllocatableSettings(), 0)
	nc := &v1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "default-a", Labels: map[string]string{v1.LabelNodePool: "default"}},
		Spec: v1.NodeClaimSpec{Requirements: []v1.NodeSelectorRequirementWithMinValues{
			{Key: v1.LabelInstanceType, RequirementBody: v1.RequirementBody{Operator: v1.OpIn, Values: []string{"m5.xlarge"}}},
			{Key: v1.LabelCapacityType, RequirementBody: v1.RequirementBody{Operator: v1.OpIn, Values: []string{v1.CapacityTypeOnDemand}}}}}}
	if _, err := p.Create(context.Background(), nc); err != nil {
		t.Fatal(err)
	}
	node := &corev1.Node{}
	if err := api.Client.Get(context.Background(), client.ObjectKey{Name: "default-a"}, node); err != nil {
		t.Fatal(err)
	}
	if cpu := node.Status.Capacity[corev1.ResourceCPU]; cpu.Value() != 4 || node.Status.Allocatable.Memory().IsZero() {
		t.Errorf("node status %+v, want m5.xlarge's 4 vCPUs and its allocatable", node.Status)
	}
	if statusWrites != 0 {
		t.Errorf("%d status writes after the create: the API server dropped the status, and kwok can race them", statusWrites)
	}
}
