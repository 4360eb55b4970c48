package consolidation

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"

	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/controller/commitment"
	"github.com/dovetail-sh/dovetail/controller/engineinput"
	"github.com/dovetail-sh/dovetail/controller/scheduling"
	"github.com/dovetail-sh/dovetail/controller/state"
)

var testNow = time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)

// testTypes are three sizes of one family, priced by size.
func testTypes() []*scheduling.InstanceType {
	var out []*scheduling.InstanceType
	for _, size := range []struct {
		name   string
		cpu    int64
		price  float64
		memory string
	}{{"m.large", 2, 0.1, "8Gi"}, {"m.xlarge", 4, 0.2, "16Gi"}, {"m.2xlarge", 8, 0.4, "32Gi"}} {
		out = append(out, scheduling.NewInstanceType(size.name, map[string]string{v1.LabelArch: "amd64", v1.LabelOS: "linux"},
			corev1.ResourceList{corev1.ResourceCPU: *resource.NewQuantity(size.cpu, resource.DecimalSI), corev1.ResourceMemory: resource.MustParse(size.memory), corev1.ResourcePods: resource.MustParse("110"), corev1.ResourceEphemeralStorage: resource.MustParse("20Gi")},
			[]scheduling.Offering{{Zone: "a", CapacityType: v1.CapacityTypeOnDemand, Price: size.price, Available: true}}, scheduling.DefaultAllocatableSettings()))
	}
	return out
}

// testCluster builds nodes of one type, each with the given number of pods of
// podCPU, all of one Deployment, in a pool with the given budget.
type testCluster struct {
	pods   []corev1.Pod
	nodes  []corev1.Node
	claims []v1.NodeClaim
	pdbs   []policyv1.PodDisruptionBudget
	pool   *v1.NodePool
	// types are the instance types the pool may launch; testTypes() when nil.
	types []*scheduling.InstanceType
	// spotToSpot is the SpotToSpotConsolidation gate.
	spotToSpot bool
	// commitments price the cluster (nil: list prices).
	commitments *commitment.Ledger
}

func newTestCluster(budget string) *testCluster {
	pool := &v1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "default"}}
	pool.Spec.Disruption.ConsolidationPolicy = v1.ConsolidationPolicyWhenEmptyOrUnderutilized
	pool.Spec.Disruption.ConsolidateAfter = v1.MustParseNillableDuration("0s")
	pool.Spec.Disruption.Budgets = []v1.Budget{{Nodes: budget}}
	return &testCluster{pool: pool}
}

func (tc *testCluster) instanceTypes() []*scheduling.InstanceType {
	if tc.types != nil {
		return tc.types
	}
	return testTypes()
}

func (tc *testCluster) addNode(instanceType string, pods int, podCPU string) *corev1.Node {
	n := tc.addNodeIn(instanceType, "a", v1.CapacityTypeOnDemand)
	for i := 0; i < pods; i++ {
		tc.addPod(n.Name, podCPU, "256Mi", map[string]string{"app": "web"})
	}
	return n
}

// addNodeIn adds an initialized node of the instance type, zone and capacity type,
// with no pods.
func (tc *testCluster) addNodeIn(instanceType, zone, capacityType string) *corev1.Node {
	var it *scheduling.InstanceType
	for _, t := range tc.instanceTypes() {
		if t.Name == instanceType {
			it = t
		}
	}
	name := fmt.Sprintf("node-%d", len(tc.nodes))
	labels := map[string]string{v1.LabelNodePool: "default", v1.LabelInstanceType: it.Name, v1.LabelTopologyZone: zone, v1.LabelCapacityType: capacityType,
		v1.LabelHostname: name, v1.LabelArch: "amd64", v1.LabelOS: "linux"}
	tc.claims = append(tc.claims, v1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Status: v1.NodeClaimStatus{ProviderID: "test://" + name, NodeName: name, Allocatable: it.Allocatable.ToResourceList(), Capacity: it.Capacity.ToResourceList(),
			Conditions: []metav1.Condition{{Type: v1.ConditionTypeInitialized, Status: metav1.ConditionTrue, LastTransitionTime: metav1.NewTime(testNow.Add(-time.Hour))}}}})
	tc.nodes = append(tc.nodes, corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}, Spec: corev1.NodeSpec{ProviderID: "test://" + name},
		Status: corev1.NodeStatus{Allocatable: it.Allocatable.ToResourceList(), Capacity: it.Capacity.ToResourceList()}})
	return &tc.nodes[len(tc.nodes)-1]
}

