package disruption

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/controller/consolidation"
	"github.com/dovetail-sh/dovetail/controller/metrics"
	"github.com/dovetail-sh/dovetail/controller/scheduling"
)

// deletingClaims counts the claims being deleted, and removes their finalizers so
// the next pass sees them gone (as termination would, once drained).
func deletingClaims(t *testing.T, kube client.Client, finish bool) int {
	t.Helper()
	ctx := context.Background()
	var list v1.NodeClaimList
	if err := kube.List(ctx, &list); err != nil {
		t.Fatal(err)
	}
	n := 0
	for i := range list.Items {
		nc := &list.Items[i]
		if nc.DeletionTimestamp == nil {
			continue
		}
		n++
		if finish {
			nc.Finalizers = nil
			if err := kube.Update(ctx, nc); err != nil {
				t.Fatal(err)
			}
		}
	}
	return n
}

// Four empty nodes under a 50% budget go two at a time: two are deleted together
// once the decision has held for the validation delay, no more while they are
// being deleted, and then the budget of what is left.
func TestEmptyNodesGoInBudgetSizedBatches(t *testing.T) {
	var objs []client.Object
	for i := 0; i < 3; i++ {
		nc, node := initializedClaim(fmt.Sprintf("spare-%d", i), time.Date(2026, 11, 23, 11, 0, 0, 0, time.UTC))
		objs = append(objs, nc, node)
	}
	f := newRestartFixture(t, nil, false, objs, interceptor.Funcs{})
	recorder := record.NewFakeRecorder(100)
	f.ctrl.recorder = recorder
	f.removeEmptyNodesAtOnce(t)
	pool := &v1.NodePool{}
	if err := f.kube.Get(context.Background(), client.ObjectKey{Name: "default"}, pool); err != nil {
		t.Fatal(err)
	}
	pool.Spec.Disruption.Budgets = []v1.Budget{{Nodes: "50%"}}
	if err := f.kube.Update(context.Background(), pool); err != nil {
		t.Fatal(err)
	}
	if err := f.reconcile(t); err != nil {
		t.Fatal(err)
	}
	if n := deletingClaims(t, f.kube, false); n != 0 {
		t.Fatalf("%d nodes deleted before the validation delay", n)
	}
	byPool := metrics.VoluntaryDisruptionDecisionsByNodePool.WithLabelValues("default", "delete", "empty", consolidation.TypeEmpty)
	decided := testutil.ToFloat64(byPool)
	f.clock.Step(DefaultOptions().ValidationDelay + time.Second)
	if err := f.reconcile(t); err != nil {
		t.Fatal(err)
	}
	if n := deletingClaims(t, f.kube, false); n != 2 {
		t.Fatalf("%d of four empty nodes deleted in the first batch, want 2 (50%%)", n)
	}
	if got := testutil.ToFloat64(byPool) - decided; got != 1 {
		t.Errorf("decisions by nodepool rose by %v, want 1 (one decision of the default pool)", got)
	}
	// The deleted claims say why they go, for termination's drain metrics.
	var claims v1.NodeClaimList
	if err := f.kube.List(context.Background(), &claims); err != nil {
		t.Fatal(err)
	}
	for _, nc := range claims.Items {
		if c := meta.FindStatusCondition(nc.Status.Conditions, v1.ConditionTypeDisruptionReason); nc.DeletionTimestamp != nil && (c == nil || c.Reason != "Empty") {
			t.Errorf("deleted claim %s has DisruptionReason %+v, want Empty", nc.Name, c)
		}
	}
	events := drain(recorder)
	if !strings.Contains(events, "DisruptionTerminating") || !strings.Contains(events, "plan ") || !strings.Contains(events, "saving $") {
		t.Errorf("the disrupted nodes' events do not name the plan and its savings:\n%s", events)
	}
	f.clock.Step(DefaultOptions().ValidationDelay + time.Second)
	if err := f.reconcile(t); err != nil {
		t.Fatal(err)
	}
	if got := testutil.ToFloat64(metrics.NodePoolNodesConsumingBudgets.WithLabelValues("default", "empty")); got != 2 {
		t.Errorf("nodes consuming the budget %v, want the 2 being deleted", got)
	}
	if n := deletingClaims(t, f.kube, true); n != 2 {
		t.Fatalf("%d nodes deleting while the first batch of two is; the budget allows no more", n)
	}
	for i := 0; i < 2; i++ {
		if err := f.reconcile(t); err != nil {
			t.Fatal(err)
		}
		f.clock.Step(DefaultOptions().ValidationDelay + time.Second)
	}
	// Two nodes left: 50% is one at a time.
	if n := deletingClaims(t, f.kube, false); n != 1 {
		t.Errorf("%d of the two nodes left deleted in the next batch, want 1 (50%%)", n)
	}
}

