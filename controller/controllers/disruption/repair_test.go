package disruption

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/dovetail-sh/dovetail/controller/apis/scheme"
	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	dtaws "github.com/dovetail-sh/dovetail/controller/cloudprovider/aws"
	"github.com/dovetail-sh/dovetail/controller/controllers/provisioning"
	"github.com/dovetail-sh/dovetail/controller/metrics"
	"github.com/dovetail-sh/dovetail/controller/repair"
	"github.com/dovetail-sh/dovetail/controller/scheduling"
	"github.com/dovetail-sh/dovetail/controller/state"
)

// repairFixture is a pool of nodes, some of them NotReady, with the controller
// repairing by Karpenter v1.15's AWS policies (NotReady for 30 minutes: replace, a
// 10-minute drain).
type repairFixture struct {
	kube     client.Client
	clock    *clocktesting.FakeClock
	ctrl     *Controller
	recorder *record.FakeRecorder
}

var repairNow = time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)

// repairCloud offers one type that holds the test's pods.
type repairCloud struct{ pricedCloud }

func (repairCloud) GetInstanceTypes(context.Context, *v1.NodePool) ([]*scheduling.InstanceType, error) {
	return []*scheduling.InstanceType{scheduling.NewInstanceType("m.large", map[string]string{v1.LabelArch: "amd64"},
		corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("8Gi"), corev1.ResourcePods: resource.MustParse("29"),
			corev1.ResourceEphemeralStorage: resource.MustParse("20Gi")},
		[]scheduling.Offering{{Zone: "a", CapacityType: v1.CapacityTypeOnDemand, Price: 0.1, Available: true}}, scheduling.DefaultAllocatableSettings())}, nil
}

// sickNode is an initialized claim whose node has been Ready=False since the time;
// with pods, one small pod of a ReplicaSet runs on it.
func sickNode(name string, since time.Time, pods bool) []client.Object {
	nc, node := initializedClaim(name, repairNow.Add(-2*time.Hour))
	node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionFalse, Reason: "KubeletNotReady", LastTransitionTime: metav1.NewTime(since)}}
	objs := []client.Object{nc, node}
	if pods {
		yes := true
		objs = append(objs, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name + "-app", Namespace: "default", UID: k8stypes.UID("uid-" + name),
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "app", UID: "rs", Controller: &yes}}},
			Spec: corev1.PodSpec{NodeName: node.Name, Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("512Mi")}}}}},
			Status: corev1.PodStatus{Phase: corev1.PodRunning}})
	}
	return objs
}

func healthyNode(name string) []client.Object {
	nc, node := initializedClaim(name, repairNow.Add(-2*time.Hour))
	node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(repairNow.Add(-2 * time.Hour))}}
	// Full, so no pod of a sick node moves here.
	node.Status.Allocatable = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("0"), corev1.ResourceMemory: resource.MustParse("0"), corev1.ResourcePods: resource.MustParse("0")}
	return []client.Object{nc, node}
}

func newRepairFixture(t *testing.T, pool *v1.NodePool, objs ...client.Object) *repairFixture {
	t.Helper()
	clk := clocktesting.NewFakeClock(repairNow)
	if pool == nil {
		pool = &v1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "default"}}
	}
	kube := fake.NewClientBuilder().WithScheme(scheme.New()).WithStatusSubresource(&v1.NodeClaim{}, &v1.NodePool{}).
		WithObjects(append([]client.Object{pool}, objs...)...).Build()
	recorder := record.NewFakeRecorder(1000)
	prov := provisioning.NewProvisioner(kube, state.NewCluster(kube, clk), repairCloud{}, clk, recorder,
		provisioning.NewBatcher(clk, time.Second, 10*time.Second), scheduling.DefaultNodeCosts())
	matcher, err := repair.NewMatcher(dtaws.RepairPolicies(false), sets.New(repair.Replace))
	if err != nil {
		t.Fatal(err)
	}
	opts := DefaultOptions()
	opts.Repair = matcher
	return &repairFixture{kube: kube, clock: clk, recorder: recorder, ctrl: NewController(kube, repairCloud{}, prov, clk, recorder, opts)}
}