// addPod binds a running pod of a ReplicaSet to the node.
func (tc *testCluster) addPod(node, cpu, memory string, labels map[string]string) *corev1.Pod {
	controller := true
	podName := fmt.Sprintf("%s-pod-%d", node, len(tc.pods))
	tc.pods = append(tc.pods, corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: podName, Namespace: "default", UID: types.UID(podName), Labels: labels,
			OwnerReferences: []metav1.OwnerReference{{Kind: "ReplicaSet", Name: labels["app"], Controller: &controller}}},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(memory)}}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}},
	})
	return &tc.pods[len(tc.pods)-1]
}

func (tc *testCluster) decide(t *testing.T, disrupting ...string) (*Plan, *Cluster) {
	t.Helper()
	view := state.NewView(tc.pods, tc.nodes, tc.claims, []v1.NodePool{*tc.pool}, tc.pdbs, nil)
	snap := engineinput.FromView(view, func(*v1.NodePool) []*scheduling.InstanceType { return tc.instanceTypes() }, scheduling.DefaultNodeCosts())
	snap.Commitments = tc.commitments
	cl := Observe(view, snap, sets.New(disrupting...), testNow)
	allowed, errs := cl.Allowed(testNow)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	return Decide(cl, allowed, Options{Now: testNow, SpotToSpot: tc.spotToSpot}), cl
}

func names(cands []*Candidate) []string {
	out := make([]string, len(cands))
	for i, c := range cands {
		out[i] = c.Node.Name
	}
	return out
}

// mustPlaceEveryPod checks that the target gives every pod of a removed node a place.
func mustPlaceEveryPod(t *testing.T, plan *Plan) {
	t.Helper()
	want := 0
	for _, c := range plan.Remove {
		want += len(c.Pods)
	}
	if len(plan.Moves) != want {
		t.Fatalf("%d moves for %d pods on removed nodes", len(plan.Moves), want)
	}
	removed := map[string]bool{}
	for _, c := range plan.Remove {
		removed[c.Node.Name] = true
	}
	for _, m := range plan.Moves {
		if m.To == "" || removed[m.To] {
			t.Errorf("pod %s from %s goes to %q", m.Pod.Name, m.From, m.To)
		}
	}
}

// Eight half-empty 4-cpu nodes hold what two would: the target keeps at most two
// nodes' worth of capacity, places every pod, and costs less.
func TestDecideRepacksHalfEmptyNodes(t *testing.T) {
	tc := newTestCluster("100%")
	for i := 0; i < 8; i++ {
		tc.addNode("m.xlarge", 3, "500m")
	}
	plan, _ := tc.decide(t)
	mustPlaceEveryPod(t, plan)
	after := 8*0.2 - plan.Savings()
	// 24 pods of 500m are 12 cpus: three 4-cpu nodes' worth at least, $0.60/h.
	if after > 0.8+1e-9 || after < 0.6-1e-9 {
		t.Errorf("the target costs $%.2f/h (removes %v, launches %d); want at most $0.80/h, the price of four 4-cpu nodes", after, names(plan.Remove), len(plan.Replacements))
	}
	if len(plan.Batches) == 0 {
		t.Fatal("no batch may start though the budget is 100%")
	}
	inBatches := 0
	for _, b := range plan.Batches {
		inBatches += len(b.Candidates)
	}
	if inBatches != len(plan.Remove) {
		t.Errorf("batches hold %d of the %d removals though the budget is 100%%", inBatches, len(plan.Remove))
	}
}

