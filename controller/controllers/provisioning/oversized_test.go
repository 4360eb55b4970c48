package provisioning

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
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
	fakecloud "github.com/dovetail-sh/dovetail/controller/cloudprovider/fake"
	"github.com/dovetail-sh/dovetail/controller/scheduling"
	"github.com/dovetail-sh/dovetail/controller/state"
)

// A node that reports kwok's default "cpu: 1k, memory: 1Ti" for a 4-vCPU instance is
// planned as the 4 vCPUs it was launched with: pending pods that do not fit there get
// new nodes, and the node is flagged once (a Warning event and a counter).
func TestNodeReportingMoreThanItsInstanceIsNotTrusted(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC))
	four := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("16Gi"), corev1.ResourcePods: resource.MustParse("110")}
	kwokDefaults := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1k"), corev1.ResourceMemory: resource.MustParse("1Ti"), corev1.ResourcePods: resource.MustParse("1M")}
	pool := &v1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "default", UID: "pool-uid"}}
	nc := &v1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "default-a", Labels: map[string]string{v1.LabelNodePool: "default", v1.LabelInstanceType: "m.xlarge"}},
		Status: v1.NodeClaimStatus{ProviderID: "kwok://default-a", Capacity: four, Allocatable: four,
			Conditions: []metav1.Condition{{Type: v1.ConditionTypeInitialized, Status: metav1.ConditionTrue, Reason: "Initialized", LastTransitionTime: metav1.NewTime(clk.Now())}}}}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "default-a", UID: "node-uid", Labels: map[string]string{v1.LabelNodePool: "default"}},
		Spec: corev1.NodeSpec{ProviderID: nc.Status.ProviderID}, Status: corev1.NodeStatus{Capacity: kwokDefaults, Allocatable: kwokDefaults}}
	objs := []client.Object{pool, nc, node}
	for i := 0; i < 8; i++ {
		objs = append(objs, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("p%d", i), Namespace: "default", UID: types.UID(fmt.Sprintf("p%d", i))},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi")}}}}}})
	}
	kube := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(objs...).Build()
	cloud := fakecloud.New(clk, fakecloud.InstanceType("m.xlarge", "4", "16Gi", "zone-a"))
	recorder := record.NewFakeRecorder(100)
	p := NewProvisioner(kube, state.NewCluster(kube, clk), cloud, clk, recorder, NewBatcher(clk, time.Second, 10*time.Second), scheduling.DefaultNodeCosts())
	flagged := testutil.ToFloat64(oversizedNodes.WithLabelValues("default"))
	for i := 0; i < 2; i++ {
		if _, err := p.Schedule(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	var claims v1.NodeClaimList
	if err := kube.List(context.Background(), &claims); err != nil {
		t.Fatal(err)
	}
	// At most 4 of the 8 one-vCPU pods fit the 4-vCPU node: the rest need new claims.
	if len(claims.Items) < 2 {
		t.Errorf("%d claims: the pods were all planned onto the node's reported 1000 vCPUs", len(claims.Items))
	}
	if got := testutil.ToFloat64(oversizedNodes.WithLabelValues("default")) - flagged; got != 1 {
		t.Errorf("the node was counted %v times, want once", got)
	}
	close(recorder.Events)
	warnings := 0
	for e := range recorder.Events {
		if strings.Contains(e, "AllocatableExceedsCapacity") {
			warnings++
			if !strings.Contains(e, "cpu 1k > 4") {
				t.Errorf("event does not say what exceeded: %s", e)
			}
		}
	}
	if warnings != 1 {
		t.Errorf("%d AllocatableExceedsCapacity events, want one", warnings)
	}
}
