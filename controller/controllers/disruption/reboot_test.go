package disruption

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	dtaws "github.com/dovetail-sh/dovetail/controller/cloudprovider/aws"
	"github.com/dovetail-sh/dovetail/controller/metrics"
	"github.com/dovetail-sh/dovetail/controller/repair"
)

// gpuFaultNode is an initialized node whose GPU reported XID 48 (a fault a reboot
// clears) since the time, with one pod.
func gpuFaultNode(since time.Time) []client.Object {
	objs := sickNode("gpu", since, true)
	node := objs[1].(*corev1.Node)
	node.Status.Conditions = []corev1.NodeCondition{
		{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(repairNow.Add(-2 * time.Hour))},
		{Type: "AcceleratedHardwareReady", Status: corev1.ConditionFalse, Reason: "NvidiaXID48Error", LastTransitionTime: metav1.NewTime(since)},
	}
	return objs
}

// newRebootFixture repairs by AWS's policies with RebootForRepair on.
func newRebootFixture(t *testing.T, objs ...client.Object) *repairFixture {
	t.Helper()
	f := newRepairFixture(t, nil, objs...)
	matcher, err := repair.NewMatcher(dtaws.RepairPolicies(true), sets.New(repair.Replace, repair.Reboot))
	if err != nil {
		t.Fatal(err)
	}
	f.ctrl.opts.Repair = matcher
	return f
}

// endReboot is the reboot controller finishing the node's reboot at the time.
func (f *repairFixture) endReboot(t *testing.T, at time.Time) {
	t.Helper()
	nc := f.claim(t, "gpu")
	meta.SetStatusCondition(&nc.Status.Conditions, metav1.Condition{Type: v1.ConditionTypeRebooting, Status: metav1.ConditionFalse, Reason: v1.RebootSucceeded,
		LastTransitionTime: metav1.NewTime(at)})
	if err := f.kube.Status().Update(context.Background(), nc); err != nil {
		t.Fatal(err)
	}
}

// Karpenter v1.15's repair with RebootForRepair: a fault a reboot clears commits a
// reboot (no replacement, nothing deleted, the policy's 5-minute bound kept for the
// reboot controller), counted as decision "reboot"; a node rebooting is left alone;
// the fault's toleration starts again when a reboot ends; and after two reboots in
// a day the third repair replaces the node.
func TestRepairRebootsInPlace(t *testing.T) {
	decisions := testutil.ToFloat64(metrics.VoluntaryDisruptionDecisions.WithLabelValues("reboot", "unhealthy", ""))
	f := newRebootFixture(t, gpuFaultNode(repairNow.Add(-11*time.Minute))...)
	f.reconcile(t)
	nc := f.claim(t, "gpu")
	cond := meta.FindStatusCondition(nc.Status.Conditions, v1.ConditionTypeRebooting)
	if deleting(nc) || len(f.replacements(t, "gpu")) != 0 || cond == nil || cond.Status != metav1.ConditionTrue || cond.Reason != v1.RebootRequested {
		t.Fatalf("deleting %v, %d replacements, Rebooting %+v; want a reboot requested and nothing else", deleting(nc), len(f.replacements(t, "gpu")), cond)
	}
	if nc.Annotations[v1.RebootTerminationGracePeriodAnnotationKey] != "5m0s" {
		t.Errorf("reboot drain bound %q, want the policy's 5m0s", nc.Annotations[v1.RebootTerminationGracePeriodAnnotationKey])
	}
	if r := meta.FindStatusCondition(nc.Status.Conditions, v1.ConditionTypeDisruptionReason); r == nil || r.Reason != string(v1.DisruptionReasonUnhealthy) {
		t.Errorf("DisruptionReason %+v, want Unhealthy", r)
	}
	if got := testutil.ToFloat64(metrics.VoluntaryDisruptionDecisions.WithLabelValues("reboot", "unhealthy", "")) - decisions; got != 1 {
		t.Errorf("karpenter_voluntary_disruption_decisions_total{decision=reboot} rose by %v, want 1", got)
	}
	// While it reboots, nothing else happens to it.
	f.clock.Step(time.Minute)
	f.reconcile(t)
	if deleting(f.claim(t, "gpu")) || len(f.replacements(t, "gpu")) != 0 {
		t.Fatal("a rebooting node was repaired again")
	}

	// The reboot ends; the fault is still reported: tolerated 10 minutes afresh.
	f.endReboot(t, f.clock.Now())
	f.clock.Step(9 * time.Minute)
	f.reconcile(t)
	if f.claim(t, "gpu").Rebooting() {
		t.Fatal("rebooted again 9 minutes after the last reboot ended; the toleration is 10")
	}
	f.clock.Step(2 * time.Minute)
	f.reconcile(t)
	if !f.claim(t, "gpu").Rebooting() || deleting(f.claim(t, "gpu")) {
		t.Fatal("a second reboot was not committed once the toleration ran out again")
	}
	f.endReboot(t, f.clock.Now())
	f.clock.Step(11 * time.Minute)
	f.reconcile(t)
	if f.claim(t, "gpu").Rebooting() || len(f.replacements(t, "gpu")) != 1 {
		t.Fatalf("the third repair within a day: rebooting %v, %d replacements; want it replaced", f.claim(t, "gpu").Rebooting(), len(f.replacements(t, "gpu")))
	}
}