// A budget of 50% of four nodes lets two go at a time; the rest of the target
// says the budget holds it.
func TestDecideBatchesWithinBudget(t *testing.T) {
	tc := newTestCluster("50%")
	for i := 0; i < 4; i++ {
		tc.addNode("m.xlarge", 0, "500m")
	}
	plan, _ := tc.decide(t)
	if len(plan.Remove) != 4 {
		t.Fatalf("the target removes %v of four empty nodes", names(plan.Remove))
	}
	if len(plan.Batches) != 1 || len(plan.Batches[0].Candidates) != 2 || plan.Batches[0].Reason != v1.DisruptionReasonEmpty {
		t.Fatalf("batches %v; want one emptiness batch of two nodes", plan.Batches)
	}
	budgetHeld := 0
	for _, b := range plan.Blocked {
		if strings.HasPrefix(b.Reason, "budget:") {
			budgetHeld++
		}
	}
	if budgetHeld != 2 {
		t.Errorf("%d nodes reported held by the budget, want 2: %v", budgetHeld, plan.Blocked)
	}
	// With two of the four being disrupted already, the budget has no room left.
	plan, _ = tc.decide(t, "node-0", "node-1")
	if len(plan.Batches) != 0 {
		t.Errorf("batches %v started while the budget's two nodes are being disrupted", plan.Batches[0])
	}
}

// Nodes a graceful disruption may not touch stay, and the plan says why.
func TestDecideReportsBlockedNodes(t *testing.T) {
	tc := newTestCluster("100%")
	tc.addNode("m.xlarge", 1, "500m")
	tc.addNode("m.xlarge", 1, "500m")
	tc.addNode("m.xlarge", 1, "500m")
	tc.pods[0].Annotations = map[string]string{v1.DoNotDisruptAnnotationKey: "true"}
	tc.pods[1].Labels = map[string]string{"app": "guarded"}
	tc.pdbs = []policyv1.PodDisruptionBudget{{ObjectMeta: metav1.ObjectMeta{Name: "guarded", Namespace: "default"},
		Spec: policyv1.PodDisruptionBudgetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "guarded"}}}}}
	plan, _ := tc.decide(t)
	why := map[string]string{}
	for _, b := range plan.Blocked {
		why[b.Candidate.Node.Name] = b.Reason
	}
	if !strings.Contains(why["node-0"], "do-not-disrupt") {
		t.Errorf("node-0 (a do-not-disrupt pod): %q", why["node-0"])
	}
	if !strings.Contains(why["node-1"], "pdb default/guarded") {
		t.Errorf("node-1 (a PDB allowing nothing): %q", why["node-1"])
	}
	for _, c := range plan.Remove {
		if c.Node.Name != "node-2" {
			t.Errorf("blocked node %s is in the target", c.Node.Name)
		}
	}
	if len(plan.Remove) != 1 {
		t.Errorf("the free node-2, whose pod fits on the others, is not removed: %v", why["node-2"])
	}
}

// Pods of a node being disrupted already need a place before anything else: the
// room they need is not consolidated away underneath them.
func TestDecidePlacesMovingPodsFirst(t *testing.T) {
	tc := newTestCluster("100%")
	leaving := tc.addNode("m.xlarge", 6, "500m") // 3 cpus moving out
	leaving.Spec.Taints = []corev1.Taint{v1.DisruptedNoScheduleTaint}
	tc.addNode("m.xlarge", 0, "500m") // the room they will take
	plan, cl := tc.decide(t)
	if len(cl.Moving) != 6 {
		t.Fatalf("%d moving pods, want the 6 of the tainted node", len(cl.Moving))
	}
	if len(plan.Remove) != 0 {
		t.Errorf("the empty node the moving pods need is removed: %v", names(plan.Remove))
	}
	// Without them, the empty node goes.
	tc.nodes[0].Spec.Taints = nil
	tc.pods = nil
	plan, _ = tc.decide(t)
	if len(plan.Remove) != 2 {
		t.Errorf("two empty nodes: the target removes %v", names(plan.Remove))
	}
}

// A small node's worth of pods on a large node: the target replaces it with a
// smaller, cheaper node, whose types are narrowed to keep it cheaper.
func TestDecideReplacesWithCheaperNode(t *testing.T) {
	tc := newTestCluster("100%")
	tc.addNode("m.2xlarge", 2, "500m")
	plan, _ := tc.decide(t)
	if len(plan.Remove) != 1 || len(plan.Replacements) != 1 {
		t.Fatalf("removes %v, launches %d; want one node replaced", names(plan.Remove), len(plan.Replacements))
	}
	r := plan.Replacements[0]
	for _, it := range r.InstanceTypeOptions {
		if it.Name == "m.2xlarge" {
			t.Errorf("the replacement may launch %s, the type it replaces", it.Name)
		}
	}
	if plan.Savings() <= 0 {
		t.Errorf("the replacement saves $%.2f/h", plan.Savings())
	}
	if len(plan.Batches) != 1 || len(plan.Batches[0].Replacements) != 1 || plan.Batches[0].Reason != v1.DisruptionReasonUnderutilized {
		t.Errorf("batches %v; want one consolidation batch launching the replacement", plan.Batches)
	}
}