func (f *repairFixture) reconcile(t *testing.T) {
	t.Helper()
	if err := f.ctrl.Reconcile(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func (f *repairFixture) claim(t *testing.T, name string) *v1.NodeClaim {
	t.Helper()
	nc := &v1.NodeClaim{}
	if err := f.kube.Get(context.Background(), client.ObjectKey{Name: name}, nc); err != nil {
		return nil
	}
	return nc
}

// replacements are the claims the controller launched.
func (f *repairFixture) replacements(t *testing.T, existing ...string) []*v1.NodeClaim {
	t.Helper()
	var list v1.NodeClaimList
	if err := f.kube.List(context.Background(), &list); err != nil {
		t.Fatal(err)
	}
	known := sets.New(existing...)
	var out []*v1.NodeClaim
	for i := range list.Items {
		if !known.Has(list.Items[i].Name) {
			out = append(out, &list.Items[i])
		}
	}
	return out
}

func (f *repairFixture) events() []string {
	var out []string
	for {
		select {
		case e := <-f.recorder.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

func deleting(nc *v1.NodeClaim) bool { return nc == nil || nc.DeletionTimestamp != nil }

func claimNames(n int) []string {
	var out []string
	for i := range n {
		out = append(out, fmt.Sprintf("healthy-%d", i))
	}
	return out
}

// The node's replacement launches first; the node goes only once it has
// initialized, its drain bounded by the policy's 10 minutes, and the repair counted
// as Karpenter counts it.
func TestRepairReplacesFirstAndBoundsTheDrain(t *testing.T) {
	f := newRepairFixture(t, nil, sickNode("sick", repairNow.Add(-31*time.Minute), true)...)
	counted := testutil.ToFloat64(metrics.NodeClaimsUnhealthyDisrupted.WithLabelValues("ready", "default", v1.CapacityTypeOnDemand, "", metrics.TerminationModeEventual))
	f.reconcile(t)
	launched := f.replacements(t, "sick")
	if len(launched) != 1 {
		t.Fatalf("%d replacements launched, want 1", len(launched))
	}
	if deleting(f.claim(t, "sick")) {
		t.Fatal("the unhealthy node went before its replacement initialized")
	}
	f.clock.Step(time.Minute)
	f.reconcile(t)
	if deleting(f.claim(t, "sick")) {
		t.Fatal("the unhealthy node went before its replacement initialized")
	}
	if d := state.Recorded(f.claim(t, "sick")); d == nil || d.DrainBound == nil || d.DrainBound.Duration != 10*time.Minute || d.Condition != "Ready" {
		t.Fatalf("the disruption record %+v does not carry the repair's drain bound and condition", d)
	}
	// A restart here must still bound the drain: the bound is read from the record.
	f.ctrl = NewController(f.kube, repairCloud{}, f.ctrl.provisioner, f.clock, f.recorder, f.ctrl.opts)
	replacement := launched[0].DeepCopy()
	meta.SetStatusCondition(&replacement.Status.Conditions, metav1.Condition{Type: v1.ConditionTypeInitialized, Status: metav1.ConditionTrue, Reason: "Initialized", LastTransitionTime: metav1.NewTime(f.clock.Now())})
	if err := f.kube.Status().Update(context.Background(), replacement); err != nil {
		t.Fatal(err)
	}
	f.reconcile(t)
	sick := f.claim(t, "sick")
	if !deleting(sick) {
		t.Fatal("the unhealthy node stays though its replacement initialized")
	}
	if sick != nil {
		want := f.clock.Now().Add(10 * time.Minute).UTC().Format(time.RFC3339)
		if got := sick.Annotations[v1.NodeClaimTerminationTimestampAnnotationKey]; got != want {
			t.Errorf("termination deadline %q, want %q: the policy's 10-minute drain bound from now", got, want)
		}
	}
	if got := testutil.ToFloat64(metrics.NodeClaimsUnhealthyDisrupted.WithLabelValues("ready", "default", v1.CapacityTypeOnDemand, "", metrics.TerminationModeEventual)) - counted; got != 1 {
		t.Errorf("karpenter_nodeclaims_unhealthy_disrupted_total{condition=ready,termination_mode=eventual} rose by %v, want 1", got)
	}
}

// A node with nothing to move is deleted at once, with no replacement; a node
// within its toleration is left alone.
func TestRepairDeletesAnEmptyNodeAndWaitsOutTheToleration(t *testing.T) {
	f := newRepairFixture(t, nil, sickNode("empty", repairNow.Add(-31*time.Minute), false)...)
	f.reconcile(t)
	if !deleting(f.claim(t, "empty")) || len(f.replacements(t, "empty")) != 0 {
		t.Errorf("the empty unhealthy node: deleting %v, replacements %d; want deleted with none", deleting(f.claim(t, "empty")), len(f.replacements(t, "empty")))
	}
	f = newRepairFixture(t, nil, sickNode("recent", repairNow.Add(-29*time.Minute), true)...)
	f.reconcile(t)
	if deleting(f.claim(t, "recent")) || len(f.replacements(t, "recent")) != 0 {
		t.Error("a node NotReady for 29 minutes was repaired before its 30-minute toleration")
	}
}

// healthyNodes keeps a pool's unhealthy share under 20%.
func healthyNodes(n int) []client.Object {
	var out []client.Object
	for i := range n {
		out = append(out, healthyNode(fmt.Sprintf("healthy-%d", i))...)
	}
	return out
}

// What holds repair, each saying why on the node: karpenter.sh/do-not-repair, a
// budget of 0 for an initialized node (not for one that never initialized), and a
// pool more than 20% unhealthy.
func TestRepairIsHeld(t *testing.T) {
	long := repairNow.Add(-time.Hour)
	t.Run("do-not-repair", func(t *testing.T) {
		objs := sickNode("vetoed", long, true)
		objs[1].(*corev1.Node).Annotations = map[string]string{v1.DoNotRepairAnnotationKey: "true"}
		f := newRepairFixture(t, nil, objs...)
		f.reconcile(t)
		if deleting(f.claim(t, "vetoed")) || len(f.replacements(t, "vetoed")) != 0 {
			t.Fatal("a node annotated do-not-repair was repaired")
		}
		if !containsEvent(f.events(), `repair is blocked through the "karpenter.sh/do-not-repair" annotation`) {
			t.Error("no event says why")
		}
	})
	t.Run("node-level do-not-disrupt does not hold repair", func(t *testing.T) {
		objs := sickNode("pinned", long, false)
		objs[1].(*corev1.Node).Annotations = map[string]string{v1.DoNotDisruptAnnotationKey: "true"}
		f := newRepairFixture(t, nil, objs...)
		f.reconcile(t)
		if !deleting(f.claim(t, "pinned")) {
			t.Error("a node's do-not-disrupt held its repair; in Karpenter only do-not-repair does")
		}
	})
	t.Run("a budget of 0", func(t *testing.T) {
		pool := &v1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "default"}}
		pool.Spec.Disruption.Budgets = []v1.Budget{{Nodes: "0"}}
		uninitialized := sickNode("never-ready", long, false)
		uninitialized[0].(*v1.NodeClaim).Status.Conditions = []metav1.Condition{{Type: v1.ConditionTypeRegistered, Status: metav1.ConditionTrue, Reason: "Registered", LastTransitionTime: metav1.NewTime(long)}}
		f := newRepairFixture(t, pool, append(append(sickNode("sick", long, true), uninitialized...), healthyNodes(8)...)...)
		// One repair a pass: two passes look at both nodes.
		f.reconcile(t)
		f.reconcile(t)
		if deleting(f.claim(t, "sick")) || len(f.replacements(t, append(claimNames(8), "sick", "never-ready")...)) != 0 {
			t.Error("a budget of 0 nodes did not hold an initialized node's repair")
		}
		if !containsEvent(f.events(), "No allowed disruptions for disruption reason Unhealthy") {
			t.Error("no event says the budget holds it")
		}
		if !deleting(f.claim(t, "never-ready")) {
			t.Error("a node that never initialized waits on the budget; it serves nothing, and Karpenter repairs it regardless")
		}
	})
	t.Run("more than 20% of the pool unhealthy", func(t *testing.T) {
		objs := append(append(sickNode("a", long, false), sickNode("b", long, false)...), healthyNode("c")...)
		f := newRepairFixture(t, nil, objs...)
		f.reconcile(t)
		if deleting(f.claim(t, "a")) || deleting(f.claim(t, "b")) {
			t.Error("2 of 3 nodes unhealthy (over 20%, rounded up to 1) and one was repaired")
		}
		if !containsEvent(f.events(), `more than 20% of nodes in nodepool "default" are unhealthy`) {
			t.Error("no event says why")
		}
	})
}

// An earlier deadline someone else set (an interruption) is kept.
func TestRepairNeverExtendsADeadline(t *testing.T) {
	objs := sickNode("sick", repairNow.Add(-time.Hour), false)
	earlier := repairNow.Add(time.Minute).UTC().Format(time.RFC3339)
	objs[0].(*v1.NodeClaim).Annotations = map[string]string{v1.NodeClaimTerminationTimestampAnnotationKey: earlier}
	f := newRepairFixture(t, nil, objs...)
	f.reconcile(t)
	sick := f.claim(t, "sick")
	if !deleting(sick) {
		t.Fatal("not repaired")
	}
	if sick != nil && sick.Annotations[v1.NodeClaimTerminationTimestampAnnotationKey] != earlier {
		t.Errorf("deadline %q, want the earlier %q kept", sick.Annotations[v1.NodeClaimTerminationTimestampAnnotationKey], earlier)
	}
}

func containsEvent(events []string, text string) bool {
	return slices.ContainsFunc(events, func(e string) bool { return strings.Contains(e, text) })
}
