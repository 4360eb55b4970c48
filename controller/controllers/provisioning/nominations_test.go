package provisioning

import (
	"context"
	"testing"
	"time"

	"github.com/dovetail-sh/dovetail/controller/apis/scheme"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	fakecloud "github.com/dovetail-sh/dovetail/controller/cloudprovider/fake"
	"github.com/dovetail-sh/dovetail/controller/scheduling"
	"github.com/dovetail-sh/dovetail/controller/state"
)

// On EC2 a Node is named after its instance's address, not after its NodeClaim. A
// pod placed on such a node stays nominated to it until kube-scheduler binds it,
// and is not planned again in the meantime (which launched a node for it).
func TestNominationToANodeNamedUnlikeItsClaimHolds(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC))
	four := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("16Gi"), corev1.ResourcePods: resource.MustParse("110")}
	pool := &v1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "default", UID: "pool-uid"}}
	nc := &v1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "default-a", Labels: map[string]string{v1.LabelNodePool: "default"}},
		Status: v1.NodeClaimStatus{ProviderID: "aws:///us-west-2a/i-0abc", Capacity: four, Allocatable: four,
			Conditions: []metav1.Condition{{Type: v1.ConditionTypeInitialized, Status: metav1.ConditionTrue, Reason: "Initialized", LastTransitionTime: metav1.NewTime(clk.Now())}}}}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "ip-10-0-1-7.ec2.internal", Labels: map[string]string{v1.LabelNodePool: "default"}},
		Spec: corev1.NodeSpec{ProviderID: nc.Status.ProviderID}, Status: corev1.NodeStatus{Capacity: four, Allocatable: four}}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default", UID: "p-uid"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi")}}}}}}
	kube := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(pool, nc, node, pod).Build()
	cloud := fakecloud.New(clk, fakecloud.InstanceType("m.xlarge", "4", "16Gi", "zone-a"))
	p := NewProvisioner(kube, state.NewCluster(kube, clk), cloud, clk, record.NewFakeRecorder(100), NewBatcher(clk, time.Second, 10*time.Second), scheduling.DefaultNodeCosts())
	for i := 0; i < 2; i++ {
		if _, err := p.Schedule(context.Background()); err != nil {
			t.Fatal(err)
		}
		clk.Step(time.Second)
	}
	s, err := p.snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Pending) != 0 || s.Nominated != 1 {
		t.Errorf("after two passes %d pods pending, %d nominated; want the pod nominated to %s", len(s.Pending), s.Nominated, node.Name)
	}
	if nom, ok := p.nominations[pod.UID]; !ok || nom.Target != node.Name {
		t.Errorf("nomination %+v, want to node %s", nom, node.Name)
	}
}