// The informer cache lists objects in no fixed order; equal nodes must be chosen
// the same way every pass, or a batch never holds for the validation delay.
func TestDecideIsStableUnderListOrder(t *testing.T) {
	tc := newTestCluster("50%")
	for i := 0; i < 6; i++ {
		tc.addNode("m.xlarge", 0, "500m")
	}
	first, _ := tc.decide(t)
	want := names(first.Batches[0].Candidates)
	// New slices: the first plan's candidates point into the old ones.
	nodes, claims := tc.nodes, tc.claims
	tc.nodes, tc.claims = nil, nil
	for i := len(nodes) - 1; i >= 0; i-- {
		tc.nodes, tc.claims = append(tc.nodes, nodes[i]), append(tc.claims, claims[i])
	}
	second, _ := tc.decide(t)
	if len(second.Batches) != 1 {
		t.Fatalf("batches %v; want one emptiness batch", second.Batches)
	}
	if a, b := strings.Join(want, ","), strings.Join(names(second.Batches[0].Candidates), ","); a != b {
		t.Errorf("the same cluster listed in another order starts %s instead of %s", b, a)
	}
}

// A PodDisruptionBudget that allows one eviction at a time is not taken past that
// by one batch: of four nodes whose pods share it, the batch starting now drains
// one, and the others wait for later batches with the budget named as the reason.
func TestBatchTakesNoMoreOfAPDBThanItAllows(t *testing.T) {
	tc := newTestCluster("100%")
	for i := 0; i < 4; i++ {
		tc.addNode("m.xlarge", 1, "500m")
	}
	tc.addNode("m.2xlarge", 0, "500m")
	tc.pdbs = []policyv1.PodDisruptionBudget{{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec:   policyv1.PodDisruptionBudgetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}},
		Status: policyv1.PodDisruptionBudgetStatus{DisruptionsAllowed: 1}}}
	plan, _ := tc.decide(t)
	if draining := drainingNow(plan); len(draining) != 1 {
		t.Fatalf("the batches drain %v under a PDB that allows one eviction", draining)
	}
	held := 0
	for _, b := range plan.Blocked {
		if strings.HasPrefix(b.Reason, "pdb default/web allows 1 disruption(s) now") {
			held++
		}
	}
	if want := len(plan.Remove) - 1 - countEmpty(plan.Remove); held != want || want < 1 {
		t.Errorf("%d nodes held by the PDB, want %d (the target removes %v): %v", held, want, names(plan.Remove), plan.Blocked)
	}

	// When the budget allows two, two nodes' pods go at once.
	tc.pdbs[0].Status.DisruptionsAllowed = 2
	plan, _ = tc.decide(t)
	if draining := drainingNow(plan); len(draining) != 2 {
		t.Errorf("the batches drain %v under a PDB that allows two evictions", draining)
	}
}

// drainingNow names the nodes with pods that the plan's batches start on now.
func drainingNow(plan *Plan) []string {
	var out []string
	for _, b := range plan.Batches {
		for _, c := range b.Candidates {
			if !c.Empty() {
				out = append(out, c.Node.Name)
			}
		}
	}
	return out
}

func countEmpty(cands []*Candidate) int {
	n := 0
	for _, c := range cands {
		if c.Empty() {
			n++
		}
	}
	return n
}

