package disruption

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/controller/repair"
	"github.com/dovetail-sh/dovetail/controller/state"
)

// repairSuiteCase is one behaviour Karpenter v1.15's disruption suite checks of
// repair (kubernetes-sigs/karpenter pkg/controllers/disruption/repair_test.go and
// repair_terminatefirst_test.go), as our own scenario. Cases its suite checks that
// other tests of ours hold already are named in TestKarpenterRepairSuite's comment.
type repairSuiteCase struct {
	// karpenter is the test's file:line in Karpenter v1.15.0 and its title.
	karpenter string
	run       func(t *testing.T)
}

// unboundedPolicies are repair policies with no termination grace period of their
// own, which AWS's all have: NotReady for 30 minutes replaces, XID 48 for 10
// minutes reboots.
func unboundedPolicies(t *testing.T, f *repairFixture, drainBound *time.Duration) {
	t.Helper()
	m, err := repair.NewMatcher([]repair.Policy{
		{ConditionType: corev1.NodeReady, ConditionStatus: corev1.ConditionFalse, Toleration: 30 * time.Minute, TerminationGracePeriod: drainBound, Action: repair.Replace},
		{ConditionType: "AcceleratedHardwareReady", ConditionStatus: corev1.ConditionFalse, ReasonRegex: "^NvidiaXID48Error$", Toleration: 10 * time.Minute,
			TerminationGracePeriod: drainBound, Priority: 50, Action: repair.Reboot},
	}, sets.New(repair.Replace, repair.Reboot))
	if err != nil {
		t.Fatal(err)
	}
	f.ctrl.opts.Repair = m
}

// blockingPod is a pod annotated karpenter.sh/do-not-disrupt on the node.
func blockingPod(objs []client.Object) []client.Object {
	for _, o := range objs {
		if p, ok := o.(*corev1.Pod); ok {
			p.Annotations = map[string]string{v1.DoNotDisruptAnnotationKey: "true"}
		}
	}
	return objs
}

// registeredOnly makes the sick node's claim registered but never initialized.
func registeredOnly(objs []client.Object) []client.Object {
	objs[0].(*v1.NodeClaim).Status.Conditions = []metav1.Condition{{Type: v1.ConditionTypeRegistered, Status: metav1.ConditionTrue, Reason: "Registered",
		LastTransitionTime: metav1.NewTime(repairNow.Add(-2 * time.Hour))}}
	return objs
}

func annotateNode(objs []client.Object, key, value string) []client.Object {
	objs[1].(*corev1.Node).Annotations = map[string]string{key: value}
	return objs
}

func mustNotRepair(t *testing.T, f *repairFixture, name string, existing ...string) {
	t.Helper()
	if deleting(f.claim(t, name)) || len(f.replacements(t, append(existing, name)...)) != 0 || f.claim(t, name).Rebooting() {
		t.Fatalf("%s was repaired (deleting %v, %d launched)", name, deleting(f.claim(t, name)), len(f.replacements(t, append(existing, name)...)))
	}
}

func mustRepair(t *testing.T, f *repairFixture, name string, existing ...string) {
	t.Helper()
	if !deleting(f.claim(t, name)) && len(f.replacements(t, append(existing, name)...)) == 0 {
		t.Fatalf("%s was not repaired; events %v", name, f.events())
	}
}

func mustSay(t *testing.T, events []string, text string) {
	t.Helper()
	if !containsEvent(events, text) {
		t.Errorf("events %v do not say %q", events, text)
	}
}

