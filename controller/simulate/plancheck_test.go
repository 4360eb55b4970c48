package simulate

import (
	"strings"
	"sync"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/dovetail-sh/dovetail/controller/catalog"
	"github.com/dovetail-sh/dovetail/controller/scheduling"
	"github.com/dovetail-sh/dovetail/controller/scheduling/plancheck"
	"github.com/dovetail-sh/dovetail/controller/scheduling/plancheck/plangen"
)

func simulateUniverse(t testing.TB) *plangen.Universe {
	u, err := plangen.Embedded()
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// asObjects turns a generated engine input into the objects a user's snapshot
// holds: NodePools, pending and bound Pods, DaemonSets, Nodes.
func asObjects(c plangen.Case) *Inputs {
	in := &Inputs{NodePools: c.Input.NodePools}
	in.Pods = append(in.Pods, c.Input.Pods...)
	for _, ds := range c.Input.DaemonSetPods {
		d := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: ds.Name, Namespace: ds.Namespace, UID: types.UID("ds-" + ds.Name)}}
		d.Spec.Template.Spec = ds.Spec
		in.DaemonSets = append(in.DaemonSets, d)
	}
	for _, n := range c.Input.Nodes {
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.Name, Labels: n.Labels}}
		node.Spec.Taints = n.Taints
		node.Spec.ProviderID = "aws:///" + n.Labels[corev1.LabelTopologyZone] + "/i-" + n.Name
		node.Status.Capacity, node.Status.Allocatable = n.Capacity.ToResourceList(), n.Allocatable.ToResourceList()
		node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
		in.Nodes = append(in.Nodes, node)
		for _, p := range n.Pods {
			bound := p.DeepCopy()
			bound.Status.Phase = corev1.PodRunning
			in.BoundPods = append(in.BoundPods, bound)
		}
	}
	return in
}

// TestEverySimulatedPlanHoldsItsPods is TestEveryPlanHoldsItsPods through
// `dovetail simulate`: the generated inputs as objects, read the way a snapshot
// is, planned and checked.
func TestEverySimulatedPlanHoldsItsPods(t *testing.T) {
	u := simulateUniverse(t)
	cases := 500
	if testing.Short() {
		cases = 100
	}
	failed, planned := 0, 0
	for seed := range uint64(cases) {
		vs, claims := simulateCase(t, u, seed, 200)
		if claims > 0 {
			planned++
		}
		if len(vs) > 0 {
			failed++
			if failed <= 5 {
				t.Errorf("seed %d: %d violation(s), first: %s", seed, len(vs), vs[0])
			}
		}
	}
	if failed > 0 {
		t.Errorf("%d of %d simulated cases break the invariant", failed, cases)
	}
	// A check of plans that launch nothing would hold vacuously.
	if planned < cases/2 {
		t.Errorf("only %d of %d cases planned a node", planned, cases)
	}
}

func simulateCase(t testing.TB, u *plangen.Universe, seed uint64, maxTypes int) ([]plancheck.Violation, int) {
	c := u.Generate(seed, maxTypes)
	_, rounds, err := run(asObjects(c), catalogOf(t, c.Input.InstanceTypes[c.Input.NodePools[0].Name]), defaults(), clocktesting.NewFakeClock(fakeNow))
	if err != nil {
		t.Fatalf("seed %d: %v", seed, err)
	}
	return checkRounds(rounds)
}

// checkRounds is the plan checker's violations of every round, and the claims
// the rounds plan.
func checkRounds(rounds []solved) ([]plancheck.Violation, int) {
	var vs []plancheck.Violation
	claims := 0
	for _, r := range rounds {
		vs = append(vs, plancheck.Plan(r.input, r.results)...)
		claims += len(r.results.NodeClaims)
	}
	return vs, claims
}

// FuzzSimulatedPlanHoldsItsPods lets the fuzzer choose the case simulate plans.
func FuzzSimulatedPlanHoldsItsPods(f *testing.F) {
	for _, seed := range []uint64{3, 11, 500} {
		f.Add(seed, uint8(40))
	}
	f.Fuzz(func(t *testing.T, seed uint64, maxTypes uint8) {
		if vs, _ := simulateCase(t, simulateUniverse(t), seed, int(maxTypes)); len(vs) > 0 {
			parts := make([]string, 0, 3)
			for _, v := range vs[:min(3, len(vs))] {
				parts = append(parts, v.String())
			}
			t.Fatalf("%d violation(s): %s", len(vs), strings.Join(parts, "; "))
		}
	})
}

// catalogOf is the universe's catalog (the embedded one in three zones) narrowed to
// the types a case sampled.
func catalogOf(t testing.TB, types []*scheduling.InstanceType) *catalog.File {
	t.Helper()
	cat, err := universeCatalog()
	if err != nil {
		t.Fatal(err)
	}
	names := sets.New[string]()
	for _, it := range types {
		names.Insert(it.Name)
	}
	out := &catalog.File{}
	for _, e := range cat.InstanceTypes {
		if names.Has(e.Name) {
			out.InstanceTypes = append(out.InstanceTypes, e)
		}
	}
	return out
}

// universeCatalog is parsed once: thousands of cases each read it.
var universeCatalog = sync.OnceValues(func() (*catalog.File, error) {
	cat, err := catalog.EmbeddedAWS()
	if err != nil {
		return nil, err
	}
	return cat.InZones([]string{"us-west-2a", "us-west-2b", "us-west-2c"}), nil
})
