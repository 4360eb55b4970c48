package simulate

import (
	"context"
	"fmt"
	"slices"
	"strings"
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
	"github.com/dovetail-sh/dovetail/controller/catalog"
	fakecloud "github.com/dovetail-sh/dovetail/controller/cloudprovider/fake"
	"github.com/dovetail-sh/dovetail/controller/controllers/provisioning"
	"github.com/dovetail-sh/dovetail/controller/scheduling"
	"github.com/dovetail-sh/dovetail/controller/state"
)

// A backlog over the provisioner's cap is planned as the provisioner plans it: in
// rounds of the oldest pods, each round's claims in flight for the next. Six 1-cpu
// pods under a cap of 3 make two m5.xlarge of 3 pods each, round by round, where
// one solve of all six would pick one m5.2xlarge; simulate says what the
// provisioner, run on the same pods with the same cap, writes.
func TestSimulatePlansABacklogInRoundsAsTheProvisioner(t *testing.T) {
	full, err := catalog.EmbeddedAWS()
	if err != nil {
		t.Fatal(err)
	}
	cat := &catalog.File{}
	for _, name := range []string{"m5.xlarge", "m5.2xlarge"} {
		e, ok := full.Find(name)
		if !ok {
			t.Fatalf("the catalog lacks %s", name)
		}
		cat.InstanceTypes = append(cat.InstanceTypes, e)
	}
	cat = cat.InZones([]string{"us-west-2a"})
	pool := v1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "default", UID: "pool-uid"}, Spec: v1.NodePoolSpec{Template: v1.NodeClaimTemplate{Spec: v1.NodeClaimTemplateSpec{
		Requirements: []v1.NodePoolRequirement{{Key: v1.LabelCapacityType, RequirementBody: v1.RequirementBody{Operator: v1.OpIn, Values: []string{v1.CapacityTypeOnDemand}}}}}}}}
	var pods []*corev1.Pod
	for i := range 6 {
		pods = append(pods, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("web-%d", i), Namespace: "default", UID: types.UID(fmt.Sprintf("web-%d", i)),
			CreationTimestamp: metav1.NewTime(fakeNow.Add(time.Duration(i) * time.Second))},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi")}}}}}})
	}
	// Each claim as its pods and its instance-type options, sorted.
	type claim struct {
		pods  int
		types string
	}
	sorted := func(cs []claim) []claim {
		slices.SortFunc(cs, func(a, b claim) int { return strings.Compare(fmt.Sprint(a), fmt.Sprint(b)) })
		return cs
	}
	typesOf := func(reqs []v1.NodeSelectorRequirementWithMinValues) string {
		for _, r := range reqs {
			if r.Key == v1.LabelInstanceType {
				return strings.Join(r.Values, ",")
			}
		}
		return ""
	}
	predict := func() ([]claim, int) {
		in := &Inputs{NodePools: []*v1.NodePool{pool.DeepCopy()}}
		for _, p := range pods {
			in.Pods = append(in.Pods, p.DeepCopy())
		}
		plan, err := Run(in, cat, defaults(), clocktesting.NewFakeClock(fakeNow))
		if err != nil {
			t.Fatal(err)
		}
		var out []claim
		for _, nc := range plan.NodeClaims {
			out = append(out, claim{len(nc.Pods), typesOf(nc.Requirements)})
		}
		return sorted(out), plan.Summary.Rounds
	}

	one, rounds := predict()
	if rounds != 1 || len(one) != 1 || one[0].pods != 6 {
		t.Fatalf("under the cap: %+v in %d round(s); want one claim of the 6 pods", one, rounds)
	}
	defer func(n int) { maxPodsPerSolve = n }(maxPodsPerSolve)
	maxPodsPerSolve = 3
	predicted, rounds := predict()

	objs := []client.Object{pool.DeepCopy()}
	for _, p := range pods {
		objs = append(objs, p.DeepCopy())
	}
	kube := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(objs...).Build()
	clk := clocktesting.NewFakeClock(fakeNow.Add(time.Minute))
	p := provisioning.NewProvisioner(kube, state.NewCluster(kube, clk), fakecloud.New(clk, cat.ForEngine(scheduling.DefaultAllocatableSettings())...), clk,
		record.NewFakeRecorder(100), provisioning.NewBatcher(clk, time.Second, 10*time.Second), scheduling.DefaultNodeCosts())
	p.WithMaxPodsPerSolve(3)
	for range 3 {
		if _, err := p.Schedule(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	var claims v1.NodeClaimList
	if err := kube.List(context.Background(), &claims); err != nil {
		t.Fatal(err)
	}
	var launched []claim
	for _, nc := range claims.Items {
		cpu := nc.Spec.Resources.Requests[corev1.ResourceCPU]
		launched = append(launched, claim{int(cpu.Value()), typesOf(nc.Spec.Requirements)})
	}
	launched = sorted(launched)
	if rounds != 2 || !slices.Equal(predicted, launched) {
		t.Errorf("a cap of 3: predicted %+v in %d round(s); the provisioner writes %+v", predicted, rounds, launched)
	}
	if len(launched) != 2 {
		t.Errorf("the provisioner wrote %+v; want two claims of 3 pods, one a round", launched)
	}
}

// A pod no round can place does not end the rounds while pods behind it are
// untried: under a cap of 2, the oldest pod (too large for any type) and the next
// are tried first; the third is planned in the next round, as the provisioner
// would, not dropped.
func TestRoundsTryEveryPod(t *testing.T) {
	defer func(n int) { maxPodsPerSolve = n }(maxPodsPerSolve)
	maxPodsPerSolve = 2
	in := &Inputs{NodePools: []*v1.NodePool{{ObjectMeta: metav1.ObjectMeta{Name: "default"}}}}
	for i, cpu := range []string{"1000", "1", "1"} {
		in.Pods = append(in.Pods, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("pod-%d", i), Namespace: "default", UID: types.UID(fmt.Sprintf("pod-%d", i)),
			CreationTimestamp: metav1.NewTime(fakeNow.Add(time.Duration(i) * time.Second))},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse("1Gi")}}}}}})
	}
	plan, err := Run(in, testTypes(t), defaults(), clocktesting.NewFakeClock(fakeNow))
	if err != nil {
		t.Fatal(err)
	}
	if plan.Summary.Scheduled != 2 || len(plan.Unschedulable) != 1 || plan.Unschedulable[0].Pod != "default/pod-0" {
		t.Errorf("%d of 3 scheduled in %d round(s), unschedulable %+v; want pod-1 and pod-2 placed and pod-0 refused", plan.Summary.Scheduled, plan.Summary.Rounds, plan.Unschedulable)
	}
}