// TestKarpenterRepairSuite holds repair as a disruption method to the behaviours
// Karpenter v1.15's disruption suite checks, with Reconcile on a fake clock. The
// suite's other repair cases are ours elsewhere:
//   - replacement first, empty nodes, toleration, do-not-repair, node-level
//     do-not-disrupt, a budget of 0, the 20% breaker, an earlier deadline kept:
//     TestRepairReplacesFirstAndBoundsTheDrain, TestRepairDeletesAnEmptyNodeAndWaitsOutTheToleration,
//     TestRepairIsHeld, TestRepairNeverExtendsADeadline;
//   - reboots, their history and escalation: TestRepairRebootsInPlace,
//     repair.TestRebootHistoryEscalatesTheThirdReboot;
//   - policy matching, ranking and drain bounds: repair.TestMatching,
//     repair.TestRanksTolerationAndLogs, repair.TestOrder, repair.TestDrainBound,
//     repair.TestTrippedPools, aws.TestRepairPoliciesAreKarpenters;
//   - terminate-first and static pools: TestTerminateFirstRepair;
//   - registration by feature gate and flag: operator.TestRepairMethodIsKarpenters.
//
// Left out on purpose: "should release a static replacement reservation when command
// admission loses a race" and "should propagate replacement simulation errors"
// (Dovetail has no command queue to admit into, and its simulation is in memory
// and cannot fail), and Karpenter re-sending a blocked repair's event every pass
// (Dovetail says each distinct reason once per node).
func TestKarpenterRepairSuite(t *testing.T) {
	long := repairNow.Add(-time.Hour)
	cases := []repairSuiteCase{
		{karpenter: "repair_test.go:272 should leave the reboot TGP annotation unset (unbounded) when neither policy nor NodeClaim sets one", run: func(t *testing.T) {
			f := newRepairFixture(t, nil, gpuFaultNode(repairNow.Add(-11*time.Minute))...)
			unboundedPolicies(t, f, nil)
			f.reconcile(t)
			nc := f.claim(t, "gpu")
			if !nc.Rebooting() {
				t.Fatal("no reboot committed")
			}
			if v, ok := nc.Annotations[v1.RebootTerminationGracePeriodAnnotationKey]; ok {
				t.Errorf("reboot drain bound %q; want none", v)
			}
		}},
		{karpenter: "repair_test.go:290 should inherit the NodeClaim's TGP as the reboot bound when the policy sets none", run: func(t *testing.T) {
			objs := gpuFaultNode(repairNow.Add(-11 * time.Minute))
			objs[0].(*v1.NodeClaim).Spec.TerminationGracePeriod = &metav1.Duration{Duration: 7 * time.Minute}
			f := newRepairFixture(t, nil, objs...)
			unboundedPolicies(t, f, nil)
			f.reconcile(t)
			if got := f.claim(t, "gpu").Annotations[v1.RebootTerminationGracePeriodAnnotationKey]; got != "7m0s" {
				t.Errorf("reboot drain bound %q; want the claim's 7m0s", got)
			}
		}},
		{karpenter: "repair_test.go:308 should remove a stale reboot TGP annotation when the new reboot is unbounded", run: func(t *testing.T) {
			objs := gpuFaultNode(repairNow.Add(-11 * time.Minute))
			objs[0].(*v1.NodeClaim).Annotations = map[string]string{v1.RebootTerminationGracePeriodAnnotationKey: "5m0s"}
			f := newRepairFixture(t, nil, objs...)
			unboundedPolicies(t, f, nil)
			f.reconcile(t)
			nc := f.claim(t, "gpu")
			if v, ok := nc.Annotations[v1.RebootTerminationGracePeriodAnnotationKey]; !nc.Rebooting() || ok {
				t.Errorf("rebooting %v, drain bound %q; want a reboot with the old bound gone", nc.Rebooting(), v)
			}
		}},
		{karpenter: "repair_test.go:537 should not reboot a node carrying the do-not-repair annotation", run: func(t *testing.T) {
			f := newRebootFixture(t, annotateNode(gpuFaultNode(repairNow.Add(-11*time.Minute)), v1.DoNotRepairAnnotationKey, "true")...)
			f.reconcile(t)
			mustNotRepair(t, f, "gpu")
			mustSay(t, f.events(), `repair is blocked through the "karpenter.sh/do-not-repair" annotation`)
		}},
		{karpenter: "repair_test.go:553 should report the do-not-repair veto ahead of an unbounded drain", run: func(t *testing.T) {
			f := newRepairFixture(t, nil, annotateNode(blockingPod(sickNode("sick", long, true)), v1.DoNotRepairAnnotationKey, "true")...)
			unboundedPolicies(t, f, nil)
			f.reconcile(t)
			mustNotRepair(t, f, "sick")
			events := f.events()
			mustSay(t, events, "do-not-repair")
			if containsEvent(events, "termination grace period") {
				t.Errorf("events %v report the drain before the veto", events)
			}
		}},
		{karpenter: "repair_test.go:566 should not report the do-not-repair veto while the node is still within its policy's toleration", run: func(t *testing.T) {
			f := newRepairFixture(t, nil, annotateNode(sickNode("sick", repairNow.Add(-10*time.Minute), true), v1.DoNotRepairAnnotationKey, "true")...)
			f.reconcile(t)
			mustNotRepair(t, f, "sick")
			if events := f.events(); len(events) != 0 {
				t.Errorf("events %v for a node its policy still tolerates", events)
			}
		}},
		{karpenter: `repair_test.go:588 should still repair a node whose do-not-repair annotation is not "true"`, run: func(t *testing.T) {
			f := newRepairFixture(t, nil, annotateNode(sickNode("sick", long, true), v1.DoNotRepairAnnotationKey, "false")...)
			f.reconcile(t)
			mustRepair(t, f, "sick")
		}},
		{karpenter: "repair_test.go:610 should repair with the full policy decision once a blocking budget lifts", run: func(t *testing.T) {
			pool := &v1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "default"}}
			pool.Spec.Disruption.Budgets = []v1.Budget{{Nodes: "0", Reasons: []v1.DisruptionReason{v1.DisruptionReasonUnhealthy}}}
			f := newRepairFixture(t, pool, append(sickNode("sick", long, true), healthyNodes(8)...)...)
			f.reconcile(t)
			mustNotRepair(t, f, "sick", claimNames(8)...)
			np := &v1.NodePool{}
			if err := f.kube.Get(context.Background(), client.ObjectKey{Name: "default"}, np); err != nil {
				t.Fatal(err)
			}
			np.Spec.Disruption.Budgets[0].Nodes = "1"
			if err := f.kube.Update(context.Background(), np); err != nil {
				t.Fatal(err)
			}
			f.clock.Step(time.Minute)
			f.reconcile(t)
			if n := len(f.replacements(t, append(claimNames(8), "sick")...)); n != 1 {
				t.Fatalf("%d replacements once the budget allows one; want 1", n)
			}
			if d := state.Recorded(f.claim(t, "sick")); d == nil || d.DrainBound == nil || d.DrainBound.Duration != 10*time.Minute || d.Condition != "Ready" {
				t.Errorf("disruption record %+v; want the policy's 10-minute drain bound and condition Ready", d)
			}
		}},
		{karpenter: "repair_test.go:876 should stamp a forceful (immediate) termination deadline before requesting deletion", run: func(t *testing.T) {
			f := newRepairFixture(t, nil, sickNode("sick", long, false)...)
			zero := time.Duration(0)
			unboundedPolicies(t, f, &zero)
			f.reconcile(t)
			sick := f.claim(t, "sick")
			if !deleting(sick) {
				t.Fatal("not repaired")
			}
			if sick != nil {
				if got, want := sick.Annotations[v1.NodeClaimTerminationTimestampAnnotationKey], repairNow.UTC().Format(time.RFC3339); got != want {
					t.Errorf("termination deadline %q; want now, %q", got, want)
				}
			}
		}},
		{karpenter: "repair_test.go:1011 should neither terminate nor stamp a deadline when the replacement never becomes healthy", run: func(t *testing.T) {
			f := newRepairFixture(t, nil, sickNode("sick", long, true)...)
			for range 3 {
				f.reconcile(t)
				f.clock.Step(time.Minute)
			}
			sick := f.claim(t, "sick")
			if deleting(sick) {
				t.Fatal("the node went though its replacement never initialized")
			}
			if v, ok := sick.Annotations[v1.NodeClaimTerminationTimestampAnnotationKey]; ok {
				t.Errorf("termination deadline %q stamped before the replacement is healthy", v)
			}
		}},
		{karpenter: "repair_test.go:1031 should not bypass a blocking pod without a bounded drain", run: func(t *testing.T) {
			f := newRepairFixture(t, nil, blockingPod(sickNode("sick", long, true))...)
			unboundedPolicies(t, f, nil)
			f.reconcile(t)
			mustNotRepair(t, f, "sick")
			mustSay(t, f.events(), "repair requires a termination grace period to bypass blocking pods")
		}},
		{karpenter: "repair_test.go:1042 should size replacement capacity for a blocking pod when the drain is bounded", run: func(t *testing.T) {
			f := newRepairFixture(t, nil, blockingPod(sickNode("sick", long, true))...)
			f.reconcile(t)
			if n := len(f.replacements(t, "sick")); n != 1 {
				t.Fatalf("%d replacements; want 1 holding the blocking pod, which the 10-minute drain bound evicts", n)
			}
		}},
		{karpenter: "repair_test.go:1189 should explicitly exclude standalone NodeClaims that have no safe replacement template", run: func(t *testing.T) {
			objs := sickNode("standalone", long, true)
			delete(objs[0].(*v1.NodeClaim).Labels, v1.LabelNodePool)
			f := newRepairFixture(t, nil, objs...)
			f.reconcile(t)
			mustNotRepair(t, f, "standalone")
			mustSay(t, f.events(), "repair requires a NodePool to construct and budget a safe replacement")
		}},
		{karpenter: "repair_test.go:1266 uninitialized nodes: should not repair a node that never registered", run: func(t *testing.T) {
			objs := sickNode("unregistered", long, false)
			objs[0].(*v1.NodeClaim).Status.Conditions = []metav1.Condition{{Type: v1.ConditionTypeLaunched, Status: metav1.ConditionTrue, Reason: "Launched",
				LastTransitionTime: metav1.NewTime(long)}}
			f := newRepairFixture(t, nil, objs...)
			f.reconcile(t)
			mustNotRepair(t, f, "unregistered")
			mustSay(t, f.events(), "Node isn't initialized nor registered")
		}},
		{karpenter: "repair_test.go:1280 uninitialized nodes: should not repair before the toleration duration elapses", run: func(t *testing.T) {
			f := newRepairFixture(t, nil, registeredOnly(sickNode("uninit", repairNow.Add(-29*time.Minute), false))...)
			f.reconcile(t)
			mustNotRepair(t, f, "uninit")
			f.clock.Step(2 * time.Minute)
			f.reconcile(t)
			mustRepair(t, f, "uninit")
		}},
		{karpenter: "repair_test.go:1300 uninitialized nodes: should not consume disruption budget for initialized nodes", run: func(t *testing.T) {
			pool := &v1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "default"}}
			pool.Spec.Disruption.Budgets = []v1.Budget{{Nodes: "1"}}
			objs := append(append(registeredOnly(sickNode("uninit", long, false)), sickNode("sick", long, true)...), healthyNodes(8)...)
			f := newRepairFixture(t, pool, objs...)
			f.reconcile(t)
			f.reconcile(t)
			mustRepair(t, f, "uninit")
			if n := len(f.replacements(t, append(claimNames(8), "uninit", "sick")...)); n != 1 {
				t.Fatalf("%d replacements for the initialized node; want 1: repairing the uninitialized one took none of its pool's budget of 1", n)
			}
		}},
		{karpenter: "repair_test.go:1338 uninitialized nodes: should not repair a rebooting node", run: func(t *testing.T) {
			objs := registeredOnly(sickNode("rebooting", long, false))
			nc := objs[0].(*v1.NodeClaim)
			meta.SetStatusCondition(&nc.Status.Conditions, metav1.Condition{Type: v1.ConditionTypeRebooting, Status: metav1.ConditionTrue, Reason: v1.RebootIssued,
				LastTransitionTime: metav1.NewTime(repairNow.Add(-time.Minute))})
			f := newRepairFixture(t, nil, objs...)
			f.clock.Step(31 * time.Minute)
			f.reconcile(t)
			if deleting(f.claim(t, "rebooting")) || len(f.replacements(t, "rebooting")) != 0 {
				t.Fatal("a rebooting node was repaired")
			}
		}},
		{karpenter: "repair_test.go:1361 uninitialized nodes: should not repair a node carrying the do-not-repair annotation", run: func(t *testing.T) {
			f := newRepairFixture(t, nil, annotateNode(registeredOnly(sickNode("uninit", long, false)), v1.DoNotRepairAnnotationKey, "true")...)
			f.reconcile(t)
			mustNotRepair(t, f, "uninit")
			mustSay(t, f.events(), "do-not-repair")
		}},
		{karpenter: "repair_test.go:1371 uninitialized nodes: should stop repairing a NodePool when more than 20% of its nodes are unhealthy", run: func(t *testing.T) {
			objs := append(append(registeredOnly(sickNode("a", long, false)), registeredOnly(sickNode("b", long, false))...), healthyNode("c")...)
			f := newRepairFixture(t, nil, objs...)
			f.reconcile(t)
			mustNotRepair(t, f, "a", "b", "c")
			mustNotRepair(t, f, "b", "a", "c")
			mustSay(t, f.events(), `more than 20% of nodes in nodepool "default" are unhealthy`)
		}},
		{karpenter: "repair_terminatefirst_test.go:311 should still pace terminate-first (one command, one candidate, per pass)", run: func(t *testing.T) {
			ten := int64(10)
			objs := append(reservedNode("a", v1.CapacityTypeOnDemand, false, true), reservedNode("b", v1.CapacityTypeOnDemand, false, true)...)
			// A static pool of 10 at its limit: eight healthy nodes keep two unhealthy
			// under the 20% breaker.
			objs = append(objs, healthyNodes(8)...)
			f := newTerminateFirstFixture(t, reservationCloud{}, false, true, reservedPool(&ten, "10", v1.CapacityTypeOnDemand), objs...)
			f.reconcile(t)
			if a, b := deleting(f.claim(t, "a")), deleting(f.claim(t, "b")); a == b {
				t.Fatalf("a deleting %v, b deleting %v after one pass; want exactly one repaired", a, b)
			}
		}},
	}
	for _, gate := range []bool{true, false} {
		cases = append(cases, repairSuiteCase{karpenter: fmt.Sprintf("repair_terminatefirst_test.go:460 replaces-first for a static NodePool with no node limit (TerminateFirstRepair %t)", gate),
			run: func(t *testing.T) {
				one := int64(1)
				f := newTerminateFirstFixture(t, reservationCloud{}, false, gate, reservedPool(&one, "", v1.CapacityTypeOnDemand), reservedNode("held", v1.CapacityTypeOnDemand, false, true)...)
				f.reconcile(t)
				if deleting(f.claim(t, "held")) || len(f.replacements(t, "held")) != 1 {
					t.Fatalf("deleting %v, %d launched; want its replacement launched first", deleting(f.claim(t, "held")), len(f.replacements(t, "held")))
				}
			}})
	}
	for _, c := range cases {
		name, _, _ := strings.Cut(c.karpenter, " ")
		t.Run(strings.TrimSpace(strings.TrimPrefix(c.karpenter, name)), func(t *testing.T) {
			t.Logf("Karpenter v1.15.0 pkg/controllers/disruption/%s", name)
			c.run(t)
		})
	}
}
