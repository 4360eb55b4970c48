package disruption

import (
	"context"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/dovetail-sh/dovetail/controller/apis/scheme"
	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/controller/capacitymix"
	"github.com/dovetail-sh/dovetail/controller/controllers/provisioning"
	"github.com/dovetail-sh/dovetail/controller/scheduling"
	"github.com/dovetail-sh/dovetail/controller/state"
)

// mixedCloud offers m.large on-demand and, at a third of the price, spot.
type mixedCloud struct{ pricedCloud }

func (mixedCloud) GetInstanceTypes(context.Context, *v1.NodePool) ([]*scheduling.InstanceType, error) {
	return []*scheduling.InstanceType{scheduling.NewInstanceType("m.large", map[string]string{v1.LabelArch: "amd64"},
		corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("4Gi"), corev1.ResourcePods: resource.MustParse("29")},
		[]scheduling.Offering{{Zone: "a", CapacityType: v1.CapacityTypeOnDemand, Price: 0.1, Available: true}, {Zone: "a", CapacityType: v1.CapacityTypeSpot, Price: 0.033, Available: true}},
		scheduling.DefaultAllocatableSettings())}, nil
}

// After a scale-in, the controller's passes on a fake clock move the pods off
// spot for the pool's mix (base 2, 50% spot): of 4 on-demand nodes (one with a
// pod) and 2 spot nodes with a pod each, the first decision deletes the 2 spot
// nodes (their pods fit on the empty on-demand nodes) and no on-demand node,
// which alone would break the mix (5 nodes allow 1 spot); nothing goes before
// the validation delay.
func TestScaleInUnderACapacityMixReconcile(t *testing.T) {
	ctx := context.Background()
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))
	pool := &v1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "default",
		Annotations: map[string]string{capacitymix.OnDemandBaseAnnotationKey: "2", capacitymix.SpotPercentAnnotationKey: "50"}}}
	pool.Spec.Disruption.ConsolidationPolicy = v1.ConsolidationPolicyWhenEmptyOrUnderutilized
	pool.Spec.Disruption.ConsolidateAfter = v1.MustParseNillableDuration("0s")
	pool.Spec.Disruption.Budgets = []v1.Budget{{Nodes: "100%"}}
	pool.Spec.Template.Spec.Requirements = []v1.NodePoolRequirement{{Key: v1.LabelCapacityType,
		RequirementBody: v1.RequirementBody{Operator: v1.OpIn, Values: []string{v1.CapacityTypeSpot, v1.CapacityTypeOnDemand}}}}
	objs := []client.Object{pool}
	controller := true
	for _, n := range []struct {
		name, capacityType string
		pod                bool
	}{{"od-0", v1.CapacityTypeOnDemand, true}, {"od-1", v1.CapacityTypeOnDemand, false}, {"od-2", v1.CapacityTypeOnDemand, false},
		{"od-3", v1.CapacityTypeOnDemand, false}, {"spot-0", v1.CapacityTypeSpot, true}, {"spot-1", v1.CapacityTypeSpot, true}} {
		nc, node := initializedClaim(n.name, clk.Now().Add(-time.Hour))
		nc.Labels[v1.LabelCapacityType] = n.capacityType
		objs = append(objs, nc, node)
		if n.pod {
			objs = append(objs, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-" + n.name, Namespace: "default", UID: types.UID("web-" + n.name),
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web", UID: "web", Controller: &controller}}},
				Spec: corev1.PodSpec{NodeName: node.Name, Containers: []corev1.Container{{Name: "web", Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1500m"), corev1.ResourceMemory: resource.MustParse("1Gi")}}}}},
				Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}})
		}
	}
	kube := fake.NewClientBuilder().WithScheme(scheme.New()).WithStatusSubresource(&v1.NodeClaim{}, &v1.NodePool{}).WithObjects(objs...).Build()
	recorder := discardingRecorder(t)
	prov := provisioning.NewProvisioner(kube, state.NewCluster(kube, clk), mixedCloud{}, clk, recorder,
		provisioning.NewBatcher(clk, time.Second, 10*time.Second), scheduling.DefaultNodeCosts())
	ctrl := NewController(kube, mixedCloud{}, prov, clk, recorder, DefaultOptions())
	deleting := func() []string {
		var list v1.NodeClaimList
		if err := kube.List(ctx, &list); err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, nc := range list.Items {
			if nc.DeletionTimestamp != nil {
				out = append(out, nc.Name)
			}
		}
		slices.Sort(out)
		return out
	}
	if err := ctrl.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	if got := deleting(); len(got) != 0 {
		t.Fatalf("%v deleted before the validation delay", got)
	}
	clk.Step(DefaultOptions().ValidationDelay + time.Second)
	if err := ctrl.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	got := deleting()
	if !slices.Equal(got, []string{"spot-0", "spot-1"}) {
		t.Fatalf("deleting %v; want spot-0 and spot-1", got)
	}
}
