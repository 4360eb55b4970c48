package health

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	fakeclient "sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/dovetail-sh/dovetail/controller/apis/scheme"
	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/controller/metrics"
)

var start = time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)

type fixture struct {
	kube     client.Client
	clock    *clocktesting.FakeClock
	recorder *record.FakeRecorder
	ctrl     *Controller
}

// cluster builds a pool of n nodes with claims; unhealthy maps node indexes to
// the condition they break and since when.
func cluster(t *testing.T, n int, budgets []v1.Budget, unhealthy map[int]corev1.NodeCondition) *fixture {
	t.Helper()
	np := &v1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "default"}}
	np.Spec.Disruption.Budgets = budgets
	objs := []client.Object{np}
	for i := range n {
		name := fmt.Sprintf("node-%d", i)
		labels := map[string]string{v1.LabelNodePool: "default", v1.LabelCapacityType: v1.CapacityTypeOnDemand}
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}, Spec: corev1.NodeSpec{ProviderID: "fake:///" + name},
			Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(start.Add(-time.Hour))}}}}
		if cond, ok := unhealthy[i]; ok {
			if cond.Type == corev1.NodeReady {
				node.Status.Conditions = nil
			}
			node.Status.Conditions = append(node.Status.Conditions, cond)
		}
		nc := &v1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: name + "-claim", Labels: labels, Finalizers: []string{v1.TerminationFinalizer}},
			Status: v1.NodeClaimStatus{NodeName: name, ProviderID: "fake:///" + name, ImageID: "ami-1"}}
		objs = append(objs, node, nc)
	}
	clk := clocktesting.NewFakeClock(start)
	kube := fakeclient.NewClientBuilder().WithScheme(scheme.New()).WithObjects(objs...).Build()
	rec := record.NewFakeRecorder(100)
	return &fixture{kube: kube, clock: clk, recorder: rec, ctrl: NewController(kube, clk, rec, AWSRepairPolicies)}
}

func since(t corev1.NodeConditionType, status corev1.ConditionStatus, ago time.Duration) corev1.NodeCondition {
	return corev1.NodeCondition{Type: t, Status: status, LastTransitionTime: metav1.NewTime(start.Add(-ago))}
}

func (f *fixture) reconcile(t *testing.T, node string) time.Duration {
	t.Helper()
	n := &corev1.Node{}
	if err := f.kube.Get(context.Background(), client.ObjectKey{Name: node}, n); err != nil {
		t.Fatal(err)
	}
	res, err := f.ctrl.Reconcile(context.Background(), n)
	if err != nil {
		t.Fatal(err)
	}
	return res.RequeueAfter
}

func (f *fixture) claim(t *testing.T, node string) *v1.NodeClaim {
	t.Helper()
	nc := &v1.NodeClaim{}
	if err := f.kube.Get(context.Background(), client.ObjectKey{Name: node + "-claim"}, nc); err != nil {
		t.Fatal(err)
	}
	return nc
}

func (f *fixture) events() string {
	var b strings.Builder
	for {
		select {
		case e := <-f.recorder.Events:
			b.WriteString(e + "\n")
		default:
			return b.String()
		}
	}
}

// TestNodeRepairAfterTheToleration: a node NotReady for 20 minutes waits out the
// rest of its 30; past it, its claim is deleted at once (the termination
// timestamp set to now, so the drain deletes pods rather than evicting them),
// with the metrics Karpenter counts.
func TestNodeRepairAfterTheToleration(t *testing.T) {
	f := cluster(t, 5, nil, map[int]corev1.NodeCondition{0: since(corev1.NodeReady, corev1.ConditionFalse, 20*time.Minute)})
	if wait := f.reconcile(t, "node-0"); wait != 10*time.Minute {
		t.Fatalf("requeued after %v, want the 10m left of the toleration", wait)
	}
	if f.claim(t, "node-0").DeletionTimestamp != nil {
		t.Fatal("repaired before the toleration ended")
	}
	unhealthy := metrics.NodeClaimsUnhealthyDisrupted.WithLabelValues("ready", "default", v1.CapacityTypeOnDemand, "ami-1", metrics.TerminationModeGraceful)
	before := testutil.ToFloat64(unhealthy)
	f.clock.Step(10 * time.Minute)
	f.reconcile(t, "node-0")
	nc := f.claim(t, "node-0")
	if nc.DeletionTimestamp == nil {
		t.Fatal("not repaired past the toleration")
	}
	if got := nc.Annotations[v1.NodeClaimTerminationTimestampAnnotationKey]; got != f.clock.Now().Format(time.RFC3339) {
		t.Errorf("termination timestamp %q, want now", got)
	}
	if got := testutil.ToFloat64(unhealthy) - before; got != 1 {
		t.Errorf("karpenter_nodeclaims_unhealthy_disrupted_total rose by %v", got)
	}
	if e := f.events(); !strings.Contains(e, "Warning NodeRepair Node node-0 has been Ready=False since") {
		t.Errorf("no repair event:\n%s", e)
	}
	if f.reconcile(t, "node-1"); f.claim(t, "node-1").DeletionTimestamp != nil {
		t.Error("a healthy node was repaired")
	}
}