func drain(r *record.FakeRecorder) string {
	var b strings.Builder
	for {
		select {
		case e := <-r.Events:
			b.WriteString(e + "\n")
		default:
			return b.String()
		}
	}
}

// A batch that launches nothing may go in part (the nodes proposed a validation
// delay ago); one whose replacements are sized for all its nodes goes whole, or
// its held part goes as planned afresh for that part alone.
func TestHeldPart(t *testing.T) {
	cand := func(name string) *candidate {
		nc, node := initializedClaim(name, time.Now())
		return &candidate{Claim: nc, Node: node}
	}
	a, b, c := cand("a"), cand("b"), cand("c")
	proposed := sets.New("a", "b")
	var replanned [][]*candidate
	replanOnly := &consolidation.Batch{Reason: v1.DisruptionReasonUnderutilized, Type: consolidation.TypeSingle}
	replan := func(held []*candidate) *consolidation.Batch {
		replanned = append(replanned, held)
		return replanOnly
	}
	deletion := &consolidation.Batch{Reason: v1.DisruptionReasonUnderutilized, Type: consolidation.TypeMulti, Candidates: []*candidate{b, c}}
	if part := heldPart(deletion, proposed, replan); part == nil || len(part.Candidates) != 1 || part.Candidates[0] != b || part.Type != consolidation.TypeSingle {
		t.Errorf("deletion batch {b, c} after proposing {a, b}: %v, want {b} alone", part)
	}
	if len(replanned) != 0 {
		t.Errorf("a deletion was planned again for %v; its part needs no new plan", replanned)
	}
	replacing := &consolidation.Batch{Reason: v1.DisruptionReasonUnderutilized, Type: consolidation.TypeMulti, Candidates: []*candidate{b, c},
		Replacements: []*scheduling.NodeClaimPlan{{}}}
	if part := heldPart(replacing, proposed, replan); part != replanOnly || len(replanned) != 1 || len(replanned[0]) != 1 || replanned[0][0] != b {
		t.Errorf("a replacing batch {b, c} after proposing {a, b}: went as %v, planned again for %v; want the plan for {b} alone", part, replanned)
	}
	whole := &consolidation.Batch{Reason: v1.DisruptionReasonEmpty, Type: consolidation.TypeEmpty, Candidates: []*candidate{a, b}}
	if part := heldPart(whole, proposed, replan); part != whole {
		t.Errorf("a batch proposed whole did not go whole: %v", part)
	}
	replanned = nil
	never := &consolidation.Batch{Candidates: []*candidate{c}, Replacements: []*scheduling.NodeClaimPlan{{}}}
	if part := heldPart(never, proposed, replan); part != nil || len(replanned) != 0 {
		t.Errorf("a batch of nodes never proposed went: %v (planned again for %v)", part, replanned)
	}
}

