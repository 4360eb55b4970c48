package provisioning

import (
	"context"
	"testing"
	"time"

	"github.com/dovetail-sh/dovetail/controller/apis/scheme"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	fakecloud "github.com/dovetail-sh/dovetail/controller/cloudprovider/fake"
	"github.com/dovetail-sh/dovetail/controller/scheduling"
	"github.com/dovetail-sh/dovetail/controller/state"
)

// A pool's limit counts the nodes that are no place for pods too: a cordoned node,
// one tainted for disruption, one being deleted. Their instances run until they are
// gone; a new launch beside them would take the pool past its limit.
func TestLimitsCountNodesThatTakeNoPods(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(*v1.NodeClaim, *corev1.Node)
	}{
		{"cordoned", func(_ *v1.NodeClaim, n *corev1.Node) { n.Spec.Unschedulable = true }},
		{"disrupted", func(_ *v1.NodeClaim, n *corev1.Node) { n.Spec.Taints = []corev1.Taint{v1.DisruptedNoScheduleTaint} }},
		{"deleting", func(nc *v1.NodeClaim, _ *corev1.Node) {
			now := metav1.Now()
			nc.DeletionTimestamp = &now
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := clocktesting.NewFakeClock(time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC))
			four := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("16Gi"), corev1.ResourcePods: resource.MustParse("110")}
			pool := &v1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "default", UID: "pool-uid"},
				Spec: v1.NodePoolSpec{Limits: v1.Limits{corev1.ResourceCPU: resource.MustParse("6")}}}
			nc := &v1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "default-a", Finalizers: []string{v1.TerminationFinalizer},
				Labels: map[string]string{v1.LabelNodePool: "default"}},
				Status: v1.NodeClaimStatus{ProviderID: "fake://default-a", Capacity: four, Allocatable: four}}
			node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "default-a", Labels: map[string]string{v1.LabelNodePool: "default"}},
				Spec: corev1.NodeSpec{ProviderID: "fake://default-a"}, Status: corev1.NodeStatus{Capacity: four, Allocatable: four}}
			tc.mutate(nc, node)
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default", UID: "p-uid"},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi")}}}}}}
			kube := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(pool, nc, node, pod).Build()
			cloud := fakecloud.New(clk, fakecloud.InstanceType("m.xlarge", "4", "16Gi", "zone-a"))
			recorder := record.NewFakeRecorder(100)
			p := NewProvisioner(kube, state.NewCluster(kube, clk), cloud, clk, recorder, NewBatcher(clk, time.Second, 10*time.Second), scheduling.DefaultNodeCosts())
			if _, err := p.Schedule(context.Background()); err != nil {
				t.Fatal(err)
			}
			var claims v1.NodeClaimList
			if err := kube.List(context.Background(), &claims, client.MatchingLabels{v1.LabelNodePool: "default"}); err != nil {
				t.Fatal(err)
			}
			if len(claims.Items) != 1 {
				t.Errorf("%d claims: a second 4-cpu node was launched beside a %s one under a 6-cpu limit", len(claims.Items), tc.name)
			}
			if len(p.nominations) != 0 {
				t.Errorf("the pod was nominated to %v, a node that takes no pods", p.nominations)
			}
		})
	}
}

// A replacement planned for a node that goes takes its place toward the limit:
// drift and consolidation of a pool at its limit are not refused.
func TestReplacementTakesThePlaceOfWhatGoes(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC))
	four := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("16Gi"), corev1.ResourcePods: resource.MustParse("110")}
	pool := &v1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "default", UID: "pool-uid"},
		Spec: v1.NodePoolSpec{Limits: v1.Limits{corev1.ResourceCPU: resource.MustParse("6")}}}
	nc := &v1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "default-a", Labels: map[string]string{v1.LabelNodePool: "default"}},
		Status: v1.NodeClaimStatus{ProviderID: "fake://default-a", Capacity: four, Allocatable: four}}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "default-a", Labels: map[string]string{v1.LabelNodePool: "default"}},
		Spec: corev1.NodeSpec{ProviderID: "fake://default-a"}, Status: corev1.NodeStatus{Capacity: four, Allocatable: four}}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default", UID: "p-uid"}, Spec: corev1.PodSpec{NodeName: "default-a",
		Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi")}}}}}}
	kube := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(pool, nc, node, pod).Build()
	cloud := fakecloud.New(clk, fakecloud.InstanceType("m.xlarge", "4", "16Gi", "zone-a"))
	cluster := state.NewCluster(kube, clk)
	p := NewProvisioner(kube, cluster, cloud, clk, record.NewFakeRecorder(100), NewBatcher(clk, time.Second, 10*time.Second), scheduling.DefaultNodeCosts())
	view, err := cluster.Read(context.Background(), state.ReadOnly)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := p.SnapshotOf(context.Background(), view)
	if err != nil {
		t.Fatal(err)
	}
	results := snap.PlanWithout(sets.New("default-a"), []*corev1.Pod{pod})
	if len(results.Unschedulable) != 0 || len(results.NodeClaims) != 1 {
		t.Errorf("replacing the pool's only node under its limit: %d claims, unschedulable %v; want one replacement", len(results.NodeClaims), results.Unschedulable)
	}
}
