package simulate

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/dovetail-sh/dovetail/controller/apis/autoscaling/v1beta1"
	awsv1 "github.com/dovetail-sh/dovetail/controller/apis/aws/v1"
	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/controller/apis/v1alpha1"
	"github.com/dovetail-sh/dovetail/controller/catalog"
	"github.com/dovetail-sh/dovetail/controller/scheduling/plancheck"
)

// predictionCase is a generated snapshot with what predictions read beside the
// pods: an EC2NodeClass with random kubelet and cpu settings, NodeOverlays,
// a CapacityBuffer, NodeClaims for the nodes, and random feature gates.
func predictionCase(t testing.TB, seed uint64, maxTypes int) (*Inputs, string, *catalog.File) {
	u := simulateUniverse(t)
	c := u.Generate(seed, maxTypes)
	in := asObjects(c)
	r := rand.New(rand.NewPCG(seed, 0x5eed))
	class := &awsv1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: "fuzz"}}
	class.Spec.Kubelet = &awsv1.KubeletConfiguration{}
	if r.IntN(2) == 0 {
		n := int32(1 + r.IntN(60))
		class.Spec.Kubelet.MaxPods = &n
	}
	if r.IntN(3) == 0 {
		n := int32(1 + r.IntN(20))
		class.Spec.Kubelet.PodsPerCore = &n
	}
	if r.IntN(3) == 0 {
		class.Spec.Kubelet.KubeReserved = map[string]string{"cpu": fmt.Sprintf("%dm", 100*r.IntN(10)), "memory": fmt.Sprintf("%dMi", 100*r.IntN(20))}
	}
	if r.IntN(4) == 0 {
		enabled := awsv1.NestedVirtualizationEnabled
		class.Spec.CPUOptions = &awsv1.CPUOptions{NestedVirtualization: &enabled}
	}
	in.NodeClasses = append(in.NodeClasses, class)
	for _, np := range in.NodePools {
		np.Spec.Template.Spec.NodeClassRef = &v1.NodeClassReference{Group: awsv1.Group, Kind: "EC2NodeClass", Name: class.Name}
	}
	for i := range r.IntN(3) {
		price := fmt.Sprint(r.Float64() * 3)
		family := []string{"m5", "c5", "r5", "m6g", "t3", "g4dn"}[r.IntN(6)]
		in.NodeOverlays = append(in.NodeOverlays, &v1alpha1.NodeOverlay{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("o%d", i)}, Spec: v1alpha1.NodeOverlaySpec{
			Requirements: []v1alpha1.NodeSelectorRequirement{{Key: v1.LabelInstanceFamily, Operator: corev1.NodeSelectorOpIn, Values: []string{family}}}, Price: &price}})
	}
	if len(in.Pods) > 0 && r.IntN(2) == 0 {
		replicas := int32(r.IntN(4))
		in.podTemplates = map[string]corev1.PodTemplateSpec{"default/spare": {ObjectMeta: in.Pods[0].ObjectMeta, Spec: in.Pods[0].Spec}}
		in.Buffers = append(in.Buffers, &v1beta1.CapacityBuffer{ObjectMeta: metav1.ObjectMeta{Name: "spare", Namespace: "default"},
			Spec: v1beta1.CapacityBufferSpec{PodTemplateRef: &v1beta1.LocalObjectRef{Name: "spare"}, Replicas: &replicas}})
	}
	// Each node is a registered, initialized claim of its pool, as the controller
	// launches them.
	for _, n := range in.Nodes {
		pool := n.Labels[v1.LabelNodePool]
		if pool == "" && len(in.NodePools) > 0 {
			pool = in.NodePools[0].Name
		}
		in.NodeClaims = append(in.NodeClaims, &v1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "claim-" + n.Name, Labels: n.Labels, UID: types.UID("uid-" + n.Name),
			CreationTimestamp: metav1.NewTime(fakeNow.Add(-3600e9))},
			Spec: v1.NodeClaimSpec{NodeClassRef: &v1.NodeClassReference{Group: awsv1.Group, Kind: "EC2NodeClass", Name: class.Name}},
			Status: v1.NodeClaimStatus{ProviderID: n.Spec.ProviderID, NodeName: n.Name, Capacity: n.Status.Capacity, Allocatable: n.Status.Allocatable,
				Conditions: []metav1.Condition{{Type: v1.ConditionTypeInitialized, Status: metav1.ConditionTrue, Reason: "Initialized", LastTransitionTime: metav1.NewTime(fakeNow.Add(-3600e9))}}}})
		if n.Labels[v1.LabelNodePool] == "" {
			n.Labels = withLabel(n.Labels, v1.LabelNodePool, pool)
		}
	}
	gates := []string{"NodeOverlay", "CapacityBuffer", "SpotToSpotConsolidation"}
	var on []string
	for _, g := range gates {
		on = append(on, fmt.Sprintf("%s=%t", g, r.IntN(2) == 0))
	}
	return in, strings.Join(on, ","), catalogOf(t, c.Input.InstanceTypes[c.Input.NodePools[0].Name])
}

