package disruption

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dovetail-sh/dovetail/controller/apis/scheme"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/controller/cloudprovider"
	"github.com/dovetail-sh/dovetail/controller/consolidation"
	"github.com/dovetail-sh/dovetail/controller/controllers/provisioning"
	"github.com/dovetail-sh/dovetail/controller/metrics"
	"github.com/dovetail-sh/dovetail/controller/scheduling"
	"github.com/dovetail-sh/dovetail/controller/state"
)

// pricedCloud offers one instance type and launches nothing: these tests are about
// what a restarted controller does with what it finds.
type pricedCloud struct{ cloudprovider.CloudProvider }

func (pricedCloud) GetInstanceTypes(context.Context, *v1.NodePool) ([]*scheduling.InstanceType, error) {
	return []*scheduling.InstanceType{scheduling.NewInstanceType("m.large", map[string]string{v1.LabelArch: "amd64"},
		corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("4Gi"), corev1.ResourcePods: resource.MustParse("29")},
		[]scheduling.Offering{{Zone: "a", CapacityType: v1.CapacityTypeOnDemand, Price: 0.1, Available: true}}, scheduling.DefaultAllocatableSettings())}, nil
}
func (pricedCloud) IsDrifted(context.Context, *v1.NodeClaim) (cloudprovider.DriftReason, error) {
	return "", nil
}

// restartFixture is a cluster as a controller that stopped mid-disruption left it:
// claim "old" (with node "old-node") is a candidate, "new" its replacement.
type restartFixture struct {
	kube    client.Client
	clock   *clocktesting.FakeClock
	ctrl    *Controller
	old     *v1.NodeClaim
	oldNode *corev1.Node
}

func initializedClaim(name string, at time.Time) (*v1.NodeClaim, *corev1.Node) {
	nc := &v1.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Finalizers: []string{v1.TerminationFinalizer},
			Labels: map[string]string{v1.LabelNodePool: "default", v1.LabelInstanceType: "m.large", v1.LabelCapacityType: v1.CapacityTypeOnDemand, v1.LabelTopologyZone: "a"}},
		Status: v1.NodeClaimStatus{ProviderID: "kwok://" + name, NodeName: name + "-node",
			Conditions: []metav1.Condition{{Type: v1.ConditionTypeInitialized, Status: metav1.ConditionTrue, Reason: "Initialized", LastTransitionTime: metav1.NewTime(at)}}},
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name + "-node", Labels: nc.Labels},
		Spec:   corev1.NodeSpec{ProviderID: nc.Status.ProviderID},
		Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("4Gi"), corev1.ResourcePods: resource.MustParse("29")}}}
	return nc, node
}

func newRestartFixture(t *testing.T, recorded *state.Disruption, tainted bool, objs []client.Object, funcs interceptor.Funcs) *restartFixture {
	t.Helper()
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC))
	old, oldNode := initializedClaim("old", clk.Now().Add(-time.Hour))
	if tainted {
		oldNode.Spec.Taints = []corev1.Taint{v1.DisruptedNoScheduleTaint}
	}
	pool := &v1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "default"}}
	kube := fake.NewClientBuilder().WithScheme(scheme.New()).WithStatusSubresource(&v1.NodeClaim{}, &v1.NodePool{}).
		WithObjects(append([]client.Object{old, oldNode, pool}, objs...)...).WithInterceptorFuncs(funcs).Build()
	if recorded != nil {
		if err := state.RecordDisruption(context.Background(), kube, recorded, old); err != nil {
			t.Fatal(err)
		}
	}
	recorder := discardingRecorder(t)
	prov := provisioning.NewProvisioner(kube, state.NewCluster(kube, clk), pricedCloud{}, clk, recorder,
		provisioning.NewBatcher(clk, time.Second, 10*time.Second), scheduling.DefaultNodeCosts())
	opts := DefaultOptions()
	return &restartFixture{kube: kube, clock: clk, old: old, oldNode: oldNode,
		ctrl: NewController(kube, pricedCloud{}, prov, clk, recorder, opts)}
}

func discardingRecorder(t *testing.T) record.EventRecorder {
	t.Helper()
	r := record.NewFakeRecorder(100)
	go func() {
		for range r.Events {
		}
	}()
	return r
}