// Replan plans exactly the candidates it is given, on the cluster as it is: the
// held part of a replacing batch goes with a plan for its own pods, and a node
// nothing cheaper can hold gets none.
func TestReplanPlansThePartAlone(t *testing.T) {
	tc := newTestCluster("100%")
	tc.addNode("m.2xlarge", 2, "500m")
	tc.addNode("m.2xlarge", 14, "500m")
	_, cl := tc.decide(t)
	var sparse *Candidate
	for _, c := range cl.Candidates {
		if c.Node.Name == "node-0" {
			sparse = c
		}
	}
	b := Replan(cl, []*Candidate{sparse}, nil, Options{Now: testNow})
	if b == nil {
		t.Fatal("no batch for a node whose pods fit on a cheaper one")
	}
	if len(b.Candidates) != 1 || b.Candidates[0] != sparse || b.Type != TypeSingle || b.Reason != v1.DisruptionReasonUnderutilized {
		t.Errorf("batch %s (%s); want node-0 alone, underutilized, single", b, b.Type)
	}
	if price := scheduling.PriceOf(b.Replacements); price >= sparse.Price {
		t.Errorf("replacements cost $%.2f/h, not less than the $%.2f/h node they replace", price, sparse.Price)
	}
	own := sets.New[types.UID]()
	for _, p := range sparse.Pods {
		own.Insert(p.UID)
	}
	for _, r := range b.Replacements {
		for _, p := range r.Pods {
			if !own.Has(p.UID) {
				t.Errorf("the replacement %s takes pod %s of another node", r.Name, p.Name)
			}
		}
	}

	full := newTestCluster("100%")
	full.addNode("m.large", 2, "900m")
	_, cl = full.decide(t)
	if b := Replan(cl, cl.Candidates, nil, Options{Now: testNow}); b != nil {
		t.Errorf("a full node of the cheapest type was replanned as %s", b)
	}
}

// A plan that launches new nodes must save MinReplacementSavings of what it
// removes: a repack saving a few percent is undone by where kube-scheduler puts
// the pods.
func TestReplacementsMustSaveATenth(t *testing.T) {
	typeOf := func(name string, price float64) *scheduling.InstanceType {
		return scheduling.NewInstanceType(name, map[string]string{v1.LabelArch: "amd64", v1.LabelOS: "linux"},
			corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("16Gi"), corev1.ResourcePods: resource.MustParse("110"), corev1.ResourceEphemeralStorage: resource.MustParse("20Gi")},
			[]scheduling.Offering{{Zone: "a", CapacityType: v1.CapacityTypeOnDemand, Price: price, Available: true}}, scheduling.DefaultAllocatableSettings())
	}
	for _, tc := range []struct {
		cheaper float64
		replan  bool
	}{{0.95, false}, {0.85, true}} {
		cluster := newTestCluster("100%")
		cluster.types = []*scheduling.InstanceType{typeOf("m.old", 1.0), typeOf("m.new", tc.cheaper)}
		cluster.addNode("m.old", 3, "1")
		cluster.addNode("m.old", 3, "1")
		_, cl := cluster.decide(t)
		b := Replan(cl, cl.Candidates, nil, Options{Now: testNow})
		if (b != nil) != tc.replan {
			t.Errorf("two $1.00 nodes replaced by two at $%.2f: batch %v, want one: %t", tc.cheaper, b, tc.replan)
		}
	}
}

// Consolidation never launches more nodes than it removes: splitting two large
// nodes into eight small ones would save a fifth as planned, but kube-scheduler
// puts the pods on the emptiest nodes, not where the plan put them, and the
// part-filled small nodes are merged back by the next pass.
func TestConsolidationNeverGrowsTheNodeCount(t *testing.T) {
	sized := func(name, cpu string, price float64) *scheduling.InstanceType {
		return scheduling.NewInstanceType(name, map[string]string{v1.LabelArch: "amd64", v1.LabelOS: "linux"},
			corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse("64Gi"), corev1.ResourcePods: resource.MustParse("110"), corev1.ResourceEphemeralStorage: resource.MustParse("20Gi")},
			[]scheduling.Offering{{Zone: "a", CapacityType: v1.CapacityTypeOnDemand, Price: price, Available: true}}, scheduling.DefaultAllocatableSettings())
	}
	tc := newTestCluster("100%")
	tc.types = []*scheduling.InstanceType{sized("m.big", "16", 1.0), sized("m.small", "4", 0.2)}
	for range 2 {
		n := tc.addNodeIn("m.big", "a", v1.CapacityTypeOnDemand)
		for range 4 {
			tc.addPod(n.Name, "3500m", "1Gi", map[string]string{"app": "web"})
		}
	}
	plan, cl := tc.decide(t)
	if len(plan.Remove) > 0 {
		t.Errorf("removes %v and launches %d; want the two large nodes kept", names(plan.Remove), len(plan.Replacements))
	}
	if b := Replan(cl, cl.Candidates, nil, Options{Now: testNow}); b != nil {
		t.Errorf("replanned as %s; want no batch that launches more nodes than it removes", b)
	}
}