func withLabel(labels map[string]string, k, v string) map[string]string {
	out := make(map[string]string, len(labels)+1)
	for key, val := range labels {
		out[key] = val
	}
	out[k] = v
	return out
}

// checkPredictions runs a generated snapshot through simulate and simulate
// --consolidate: neither panics, and every node simulate plans can run its pods
// (the plan checker of "plan only nodes a pod can run on"), under the class's
// shaping, the overlays and the buffers the gates let in.
func checkPredictions(t testing.TB, seed uint64, maxTypes int) (claims int, consolidated bool) {
	in, gates, cat := predictionCase(t, seed, maxTypes)
	ctl := defaults(gates)
	_, engineInput, results, err := run(in, cat, ctl, clocktesting.NewFakeClock(fakeNow))
	if err != nil {
		t.Fatalf("seed %d (%s): simulate: %v", seed, gates, err)
	}
	if vs := plancheck.Plan(engineInput, results); len(vs) > 0 {
		t.Fatalf("seed %d (%s): %d violation(s), first: %s", seed, gates, len(vs), vs[0])
	}
	// Consolidation reads a fresh copy: nothing shared with the plan above.
	in2, _, _ := predictionCase(t, seed, maxTypes)
	if len(in2.Nodes) == 0 {
		return len(results.NodeClaims), false
	}
	if _, err := Consolidate(in2, cat, ctl, fakeNow); err != nil {
		t.Fatalf("seed %d (%s): simulate --consolidate: %v", seed, gates, err)
	}
	return len(results.NodeClaims), true
}

// TestPredictionsOfGeneratedSnapshots runs checkPredictions over many seeds, as
// make test runs FuzzPredictions' seeds.
func TestPredictionsOfGeneratedSnapshots(t *testing.T) {
	cases := 150
	if testing.Short() {
		cases = 30
	}
	planned, consolidated := 0, 0
	for seed := range uint64(cases) {
		claims, c := checkPredictions(t, seed, 120)
		if claims > 0 {
			planned++
		}
		if c {
			consolidated++
		}
	}
	// Checks of plans that launch nothing, or of no consolidation, hold vacuously.
	if planned < cases/2 || consolidated < cases/4 {
		t.Errorf("of %d cases %d planned a node and %d consolidated", cases, planned, consolidated)
	}
	t.Logf("of %d cases %d planned a node and %d consolidated", cases, planned, consolidated)
}

// FuzzPredictions: random snapshots (nodes and their claims, pending and bound
// pods, pools, a class, overlays, a buffer, gates) through simulate and simulate
// --consolidate.
func FuzzPredictions(f *testing.F) {
	for _, seed := range []uint64{1, 7, 42} {
		f.Add(seed, uint8(60))
	}
	f.Fuzz(func(t *testing.T, seed uint64, maxTypes uint8) {
		checkPredictions(t, seed, int(maxTypes))
	})
}
