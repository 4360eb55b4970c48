package provisioning

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/dovetail-sh/dovetail/controller/apis/scheme"
	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/controller/capacitymix"
	fakecloud "github.com/dovetail-sh/dovetail/controller/cloudprovider/fake"
	"github.com/dovetail-sh/dovetail/controller/scheduling"
	"github.com/dovetail-sh/dovetail/controller/state"
)

// A burst into a pool with a capacity mix (base 2, at most 50% spot beyond it),
// where spot is cheaper and the plan would be all spot, launches the claims so
// that the mix holds: 4 on-demand and 2 spot of 6.
func TestBurstHoldsThePoolsCapacityMix(t *testing.T) {
	ctx := context.Background()
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))
	spec := corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("3"), corev1.ResourceMemory: resource.MustParse("1Gi")}}}}}
	pool := &v1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "default", UID: "pool-uid",
		Annotations: map[string]string{capacitymix.OnDemandBaseAnnotationKey: "2", capacitymix.SpotPercentAnnotationKey: "50"}}}
	objs := []client.Object{pool}
	for i := range 6 {
		objs = append(objs, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("web-%d", i), Namespace: "default", UID: types.UID(fmt.Sprintf("web-%d", i))}, Spec: spec})
	}
	kube := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(objs...).Build()
	it := scheduling.NewInstanceType("m.xlarge", map[string]string{v1.LabelArch: "amd64", v1.LabelOS: "linux"}, corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("16Gi"), corev1.ResourcePods: resource.MustParse("29"),
		corev1.ResourceEphemeralStorage: resource.MustParse("20Gi"),
	}, []scheduling.Offering{{Zone: "zone-a", CapacityType: v1.CapacityTypeOnDemand, Price: 0.2, Available: true}, {Zone: "zone-a", CapacityType: v1.CapacityTypeSpot, Price: 0.06, Available: true}},
		scheduling.DefaultAllocatableSettings())
	cloud := fakecloud.New(clk, it)
	p := NewProvisioner(kube, state.NewCluster(kube, clk), cloud, clk, record.NewFakeRecorder(100), NewBatcher(clk, time.Second, 10*time.Second), scheduling.DefaultNodeCosts())
	if _, err := p.Schedule(ctx); err != nil {
		t.Fatal(err)
	}
	var list v1.NodeClaimList
	if err := kube.List(ctx, &list); err != nil {
		t.Fatal(err)
	}
	got := capacitymix.CountPool(list.Items, "default")
	if got.OnDemand != 4 || got.Spot != 2 {
		t.Errorf("launched %s; want 4 on-demand and 2 spot", got)
	}
	for _, nc := range list.Items {
		if !capacitymix.MaySpot(&nc) && nc.Annotations["dovetail.sh/planned-price"] != "0.200000" {
			t.Errorf("an on-demand claim planned at %s; want the on-demand price", nc.Annotations["dovetail.sh/planned-price"])
		}
	}
}