// Full nodes that a cheaper type of the same size would each replace alone go
// together in one plan, not one a pass as Karpenter's single-node decisions do.
func TestNodesReplaceableAloneAreReplacedTogether(t *testing.T) {
	sized := func(name string, price float64) *scheduling.InstanceType {
		return scheduling.NewInstanceType(name, map[string]string{v1.LabelArch: "amd64", v1.LabelOS: "linux"},
			corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("16Gi"), corev1.ResourcePods: resource.MustParse("110"), corev1.ResourceEphemeralStorage: resource.MustParse("20Gi")},
			[]scheduling.Offering{{Zone: "a", CapacityType: v1.CapacityTypeOnDemand, Price: price, Available: true}}, scheduling.DefaultAllocatableSettings())
	}
	tc := newTestCluster("100%")
	tc.types = []*scheduling.InstanceType{sized("m.old", 1.0), sized("m.new", 0.8)}
	for range 3 {
		n := tc.addNodeIn("m.old", "a", v1.CapacityTypeOnDemand)
		tc.addPod(n.Name, "3500m", "12Gi", map[string]string{"app": "web"})
	}
	plan, _ := tc.decide(t)
	if len(plan.Remove) != 3 || len(plan.Replacements) != 3 {
		t.Errorf("removes %v and launches %d; want all three nodes replaced at once", names(plan.Remove), len(plan.Replacements))
	}
	mustPlaceEveryPod(t, plan)
}

// When the rest of the cluster has room for the small pods of only some of the
// nodes each worth replacing alone, as many of them go together as that room and
// no more new nodes than removed allow, rather than one a pass. Six nodes of two
// large and seven small pods each: fourteen nodes pinned to their own pod have
// room for one small pod each, and the other large nodes for two each. All six
// together would need more new nodes than they remove; the best decision of
// Karpenter's shape (one new node) takes two; three fit (an r.4xlarge and an
// r.2xlarge: a repack onto several new nodes may launch a removed node's type
// with other pods, which is not churn).
func TestNodesReplaceableAloneAreReplacedTogetherAsFarAsTheClusterHoldsThem(t *testing.T) {
	sized := func(name, cpu, memory string, price float64) *scheduling.InstanceType {
		return scheduling.NewInstanceType(name, map[string]string{v1.LabelArch: "amd64", v1.LabelOS: "linux"},
			corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(memory), corev1.ResourcePods: resource.MustParse("110"), corev1.ResourceEphemeralStorage: resource.MustParse("20Gi")},
			[]scheduling.Offering{{Zone: "a", CapacityType: v1.CapacityTypeOnDemand, Price: price, Available: true}}, scheduling.DefaultAllocatableSettings())
	}
	tc := newTestCluster("100%")
	tc.types = []*scheduling.InstanceType{sized("r.xlarge", "4", "32Gi", 0.2), sized("r.2xlarge", "8", "64Gi", 0.4), sized("r.4xlarge", "16", "128Gi", 0.8),
		sized("m.4xlarge", "16", "64Gi", 0.6), sized("c.large", "2", "8Gi", 0.09)}
	for range 14 {
		n := tc.addNodeIn("c.large", "a", v1.CapacityTypeOnDemand)
		pinned := tc.addPod(n.Name, "1", "256Mi", map[string]string{"app": "pinned"})
		pinned.Spec.NodeSelector = map[string]string{v1.LabelHostname: n.Name}
	}
	for range 6 {
		n := tc.addNodeIn("r.4xlarge", "a", v1.CapacityTypeOnDemand)
		for range 2 {
			tc.addPod(n.Name, "3500m", "28Gi", map[string]string{"app": "large"})
		}
		for range 7 {
			tc.addPod(n.Name, "900m", "3100Mi", map[string]string{"app": "small"})
		}
	}
	plan, _ := tc.decide(t)
	t.Logf("removes %v, launches %s, saves $%.2f/h", names(plan.Remove), typeNames(plan.Replacements), plan.Savings())
	if len(plan.Remove) < 3 || len(plan.Replacements) > len(plan.Remove) {
		t.Errorf("removes %v and launches %s; want three of the large nodes replaced at once, with no more new nodes than removed", names(plan.Remove), typeNames(plan.Replacements))
	}
	mustPlaceEveryPod(t, plan)
}

