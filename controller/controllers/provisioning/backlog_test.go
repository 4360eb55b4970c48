package provisioning

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
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

// A backlog larger than one solve is planned in rounds of the oldest pending pods;
// the rest wait for the next round, and no pod is skipped or planned twice.
func TestBacklogIsPlannedOldestFirstInBoundedRounds(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC))
	pool := &v1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "default", UID: "pool-uid"}}
	objs := []client.Object{pool}
	// Created in an order unlike their age, so list order cannot pass for age.
	for _, age := range []int{4, 0, 6, 2, 5, 1, 3} {
		objs = append(objs, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("pod-%d", age), Namespace: "default", UID: types.UID(fmt.Sprintf("uid-%d", age)),
			CreationTimestamp: metav1.NewTime(clk.Now().Add(time.Duration(age) * time.Second))},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("3"), corev1.ResourceMemory: resource.MustParse("1Gi")}}}}}})
	}
	kube := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(objs...).Build()
	cloud := fakecloud.New(clk, fakecloud.InstanceType("m.xlarge", "4", "16Gi", "zone-a"))
	recorder := record.NewFakeRecorder(100)
	p := NewProvisioner(kube, state.NewCluster(kube, clk), cloud, clk, recorder, NewBatcher(clk, time.Second, 10*time.Second), scheduling.DefaultNodeCosts())
	p.WithMaxPodsPerSolve(3)

	nominated := sets.New[string]()
	for round, want := range [][]string{{"pod-0", "pod-1", "pod-2"}, {"pod-3", "pod-4", "pod-5"}, {"pod-6"}} {
		more, err := p.Schedule(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		got := sets.New[string]()
		for uid := range p.nominations {
			if name := "pod-" + string(uid)[len("uid-"):]; !nominated.Has(name) {
				got.Insert(name)
			}
		}
		if !got.Equal(sets.New(want...)) {
			t.Errorf("round %d nominated %v, want the oldest left: %v", round, sets.List(got), want)
		}
		nominated = nominated.Union(got)
		if !more {
			t.Errorf("round %d: the provisioner did not ask to look again", round)
		}
	}
	var claims v1.NodeClaimList
	if err := kube.List(context.Background(), &claims); err != nil {
		t.Fatal(err)
	}
	if len(claims.Items) != 7 {
		t.Errorf("%d nodeclaims for 7 pods that each need a node of their own", len(claims.Items))
	}
	for len(recorder.Events) > 0 {
		if e := <-recorder.Events; strings.Contains(e, "FailedScheduling") {
			t.Errorf("a pod the rounds placed was reported: %s", e)
		}
	}
}

// Old pods nothing can place (here, larger than any instance type) do not hold
// back a newer pod that fits: rounds turn to the pods not tried yet.
func TestBacklogThatCannotBePlacedDoesNotStarveNewerPods(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC))
	pool := &v1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "default", UID: "pool-uid"}}
	pod := func(name string, age int, cpu string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID(name + "-uid"),
			CreationTimestamp: metav1.NewTime(clk.Now().Add(time.Duration(age) * time.Second))},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse("1Gi")}}}}}}
	}
	kube := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(pool,
		pod("huge-0", 0, "64"), pod("huge-1", 1, "64"), pod("huge-2", 2, "64"), pod("fits", 3, "1")).Build()
	cloud := fakecloud.New(clk, fakecloud.InstanceType("m.xlarge", "4", "16Gi", "zone-a"))
	recorder := record.NewFakeRecorder(100)
	p := NewProvisioner(kube, state.NewCluster(kube, clk), cloud, clk, recorder, NewBatcher(clk, time.Second, 10*time.Second), scheduling.DefaultNodeCosts())
	p.WithMaxPodsPerSolve(2)
	for round := 0; round < 3; round++ {
		if _, err := p.Schedule(context.Background()); err != nil {
			t.Fatal(err)
		}
		if _, ok := p.nominations["fits-uid"]; ok {
			return
		}
	}
	t.Errorf("the pod that fits was not planned in 3 rounds behind 3 older pods nothing can place")
}