func (f *restartFixture) reconcile(t *testing.T) error {
	t.Helper()
	return f.ctrl.Reconcile(context.Background())
}

func (f *restartFixture) tainted(t *testing.T) bool {
	t.Helper()
	n := &corev1.Node{}
	if err := f.kube.Get(context.Background(), client.ObjectKeyFromObject(f.oldNode), n); err != nil {
		t.Fatal(err)
	}
	return state.HasTaint(n, v1.DisruptedNoScheduleTaint)
}

// oldClaim is the candidate as the API has it now, nil once gone.
func (f *restartFixture) oldClaim(t *testing.T) *v1.NodeClaim {
	t.Helper()
	nc := &v1.NodeClaim{}
	if err := f.kube.Get(context.Background(), client.ObjectKeyFromObject(f.old), nc); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		t.Fatal(err)
	}
	return nc
}

func oldRecord(startedAt time.Time, replacements ...string) *state.Disruption {
	return &state.Disruption{ID: "old-1", Reason: v1.DisruptionReasonUnderutilized, ConsolidationType: consolidation.TypeSingle,
		Candidates: []string{"old"}, Replacements: replacements, StartedAt: metav1.NewTime(startedAt)}
}

// A node tainted for a disruption that no record explains (the controller stopped
// between tainting and recording, or an older version left it) goes back into
// service on the first pass: it must not eat the budget or hide capacity forever.
func TestStaleDisruptedTaintIsRemoved(t *testing.T) {
	f := newRestartFixture(t, nil, true, nil, interceptor.Funcs{})
	if err := f.reconcile(t); err != nil {
		t.Fatal(err)
	}
	if f.tainted(t) {
		t.Fatal("the node keeps the disrupted taint though no disruption carries on")
	}
	if nc := f.oldClaim(t); nc == nil || nc.DeletionTimestamp != nil {
		t.Fatal("the node's claim was deleted")
	}
}

// A disruption recorded before the restart whose replacement has initialized is
// finished: the candidate is deleted, not left running beside its replacement.
func TestRecordedDisruptionIsResumed(t *testing.T) {
	clkNow := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	replacement, replacementNode := initializedClaim("new", clkNow.Add(-time.Minute))
	f := newRestartFixture(t, oldRecord(clkNow.Add(-2*time.Minute), "new"), true, []client.Object{replacement, replacementNode}, interceptor.Funcs{})
	if err := f.reconcile(t); err != nil {
		t.Fatal(err)
	}
	nc := f.oldClaim(t)
	if nc != nil && nc.DeletionTimestamp == nil {
		t.Fatal("the candidate of a recorded disruption whose replacement is up was not deleted")
	}
}

// A recorded disruption whose replacement is gone is rolled back: taint and record
// removed, the node back in service.
func TestRecordedDisruptionWithoutReplacementRollsBack(t *testing.T) {
	clkNow := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	f := newRestartFixture(t, oldRecord(clkNow.Add(-2*time.Minute), "vanished"), true, nil, interceptor.Funcs{})
	if err := f.reconcile(t); err != nil {
		t.Fatal(err)
	}
	if f.tainted(t) {
		t.Error("the candidate keeps the disrupted taint after its replacement vanished")
	}
	nc := f.oldClaim(t)
	if nc == nil || nc.DeletionTimestamp != nil {
		t.Fatal("the candidate was deleted though its replacement never came")
	}
	if state.Recorded(nc) != nil {
		t.Error("the disruption record stays on a rolled back candidate")
	}
}

// A resumed disruption waits for a replacement still coming up, bounded by the
// replacement timeout counted from when it started, not from the restart.
func TestResumedDisruptionIsBoundedByTheReplacementTimeout(t *testing.T) {
	clkNow := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	coming := &v1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "new", Labels: map[string]string{v1.LabelNodePool: "default"}}}
	started := clkNow.Add(-time.Minute)
	f := newRestartFixture(t, oldRecord(started, "new"), true, []client.Object{coming}, interceptor.Funcs{})
	if err := f.reconcile(t); err != nil {
		t.Fatal(err)
	}
	if !f.tainted(t) {
		t.Fatal("the candidate lost its taint while its replacement is still coming up")
	}
	if nc := f.oldClaim(t); nc == nil || nc.DeletionTimestamp != nil {
		t.Fatal("the candidate was deleted before its replacement initialized")
	}
	failures := metrics.VoluntaryDisruptionQueueFailures.WithLabelValues("replace", "underutilized", consolidation.TypeSingle)
	failed := testutil.ToFloat64(failures)
	f.clock.SetTime(started.Add(DefaultOptions().ReplacementTimeout + time.Second))
	if err := f.reconcile(t); err != nil {
		t.Fatal(err)
	}
	if f.tainted(t) {
		t.Error("past the replacement timeout the candidate is still tainted")
	}
	if got := testutil.ToFloat64(failures) - failed; got != 1 {
		t.Errorf("queue failures rose by %v, want 1 (the replacement never came up)", got)
	}
	if nc := f.oldClaim(t); nc == nil || nc.DeletionTimestamp != nil || state.Recorded(nc) != nil {
		t.Error("past the replacement timeout the candidate is not back in service unchanged")
	}
}