// The metrics Karpenter's suite checks for a consolidation that deletes a node: the
// eligible nodes by reason, the decision (delete, underutilized, single) overall
// and by nodepool, and the disrupted claim. The node's one pod has no controller:
// it is evicted like any other, with a Warning event saying it will not come back.
func TestDecisionMetrics(t *testing.T) {
	keep, keepNode := initializedClaim("keep", time.Date(2026, 11, 23, 11, 0, 0, 0, time.UTC))
	pod := func(name, node string, owned bool) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID(name + "-uid")},
			Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("128Mi")}}}}},
			Status: corev1.PodStatus{Phase: corev1.PodRunning}}
		if owned {
			controller := true
			p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web", UID: "rs", Controller: &controller}}
		}
		return p
	}
	f := newRestartFixture(t, nil, false, []client.Object{keep, keepNode, pod("kept", keepNode.Name, true), pod("kept-too", keepNode.Name, true), pod("bare", "old-node", false)}, interceptor.Funcs{})
	recorder := record.NewFakeRecorder(100)
	f.ctrl.recorder = recorder
	ctx := context.Background()
	pool := &v1.NodePool{}
	if err := f.kube.Get(ctx, client.ObjectKey{Name: "default"}, pool); err != nil {
		t.Fatal(err)
	}
	pool.Spec.Disruption.ConsolidationPolicy = v1.ConsolidationPolicyWhenEmptyOrUnderutilized
	pool.Spec.Disruption.ConsolidateAfter = v1.MustParseNillableDuration("0s")
	pool.Spec.Disruption.Budgets = []v1.Budget{{Nodes: "100%"}}
	if err := f.kube.Update(ctx, pool); err != nil {
		t.Fatal(err)
	}
	decisions := metrics.VoluntaryDisruptionDecisions.WithLabelValues("delete", "underutilized", consolidation.TypeSingle)
	byPool := metrics.VoluntaryDisruptionDecisionsByNodePool.WithLabelValues("default", "delete", "underutilized", consolidation.TypeSingle)
	disrupted := metrics.NodeClaimsDisrupted.WithLabelValues("underutilized", "default", v1.CapacityTypeOnDemand, "when_empty_or_underutilized", metrics.TerminationModeGraceful)
	podsDisrupted := metrics.PodsDisruptionInitiated.WithLabelValues("underutilized", "default", v1.CapacityTypeOnDemand, "when_empty_or_underutilized", metrics.TerminationModeGraceful)
	before := []float64{testutil.ToFloat64(decisions), testutil.ToFloat64(byPool), testutil.ToFloat64(disrupted), testutil.ToFloat64(podsDisrupted)}
	if err := f.reconcile(t); err != nil {
		t.Fatal(err)
	}
	for reason, want := range map[string]float64{"underutilized": 2, "empty": 0, "drifted": 0} {
		if got := testutil.ToFloat64(metrics.VoluntaryDisruptionEligibleNodes.WithLabelValues(reason)); got != want {
			t.Errorf("eligible nodes for %s: %v, want %v", reason, got, want)
		}
	}
	f.clock.Step(DefaultOptions().ValidationDelay + time.Second)
	if err := f.reconcile(t); err != nil {
		t.Fatal(err)
	}
	if nc := f.oldClaim(t); nc != nil && nc.DeletionTimestamp == nil {
		t.Fatal("the node whose one pod fits on the other was not deleted")
	}
	after := []float64{testutil.ToFloat64(decisions), testutil.ToFloat64(byPool), testutil.ToFloat64(disrupted), testutil.ToFloat64(podsDisrupted)}
	// The node's one pod is the disruption Karpenter v1.15 counts per pod.
	for i, name := range []string{"decisions", "decisions by nodepool", "nodeclaims disrupted", "pod disruptions initiated"} {
		if got := after[i] - before[i]; got != 1 {
			t.Errorf("%s rose by %v, want 1", name, got)
		}
	}
	if events := drain(recorder); !strings.Contains(events, "Warning Disrupted Node old-node is being disrupted (Underutilized); the pod will be evicted and, with no controller to recreate it, not come back") {
		t.Errorf("no Warning event on the pod without a controller:\n%s", events)
	}
}