// TestNodeRepairPolicies: the node monitoring agent's AcceleratedHardwareReady
// tolerates 10 minutes, Ready Unknown 30; a condition of another status, or one
// no policy names, is healthy.
func TestNodeRepairPolicies(t *testing.T) {
	f := cluster(t, 10, nil, map[int]corev1.NodeCondition{
		0: since("AcceleratedHardwareReady", corev1.ConditionFalse, 11*time.Minute),
		1: since(corev1.NodeReady, corev1.ConditionUnknown, 29*time.Minute),
		2: since("KernelReady", corev1.ConditionTrue, 2*time.Hour),
		3: since("SomeVendorReady", corev1.ConditionFalse, 2*time.Hour),
	})
	for node, repaired := range map[string]bool{"node-0": true, "node-1": false, "node-2": false, "node-3": false} {
		f.reconcile(t, node)
		if got := f.claim(t, node).DeletionTimestamp != nil; got != repaired {
			t.Errorf("%s repaired: %v, want %v", node, got, repaired)
		}
	}
}

// TestNodeRepairStopsAtTwentyPercent: with 2 of 5 nodes unhealthy (more than
// ceil(20% of 5) = 1) repairs wait and say why; 1 of 3 (33%, rounded up to 1) goes.
func TestNodeRepairStopsAtTwentyPercent(t *testing.T) {
	bad := since(corev1.NodeReady, corev1.ConditionFalse, time.Hour)
	f := cluster(t, 5, nil, map[int]corev1.NodeCondition{0: bad, 1: bad})
	if wait := f.reconcile(t, "node-0"); wait != BlockedRequeue || f.claim(t, "node-0").DeletionTimestamp != nil {
		t.Fatalf("repaired (or requeued after %v) with 2 of 5 nodes unhealthy", wait)
	}
	if e := f.events(); !strings.Contains(e, "Warning NodeRepairBlocked more than 20% of the nodes of nodepool default are unhealthy (2 of 5)") {
		t.Errorf("no NodeRepairBlocked event:\n%s", e)
	}
	f = cluster(t, 3, nil, map[int]corev1.NodeCondition{0: bad})
	if f.reconcile(t, "node-0"); f.claim(t, "node-0").DeletionTimestamp == nil {
		t.Error("1 of 3 nodes unhealthy was not repaired; the share rounds up")
	}
}

// TestNodeRepairBudgetReasonUnhealthy: a budget naming reason Unhealthy paces
// repairs; a budget without reasons does not hold them (as in Karpenter, where
// repair answers to no budget).
func TestNodeRepairBudgetReasonUnhealthy(t *testing.T) {
	bad := map[int]corev1.NodeCondition{0: since(corev1.NodeReady, corev1.ConditionFalse, time.Hour)}
	f := cluster(t, 5, []v1.Budget{{Nodes: "0", Reasons: []v1.DisruptionReason{v1.DisruptionReasonUnhealthy}}}, bad)
	if f.reconcile(t, "node-0"); f.claim(t, "node-0").DeletionTimestamp != nil {
		t.Error("repaired though a budget for reason Unhealthy allows none")
	}
	if e := f.events(); !strings.Contains(e, "budgets of nodepool default for reason Unhealthy allow no more nodes now") {
		t.Errorf("no event naming the budget:\n%s", e)
	}
	f = cluster(t, 5, []v1.Budget{{Nodes: "0"}}, bad)
	if f.reconcile(t, "node-0"); f.claim(t, "node-0").DeletionTimestamp == nil {
		t.Error("a budget without reasons held a repair")
	}
}