// A failed deletion of a candidate is retried on the next pass, not dropped with
// its command (which left the node tainted beside its replacement).
func TestFailedCandidateDeletionIsRetried(t *testing.T) {
	clkNow := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	replacement, replacementNode := initializedClaim("new", clkNow.Add(-time.Minute))
	failures := 1
	funcs := interceptor.Funcs{Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
		if _, ok := obj.(*v1.NodeClaim); ok && failures > 0 {
			failures--
			return errors.New("the API server is having a moment")
		}
		return c.Delete(ctx, obj, opts...)
	}}
	f := newRestartFixture(t, oldRecord(clkNow.Add(-2*time.Minute), "new"), true, []client.Object{replacement, replacementNode}, funcs)
	if err := f.reconcile(t); err == nil {
		t.Fatal("a failed deletion was not reported")
	}
	if nc := f.oldClaim(t); nc == nil || nc.DeletionTimestamp != nil {
		t.Fatal("the injected failure did not happen")
	}
	if err := f.reconcile(t); err != nil {
		t.Fatal(err)
	}
	if nc := f.oldClaim(t); nc != nil && nc.DeletionTimestamp == nil {
		t.Fatal("the failed deletion was not retried")
	}
	if !f.tainted(t) {
		t.Error("the candidate lost its taint while it is being deleted")
	}
}

// A node the provisioner just nominated pending pods to looks empty until
// kube-scheduler binds them; it must not be removed as empty meanwhile (Karpenter
// too leaves nominated nodes alone).
func TestNodeWithNominatedPodsIsNotEmpty(t *testing.T) {
	for _, nominate := range []bool{false, true} {
		f := newRestartFixture(t, nil, false, nil, interceptor.Funcs{})
		ctx := context.Background()
		f.removeEmptyNodesAtOnce(t)
		if nominate {
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default", UID: "p-uid"},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("128Mi")}}}}}}
			if err := f.kube.Create(ctx, pod); err != nil {
				t.Fatal(err)
			}
			if _, err := f.ctrl.provisioner.Schedule(ctx); err != nil {
				t.Fatal(err)
			}
		}
		removed := f.decidedToRemoveOld(t)
		if nominate && removed {
			t.Error("the node a pending pod is nominated to was removed as empty")
		}
		if !nominate && !removed {
			t.Error("an empty node was not removed: the test does not exercise emptiness")
		}
	}
}

// A pod nothing can place (more cpu than any type has) stays pending whatever
// consolidation does: it must not keep an empty node alive. A pod the provisioner can
// place still waits for it.
func TestUnplaceablePendingPodDoesNotBlockConsolidation(t *testing.T) {
	for _, tc := range []struct {
		cpu         string
		wantRemoved bool
	}{{"100", true}, {"500m", false}} {
		f := newRestartFixture(t, nil, false, nil, interceptor.Funcs{})
		ctx := context.Background()
		f.removeEmptyNodesAtOnce(t)
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "pending", Namespace: "default", UID: "pending-uid"},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(tc.cpu), corev1.ResourceMemory: resource.MustParse("128Mi")}}}}},
			Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable}}}}
		if err := f.kube.Create(ctx, pod); err != nil {
			t.Fatal(err)
		}
		removed := f.decidedToRemoveOld(t)
		if removed != tc.wantRemoved {
			t.Errorf("pending pod of %s cpu: empty node removed = %v, want %v", tc.cpu, removed, tc.wantRemoved)
		}
	}
}