// A batch the budget or a PDB cuts from a plan that launches new nodes is planned
// alone: when its pods fit on the nodes that stay, it launches nothing, though the
// plan sends them to a new node. kube-scheduler would put them on the nodes that
// stay (the ones with the most room left) and leave a replacement sized for the
// whole plan empty.
func TestCutBatchIsPlannedOntoTheNodesThatStay(t *testing.T) {
	build := func(budget string, pdbAllows int32) *Plan {
		tc := newTestCluster(budget)
		tc.addNode("m.2xlarge", 1, "1")
		tc.addNode("m.2xlarge", 1, "1")
		tc.addNode("m.2xlarge", 2, "1")
		if pdbAllows > 0 {
			tc.pdbs = []policyv1.PodDisruptionBudget{{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
				Spec:   policyv1.PodDisruptionBudgetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}},
				Status: policyv1.PodDisruptionBudgetStatus{DisruptionsAllowed: pdbAllows}}}
		}
		plan, _ := tc.decide(t)
		return plan
	}
	whole := build("100%", 0)
	if len(whole.Replacements) == 0 || len(whole.Batches) != 1 || len(whole.Batches[0].Replacements) == 0 {
		t.Fatalf("the whole plan removes %v and launches %d in batches %v; want a repack onto new nodes", names(whole.Remove), len(whole.Replacements), whole.Batches)
	}
	for name, plan := range map[string]*Plan{"a budget of one node": build("1", 0), "a PDB allowing one eviction": build("100%", 1)} {
		if len(plan.Batches) != 1 || len(plan.Batches[0].Candidates) != 1 {
			t.Fatalf("%s: batches %v; want one of one node", name, plan.Batches)
		}
		b := plan.Batches[0]
		cand := b.Candidates[0].Node.Name
		// Existing nodes are named node-N; the plan names new ones otherwise.
		toNew := 0
		for _, m := range plan.Moves {
			if m.From == cand && !strings.HasPrefix(m.To, "node-") {
				toNew++
			}
		}
		if toNew == 0 {
			t.Fatalf("%s: the plan sends none of %s's pods to a new node (moves %v); the case tests nothing", name, cand, plan.Moves)
		}
		if len(b.Replacements) != 0 {
			t.Errorf("%s: batch %s launches %d node(s), though its pods fit on the nodes that stay", name, b, len(b.Replacements))
		}
		if b.Reason != v1.DisruptionReasonUnderutilized || b.Type != TypeSingle {
			t.Errorf("%s: batch %s is %s/%s; want Underutilized, single", name, b, b.Reason, b.Type)
		}
	}
}

// A batch planned alone beside an emptiness batch starting with it plans no pod
// onto the empty nodes being removed (node-2 is full, so a new node is the only
// other place).
func TestReplanBesideLeavesTheOtherBatchsNodesOut(t *testing.T) {
	tc := newTestCluster("100%")
	tc.addNode("m.2xlarge", 0, "1")
	tc.addNode("m.2xlarge", 1, "1")
	tc.addNode("m.2xlarge", 7, "1")
	_, cl := tc.decide(t)
	byName := map[string]*Candidate{}
	for _, c := range cl.Candidates {
		byName[c.Node.Name] = c
	}
	empty, sparse := byName["node-0"], byName["node-1"]
	if b := Replan(cl, []*Candidate{sparse}, nil, Options{Now: testNow}); b == nil || len(b.Replacements) != 0 {
		t.Fatalf("alone, node-1's pod goes to the empty node-0 with nothing launched; got %v", b)
	}
	b := Replan(cl, []*Candidate{sparse}, []*Candidate{empty}, Options{Now: testNow})
	if b == nil || len(b.Replacements) != 1 {
		t.Fatalf("beside node-0's removal, node-1's pod needs a new node; got %v", b)
	}
}
