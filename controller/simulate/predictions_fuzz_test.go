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
		// Most pools consolidate, so consolidation decides something to check.
		if r.IntN(4) > 0 {
			np.Spec.Disruption.ConsolidateAfter = v1.MustParseNillableDuration("0s")
			np.Spec.Disruption.ConsolidationPolicy = []v1.ConsolidationPolicy{v1.ConsolidationPolicyWhenEmptyOrUnderutilized, v1.ConsolidationPolicyWhenEmpty}[r.IntN(2)]
		}
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
	// A third of the cases plan in rounds, as the provisioner plans a backlog
	// over its cap.
	if seed%3 == 0 {
		defer func(n int) { maxPodsPerSolve = n }(maxPodsPerSolve)
		maxPodsPerSolve = 1 + int(seed/3%7)
	}
	plan, rounds, err := run(in, cat, ctl, clocktesting.NewFakeClock(fakeNow))
	if err != nil {
		t.Fatalf("seed %d (%s): simulate: %v", seed, gates, err)
	}
	vs, planned := checkRounds(rounds)
	if len(vs) > 0 {
		t.Fatalf("seed %d (%s): %d violation(s), first: %s", seed, gates, len(vs), vs[0])
	}
	// However many rounds, each pod is placed once, or said to be unschedulable.
	placed := map[string]int{}
	for _, nc := range plan.NodeClaims {
		for _, p := range nc.Pods {
			placed[p]++
		}
	}
	for _, e := range plan.ExistingNodes {
		for _, p := range e.Pods {
			placed[p]++
		}
	}
	for _, u := range plan.Unschedulable {
		placed[u.Pod]++
	}
	for pod, n := range placed {
		if n > 1 {
			t.Fatalf("seed %d (%s), %d round(s): pod %s is placed or refused %d times", seed, gates, len(rounds), pod, n)
		}
	}
	// Consolidation reads a fresh copy: nothing shared with the plan above.
	in2, _, _ := predictionCase(t, seed, maxTypes)
	if len(in2.Nodes) == 0 {
		return planned, false
	}
	nodes := map[string]bool{}
	for _, n := range in2.Nodes {
		nodes[n.Name] = true
	}
	report, err := Consolidate(in2, cat, ctl, fakeNow)
	if err != nil {
		t.Fatalf("seed %d (%s): simulate --consolidate: %v", seed, gates, err)
	}
	if vs := consolidationViolations(report, nodes); len(vs) > 0 {
		t.Fatalf("seed %d (%s): consolidation: %s", seed, gates, strings.Join(vs, "; "))
	}
	return planned, len(report.Remove) > 0
}

// consolidationViolations is what must hold of every consolidation report: it
// removes nodes of the snapshot, each once; every pod of a removed node moves,
// from that node, to a node that stays or one the report launches; and it ends
// with no more nodes than it started with.
func consolidationViolations(r *ConsolidationReport, nodes map[string]bool) []string {
	var vs []string
	removed := map[string]bool{}
	for _, n := range r.Remove {
		if !nodes[n.Node] || removed[n.Node] {
			vs = append(vs, fmt.Sprintf("removes %q, not a node of the snapshot or removed twice", n.Node))
		}
		removed[n.Node] = true
	}
	launched := map[string]bool{}
	for _, l := range r.Launch {
		launched["new "+l.InstanceType+" ("+l.Name+")"] = true
	}
	moved := map[string]string{}
	for _, m := range r.PodsMoved {
		moved[m.Pod] = m.From
		if !removed[m.From] {
			vs = append(vs, fmt.Sprintf("pod %s moves from %s, which stays", m.Pod, m.From))
		}
		if !launched[m.To] && (!nodes[m.To] || removed[m.To]) {
			vs = append(vs, fmt.Sprintf("pod %s moves to %s, neither a node that stays nor one launched", m.Pod, m.To))
		}
	}
	for _, n := range r.Remove {
		for _, p := range n.Pods {
			if moved[p] != n.Node {
				vs = append(vs, fmt.Sprintf("pod %s of removed node %s does not move from it", p, n.Node))
			}
		}
	}
	if r.Summary.NodesAfter > r.Summary.NodesBefore {
		vs = append(vs, fmt.Sprintf("ends with %d nodes, from %d", r.Summary.NodesAfter, r.Summary.NodesBefore))
	}
	return vs
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