// removeEmptyNodesAtOnce makes the pool remove empty nodes as soon as they are, with
// no budget in the way.
func (f *restartFixture) removeEmptyNodesAtOnce(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	pool := &v1.NodePool{}
	if err := f.kube.Get(ctx, client.ObjectKey{Name: "default"}, pool); err != nil {
		t.Fatal(err)
	}
	pool.Spec.Disruption.ConsolidationPolicy = v1.ConsolidationPolicyWhenEmpty
	pool.Spec.Disruption.ConsolidateAfter = v1.MustParseNillableDuration("0s")
	pool.Spec.Disruption.Budgets = []v1.Budget{{Nodes: "100%"}}
	if err := f.kube.Update(ctx, pool); err != nil {
		t.Fatal(err)
	}
}

// decidedToRemoveOld runs passes past the validation delay and reports whether the
// candidate "old" was deleted.
func (f *restartFixture) decidedToRemoveOld(t *testing.T) bool {
	t.Helper()
	for i := 0; i < 3; i++ {
		if err := f.reconcile(t); err != nil {
			t.Fatal(err)
		}
		f.clock.Step(DefaultOptions().ValidationDelay + time.Second)
	}
	return f.oldClaim(t) == nil || f.oldClaim(t).DeletionTimestamp != nil
}

// An empty node proposed for removal that gets a pod before the validation delay is
// kept, and counts as a failed validation, as Karpenter counts it.
func TestProposalThatNoLongerHoldsFailsValidation(t *testing.T) {
	f := newRestartFixture(t, nil, false, nil, interceptor.Funcs{})
	ctx := context.Background()
	f.removeEmptyNodesAtOnce(t)
	validations := metrics.VoluntaryDisruptionFailedValidations.WithLabelValues(consolidation.TypeEmpty)
	before := testutil.ToFloat64(validations)
	if err := f.reconcile(t); err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "arrived", Namespace: "default", UID: "arrived-uid"},
		Spec: corev1.PodSpec{NodeName: f.oldNode.Name, Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("128Mi")}}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	if err := f.kube.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	f.clock.Step(DefaultOptions().ValidationDelay + time.Second)
	if err := f.reconcile(t); err != nil {
		t.Fatal(err)
	}
	if nc := f.oldClaim(t); nc == nil || nc.DeletionTimestamp != nil {
		t.Fatal("the node was removed though a pod arrived before the validation delay")
	}
	if got := testutil.ToFloat64(validations) - before; got != 1 {
		t.Errorf("failed validations rose by %v, want 1", got)
	}
}

// Each candidate is validated by its own time in the decision: a node that joins
// a standing decision neither resets the others' validation nor waits for a fresh
// decision of its own once theirs is acted on.
func TestEachCandidateIsValidatedOnItsOwnClock(t *testing.T) {
	second, secondNode := initializedClaim("second", time.Date(2026, 11, 23, 11, 0, 0, 0, time.UTC))
	f := newRestartFixture(t, nil, false, nil, interceptor.Funcs{})
	ctx := context.Background()
	f.removeEmptyNodesAtOnce(t)
	delay := DefaultOptions().ValidationDelay
	if err := f.reconcile(t); err != nil { // proposes old
		t.Fatal(err)
	}
	f.clock.Step(delay / 2)
	for _, obj := range []client.Object{second, secondNode} {
		if err := f.kube.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.reconcile(t); err != nil { // old still held; second proposed
		t.Fatal(err)
	}
	f.clock.Step(delay/2 + time.Second)
	if err := f.reconcile(t); err != nil {
		t.Fatal(err)
	}
	if nc := f.oldClaim(t); nc != nil && nc.DeletionTimestamp == nil {
		t.Fatal("old, held by every decision for the validation delay, was not removed when another node joined")
	}
	gone := func() bool {
		nc := &v1.NodeClaim{}
		err := f.kube.Get(ctx, client.ObjectKeyFromObject(second), nc)
		return err != nil || nc.DeletionTimestamp != nil
	}
	if gone() {
		t.Fatal("second was removed before it was held for the validation delay")
	}
	f.clock.Step(delay / 2)
	if err := f.reconcile(t); err != nil {
		t.Fatal(err)
	}
	if !gone() {
		t.Error("second, held for the validation delay, waited for a fresh decision")
	}
}
