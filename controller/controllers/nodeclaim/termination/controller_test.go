package termination

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dovetail-sh/dovetail/controller/apis/scheme"

	"github.com/aws/smithy-go"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	fakeclient "sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/controller/cloudprovider/fake"
	"github.com/dovetail-sh/dovetail/controller/metrics"
)

const (
	nodeName   = "ip-10-0-0-1"
	providerID = fake.ProviderIDPrefix + "test-zone-a/i-00001"
	// holdFinalizer keeps a deleted pod listed, as a dead kubelet or a stuck
	// finalizer does.
	holdFinalizer = "example.com/hold"
)

// start is when the claim is deleted.
var start = time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)

type env struct {
	kube     client.Client
	cloud    *fake.CloudProvider
	clock    *clocktesting.FakeClock
	recorder *record.FakeRecorder
	c        *Controller

	mu        sync.Mutex
	evictions []string
	deletes   map[string]*int64 // pod -> grace period seconds asked for
}

// newEnv starts with the claim deleting now; blockEvictions makes every eviction
// answer 429, as a PodDisruptionBudget that allows no disruption does.
func newEnv(t *testing.T, nc *v1.NodeClaim, blockEvictions bool, objs ...client.Object) *env {
	t.Helper()
	clk := clocktesting.NewFakeClock(start)
	e := &env{clock: clk, recorder: record.NewFakeRecorder(100), deletes: map[string]*int64{}}
	nc.DeletionTimestamp = &metav1.Time{Time: clk.Now()}
	funcs := interceptor.Funcs{
		SubResourceCreate: func(ctx context.Context, c client.Client, subResource string, obj, sub client.Object, opts ...client.SubResourceCreateOption) error {
			if subResource == "eviction" {
				e.mu.Lock()
				e.evictions = append(e.evictions, obj.GetName())
				e.mu.Unlock()
				if blockEvictions {
					return apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 0)
				}
			}
			return c.SubResource(subResource).Create(ctx, obj, sub, opts...)
		},
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			if _, ok := obj.(*corev1.Pod); ok {
				do := &client.DeleteOptions{}
				do.ApplyOptions(opts)
				e.mu.Lock()
				e.deletes[obj.GetName()] = do.GracePeriodSeconds
				e.mu.Unlock()
			}
			return c.Delete(ctx, obj, opts...)
		},
	}
	e.kube = fakeclient.NewClientBuilder().WithScheme(scheme.New()).WithObjects(append(objs, nc)...).
		WithStatusSubresource(&v1.NodeClaim{}, &corev1.Node{}).
		WithIndex(&corev1.Pod{}, "spec.nodeName", func(o client.Object) []string { return []string{o.(*corev1.Pod).Spec.NodeName} }).
		WithIndex(&corev1.Pod{}, PodControllerIndex, PodController).
		WithInterceptorFuncs(funcs).Build()
	e.cloud = fake.New(clk)
	e.cloud.AddInstance(&v1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: nc.Name}, Status: v1.NodeClaimStatus{ProviderID: providerID}})
	e.c = NewController(e.kube, e.cloud, clk, e.recorder)
	return e
}

func deletingClaim(tgp *time.Duration) *v1.NodeClaim {
	nc := &v1.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "default-a", Finalizers: []string{v1.TerminationFinalizer}, Labels: map[string]string{v1.LabelNodePool: "default"}},
		Status:     v1.NodeClaimStatus{ProviderID: providerID, NodeName: nodeName},
	}
	if tgp != nil {
		nc.Spec.TerminationGracePeriod = &metav1.Duration{Duration: *tgp}
	}
	return nc
}

func node(ready corev1.ConditionStatus) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: nodeName},
		Spec:       corev1.NodeSpec{ProviderID: providerID},
		Status:     corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: ready}}},
	}
}

func pod(name string, mutate ...func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
		Spec:       corev1.PodSpec{NodeName: nodeName, Containers: []corev1.Container{{Name: "c", Image: "pause"}}},
		Status:     corev1.PodStatus{Phase: corev1.PodRunning},
	}
	for _, m := range mutate {
		m(p)
	}
	return p
}

func grace(seconds int64) func(*corev1.Pod) {
	return func(p *corev1.Pod) { p.Spec.TerminationGracePeriodSeconds = &seconds }
}

// held keeps the pod listed once deleted.
func held(p *corev1.Pod) { p.Finalizers = []string{holdFinalizer} }

// deleting makes the pod one that was deleted and is still listed, with the
// deletionTimestamp the API server set (the deletion plus its grace period).
func deleting(stamp time.Time) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		held(p)
		p.DeletionTimestamp = &metav1.Time{Time: stamp}
	}
}

func (e *env) reconcile(t *testing.T) reconcile.Result {
	t.Helper()
	nc := &v1.NodeClaim{}
	if err := e.kube.Get(context.Background(), client.ObjectKey{Name: "default-a"}, nc); err != nil {
		t.Fatalf("getting the claim: %v", err)
	}
	res, err := e.c.Reconcile(context.Background(), nc)
	if err != nil {
		t.Fatalf("reconcile: %v", err)
	}
	return res
}

// terminated: the instance is terminated, the node deleted and the claim gone.
func (e *env) terminated(t *testing.T) bool {
	t.Helper()
	err := e.kube.Get(context.Background(), client.ObjectKey{Name: "default-a"}, &v1.NodeClaim{})
	if err == nil {
		return false
	}
	if !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	if deleted := e.cloud.Deleted(); len(deleted) != 1 || deleted[0] != providerID {
		t.Errorf("claim gone but instance terminations %v, want [%s]", deleted, providerID)
	}
	if err := e.kube.Get(context.Background(), client.ObjectKey{Name: nodeName}, &corev1.Node{}); !apierrors.IsNotFound(err) {
		t.Errorf("claim gone but its node remains (%v)", err)
	}
	return true
}

func (e *env) podExists(t *testing.T, name string) *corev1.Pod {
	t.Helper()
	p := &corev1.Pod{}
	if err := e.kube.Get(context.Background(), client.ObjectKey{Namespace: "default", Name: name}, p); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		t.Fatal(err)
	}
	return p
}

func isDaemon(p *corev1.Pod) {
	p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "ds", UID: "ds"}}
}

// toleratesAll is the toleration most DaemonSets (CNI, kube-proxy, CSI nodes) carry.
func toleratesAll(p *corev1.Pod) {
	p.Spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
}

func priorityClass(name string) func(*corev1.Pod) {
	return func(p *corev1.Pod) { p.Spec.PriorityClassName = name }
}

// Pods that would only come back (tolerating the drain's taint), mirror pods and
// finished pods are not evicted, and do not hold the termination.
func TestDrainEvictsThenTerminates(t *testing.T) {
	isMirror := func(p *corev1.Pod) { p.Annotations = map[string]string{corev1.MirrorPodAnnotationKey: "x"} }
	done := func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }
	tolerant := func(p *corev1.Pod) {
		p.Spec.Tolerations = []corev1.Toleration{{Key: v1.DisruptedNoScheduleTaint.Key, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}
	}
	e := newEnv(t, deletingClaim(nil), false, node(corev1.ConditionTrue), pod("web"), pod("agent", isDaemon, toleratesAll),
		pod("stays", tolerant), pod("static", isMirror), pod("job", done))
	if res := e.reconcile(t); res.RequeueAfter <= 0 || e.terminated(t) {
		t.Fatalf("terminated before the drain: %+v", res)
	}
	n := &corev1.Node{}
	if err := e.kube.Get(context.Background(), client.ObjectKey{Name: nodeName}, n); err != nil {
		t.Fatal(err)
	}
	cordoned := false
	for _, taint := range n.Spec.Taints {
		cordoned = cordoned || taint.MatchTaint(&v1.DisruptedNoScheduleTaint)
	}
	if !cordoned {
		t.Errorf("node not tainted %s while draining: %v", v1.DisruptedNoScheduleTaint.Key, n.Spec.Taints)
	}
	if strings.Join(e.evictions, ",") != "web" {
		t.Errorf("evicted %v, want only the workload pod", e.evictions)
	}
	e.reconcile(t)
	if !e.terminated(t) {
		t.Fatalf("not terminated once drained")
	}
}

// A drain evicts in Karpenter's order: workloads, then DaemonSet pods that do not
// tolerate the drain's taint, then critical workloads, then critical DaemonSet pods;
// each group once every pod of the one before has been asked to go.
func TestDrainEvictsWorkloadsBeforeDaemonSetsAndCriticalPods(t *testing.T) {
	e := newEnv(t, deletingClaim(nil), false, node(corev1.ConditionTrue),
		pod("web"), pod("worker"), pod("logs", isDaemon), pod("dns", priorityClass("system-cluster-critical")),
		pod("cni", isDaemon, priorityClass("system-node-critical")), pod("proxy", isDaemon, toleratesAll, priorityClass("system-node-critical")))
	for pass, want := range []string{"web,worker", "web,worker,logs", "web,worker,logs,dns", "web,worker,logs,dns,cni"} {
		if res := e.reconcile(t); res.RequeueAfter <= 0 || e.terminated(t) {
			t.Fatalf("pass %d: the drain did not wait: %+v", pass+1, res)
		}
		if got := strings.Join(e.evictions, ","); got != want {
			t.Fatalf("after pass %d evictions are %q, want %q", pass+1, got, want)
		}
	}
	e.reconcile(t)
	if !e.terminated(t) {
		t.Fatal("not terminated once every group was drained")
	}

	// Once asked, a workload still stopping does not hold the next group, nor does a
	// do-not-disrupt workload that only the grace period moves.
	protected := func(p *corev1.Pod) { p.Annotations = map[string]string{v1.DoNotDisruptAnnotationKey: "true"} }
	e = newEnv(t, deletingClaim(nil), false, node(corev1.ConditionTrue), pod("web", deleting(start.Add(30*time.Second))),
		pod("precious", protected), pod("logs", isDaemon), pod("dns", priorityClass("system-cluster-critical")))
	e.reconcile(t)
	if got := strings.Join(e.evictions, ","); got != "logs" {
		t.Fatalf("with a workload stopping and one protected, evictions are %q, want the DaemonSet pod", got)
	}
	if res := e.reconcile(t); res.RequeueAfter <= 0 || e.terminated(t) {
		t.Fatalf("terminated with a do-not-disrupt pod and no grace period: %+v", res)
	}
	if got := strings.Join(e.evictions, ","); got != "logs,dns" {
		t.Fatalf("second pass: evictions are %q, want the critical pod after the DaemonSet pod", got)
	}
}

func TestUnregisteredClaimIsTerminatedWithoutDrain(t *testing.T) {
	nc := deletingClaim(nil)
	nc.Status.NodeName = ""
	e := newEnv(t, nc, false)
	e.reconcile(t)
	if err := e.kube.Get(context.Background(), client.ObjectKey{Name: "default-a"}, &v1.NodeClaim{}); !apierrors.IsNotFound(err) {
		t.Fatalf("claim still there (%v)", err)
	}
	if deleted := e.cloud.Deleted(); len(deleted) != 1 {
		t.Errorf("instance terminations %v, want one", deleted)
	}
}

func TestVanishedInstanceDoesNotBlockTheFinalizer(t *testing.T) {
	e := newEnv(t, deletingClaim(nil), false, node(corev1.ConditionTrue))
	e.cloud.RemoveInstance(providerID)
	e.reconcile(t)
	if err := e.kube.Get(context.Background(), client.ObjectKey{Name: "default-a"}, &v1.NodeClaim{}); !apierrors.IsNotFound(err) {
		t.Fatalf("claim still there (%v)", err)
	}
}

// A PodDisruptionBudget that allows no eviction holds the drain until the claim's
// terminationGracePeriod: each pod is deleted when only its own grace period is
// left, with that much grace, and at the deadline the instance goes whatever
// still runs on it.
func TestTerminationGracePeriodBoundsABlockedDrain(t *testing.T) {
	tgp := 5 * time.Minute
	e := newEnv(t, deletingClaim(&tgp), true, node(corev1.ConditionTrue), pod("guarded", grace(30), held), pod("quick", grace(0), held))
	deadline := e.clock.Now().Add(tgp)
	e.reconcile(t)
	if e.podExists(t, "guarded").DeletionTimestamp != nil || len(e.evictions) != 2 {
		t.Fatalf("want both pods asked to evict and none deleted; evictions %v", e.evictions)
	}
	e.clock.SetTime(deadline.Add(-40 * time.Second))
	e.reconcile(t)
	if e.podExists(t, "guarded").DeletionTimestamp != nil {
		t.Fatalf("pod deleted %s before the deadline, earlier than its 30s grace period needs", deadline.Sub(e.clock.Now()))
	}
	e.clock.SetTime(deadline.Add(-30 * time.Second))
	e.reconcile(t)
	if e.podExists(t, "guarded").DeletionTimestamp == nil {
		t.Fatalf("pod not deleted when only its grace period is left before the deadline")
	}
	if g := e.deletes["guarded"]; g == nil || *g != 30 {
		t.Errorf("pod deleted with grace %v, want the 30s left", g)
	}
	if e.podExists(t, "quick").DeletionTimestamp != nil {
		t.Errorf("a pod with no grace period was deleted before the deadline")
	}
	if e.terminated(t) {
		t.Fatalf("terminated before the deadline")
	}
	e.clock.SetTime(deadline)
	e.reconcile(t)
	if !e.terminated(t) {
		t.Fatalf("the instance outlives the terminationGracePeriod because pods are still terminating")
	}
	if g := e.deletes["quick"]; g == nil || *g != 0 {
		t.Errorf("pod with no grace period deleted with %v at the deadline, want 0", g)
	}
}

// A pod that asked not to be disrupted is not evicted; without a grace period it
// holds the node, with one it goes when its time comes.
func TestDoNotDisruptPodWaitsForTheGracePeriod(t *testing.T) {
	dnd := func(p *corev1.Pod) { p.Annotations = map[string]string{v1.DoNotDisruptAnnotationKey: "true"} }
	e := newEnv(t, deletingClaim(nil), false, node(corev1.ConditionTrue), pod("precious", dnd, grace(0)))
	e.reconcile(t)
	e.clock.Step(time.Hour)
	e.reconcile(t)
	if len(e.evictions) != 0 || e.podExists(t, "precious") == nil || e.terminated(t) {
		t.Fatalf("do-not-disrupt pod disrupted without a grace period: evictions %v", e.evictions)
	}

	tgp := time.Minute
	e = newEnv(t, deletingClaim(&tgp), false, node(corev1.ConditionTrue), pod("precious", dnd, grace(0)))
	e.reconcile(t)
	if len(e.evictions) != 0 || e.podExists(t, "precious") == nil {
		t.Fatalf("do-not-disrupt pod disrupted before the grace period ran out")
	}
	e.clock.Step(tgp)
	e.reconcile(t)
	if !e.terminated(t) || e.podExists(t, "precious") != nil {
		t.Errorf("do-not-disrupt pod still holds the node past the grace period")
	}
}

// A do-not-disrupt duration protects the pod for that long after it started; the
// drain evicts it once that has passed, with no grace period needed.
func TestDoNotDisruptDurationEnds(t *testing.T) {
	forTenMinutes := func(p *corev1.Pod) {
		p.Annotations = map[string]string{v1.DoNotDisruptAnnotationKey: "10m"}
		p.Status.StartTime = &metav1.Time{Time: start.Add(-5 * time.Minute)}
	}
	e := newEnv(t, deletingClaim(nil), false, node(corev1.ConditionTrue), pod("warming", forTenMinutes, grace(0)))
	e.reconcile(t)
	if len(e.evictions) != 0 {
		t.Fatalf("pod evicted 5m into its 10m of do-not-disrupt")
	}
	e.clock.Step(5 * time.Minute)
	e.reconcile(t)
	if strings.Join(e.evictions, ",") != "warming" {
		t.Errorf("evictions %v once its 10m were over, want the pod", e.evictions)
	}
}

// Without a terminationGracePeriod, a pod stuck terminating (its kubelet is dead,
// or a finalizer holds it) past its own grace period and a margin no longer holds
// the node; one still within its grace period does.
func TestPodStuckTerminatingStopsBlockingTheDrain(t *testing.T) {
	// Evicted at start with 30s of grace: the API server stamps start+30s.
	stamp := start.Add(30 * time.Second)
	e := newEnv(t, deletingClaim(nil), false, node(corev1.ConditionUnknown), pod("stuck", grace(30), deleting(stamp)))
	e.reconcile(t)
	e.clock.SetTime(stamp.Add(stuckTerminatingMargin))
	e.reconcile(t)
	if e.terminated(t) {
		t.Fatalf("terminated while the pod may still be shutting down (%s after its grace period)", stuckTerminatingMargin)
	}
	e.clock.Step(time.Second)
	e.reconcile(t)
	if !e.terminated(t) {
		t.Fatalf("a pod stuck terminating on a dead node holds the drain forever")
	}
}

// The same on a node whose kubelet lives: a finalizer nobody removes keeps the pod
// object, not its containers, which the kubelet stopped at the end of its grace.
func TestPodHeldByAFinalizerStopsBlockingTheDrain(t *testing.T) {
	e := newEnv(t, deletingClaim(nil), false, node(corev1.ConditionTrue), pod("finalized", deleting(start)))
	e.reconcile(t)
	if e.terminated(t) {
		t.Fatalf("terminated while the pod is within its grace period")
	}
	e.clock.Step(stuckTerminatingMargin + time.Second)
	e.reconcile(t)
	if !e.terminated(t) {
		t.Fatalf("a pod held by a finalizer holds the drain forever")
	}
}

func TestNotDeletingIsLeftAlone(t *testing.T) {
	nc := deletingClaim(nil)
	e := newEnv(t, nc, false, node(corev1.ConditionTrue), pod("web"))
	live := &v1.NodeClaim{}
	if err := e.kube.Get(context.Background(), client.ObjectKey{Name: "default-a"}, live); err != nil {
		t.Fatal(err)
	}
	live.DeletionTimestamp = nil
	if _, err := e.c.Reconcile(context.Background(), live); err != nil {
		t.Fatal(err)
	}
	if len(e.evictions) != 0 || len(e.cloud.Deleted()) != 0 {
		t.Errorf("a claim not deleting was drained or terminated")
	}
}

// An instance the cloud refuses to terminate (the policy denies it) keeps running and
// billing: the claim keeps its finalizer and says why in its InstanceTerminating
// condition and a Warning event, naming the provider's error without what changes
// between tries, so the condition is written once and the retries back off.
func TestTerminationFailureIsSurfaced(t *testing.T) {
	nc := deletingClaim(nil)
	e := newEnv(t, nc, false)
	e.cloud.SetDeleteErr(&smithy.GenericAPIError{Code: "UnauthorizedOperation", Message: "You are not authorized to perform this operation. Encoded authorization failure message: abc123"})
	ctx := context.Background()
	var stamps []metav1.Time
	for try := 0; try < 3; try++ {
		current := &v1.NodeClaim{}
		if err := e.kube.Get(ctx, client.ObjectKeyFromObject(nc), current); err != nil {
			t.Fatal(err)
		}
		if _, err := e.c.Reconcile(ctx, current); err == nil || !strings.Contains(err.Error(), "UnauthorizedOperation") {
			t.Fatalf("try %d: error %v; want the provider's error returned, so the workqueue backs off", try, err)
		}
		if err := e.kube.Get(ctx, client.ObjectKeyFromObject(nc), current); err != nil {
			t.Fatal(err)
		}
		cond := meta.FindStatusCondition(current.Status.Conditions, v1.ConditionTypeInstanceTerminating)
		want := "terminating instance " + providerID + ": UnauthorizedOperation: You are not authorized to perform this operation"
		if cond == nil || cond.Status != metav1.ConditionFalse || cond.Reason != "TerminationFailed" || cond.Message != want {
			t.Fatalf("try %d: condition %+v; want InstanceTerminating=False, TerminationFailed, %q", try, cond, want)
		}
		if !controllerutil.ContainsFinalizer(current, v1.TerminationFinalizer) {
			t.Fatalf("the finalizer was released while the instance still runs")
		}
		stamps = append(stamps, cond.LastTransitionTime)
		e.clock.Step(time.Minute)
	}
	if stamps[0] != stamps[2] {
		t.Errorf("the condition changed between identical failures (%v): each write would requeue at once instead of backing off", stamps)
	}
	close(e.recorder.Events)
	warnings := 0
	for ev := range e.recorder.Events {
		if strings.HasPrefix(ev, "Warning FailedTerminatingInstance terminating instance "+providerID+": UnauthorizedOperation") {
			warnings++
		}
	}
	if warnings != 3 {
		t.Errorf("%d FailedTerminatingInstance warnings, want one per try", warnings)
	}

	// Once the policy allows it, the instance goes and the claim with it.
	e.cloud.SetDeleteErr(nil)
	current := &v1.NodeClaim{}
	if err := e.kube.Get(ctx, client.ObjectKeyFromObject(nc), current); err != nil {
		t.Fatal(err)
	}
	if _, err := e.c.Reconcile(ctx, current); err != nil {
		t.Fatal(err)
	}
	if got := e.cloud.Deleted(); len(got) != 1 || got[0] != providerID {
		t.Errorf("deleted %v", got)
	}
}

// The drain counts its eviction requests by the API's answer and the evicted pods by
// why the node goes (the claim's DisruptionReason); the released claim counts as
// terminated and its termination is timed.
func TestDrainMetrics(t *testing.T) {
	nc := deletingClaim(nil)
	nc.Labels[v1.LabelTopologyZone], nc.Labels[v1.LabelCapacityType] = "zone-m", v1.CapacityTypeSpot
	nc.SetDisruptionReason("Drifted", time.Now())
	drained := metrics.PodsDrained.WithLabelValues("drifted")
	ok := metrics.PodsEvictionRequests.WithLabelValues("200")
	terminated := metrics.NodeClaimsTerminated.WithLabelValues("default", v1.CapacityTypeSpot, "zone-m")
	before := []float64{testutil.ToFloat64(drained), testutil.ToFloat64(ok), testutil.ToFloat64(terminated)}
	e := newEnv(t, nc, false, node(corev1.ConditionTrue), pod("web"), pod("api"))
	e.reconcile(t)
	e.reconcile(t)
	if !e.terminated(t) {
		t.Fatal("not terminated once drained")
	}
	for i, c := range []struct {
		name string
		got  float64
		want float64
	}{{"pods drained (drifted)", testutil.ToFloat64(drained), 2}, {"eviction requests (200)", testutil.ToFloat64(ok), 2}, {"nodeclaims terminated", testutil.ToFloat64(terminated), 1}} {
		if c.got-before[i] != c.want {
			t.Errorf("%s rose by %v, want %v", c.name, c.got-before[i], c.want)
		}
	}

	// Blocked by a PodDisruptionBudget: the API answers 429 and nothing is drained.
	blocked := metrics.PodsEvictionRequests.WithLabelValues("429")
	was := testutil.ToFloat64(blocked)
	e = newEnv(t, deletingClaim(nil), true, node(corev1.ConditionTrue), pod("guarded"))
	e.reconcile(t)
	if got := testutil.ToFloat64(blocked) - was; got != 1 {
		t.Errorf("blocked eviction requests rose by %v, want 1", got)
	}
}

func requests(cpu, memory string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(memory)}
	}
}

// A drain's first pass evicts the node's largest pods, and the next pass the rest:
// the scheduler places each pod on the emptiest node that fits, and the small
// pods arriving first would take the room launched for the large ones. A large
// pod that cannot leave (do-not-disrupt) does not hold the others back.
func TestDrainEvictsTheLargestPodsFirst(t *testing.T) {
	n := node(corev1.ConditionTrue)
	n.Status.Allocatable = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("16"), corev1.ResourceMemory: resource.MustParse("128Gi")}
	e := newEnv(t, deletingClaim(nil), false, n, pod("large", requests("3500m", "28Gi")), pod("large-too", requests("3", "20Gi")),
		pod("small", requests("900m", "3100Mi")), pod("tiny", requests("100m", "128Mi")))
	if res := e.reconcile(t); res.RequeueAfter <= 0 {
		t.Fatalf("the drain did not wait for the rest: %+v", res)
	}
	if got := strings.Join(e.evictions, ","); got != "large,large-too" {
		t.Errorf("first pass evicted %q, want the two large pods", got)
	}
	e.reconcile(t)
	if got := strings.Join(e.evictions, ","); got != "large,large-too,small,tiny" {
		t.Errorf("after the second pass evictions are %q, want the small pods too", got)
	}

	protected := func(p *corev1.Pod) { p.Annotations = map[string]string{v1.DoNotDisruptAnnotationKey: "true"} }
	e = newEnv(t, deletingClaim(nil), false, n.DeepCopy(), pod("precious", requests("8", "64Gi"), protected), pod("small", requests("900m", "3100Mi")))
	e.reconcile(t)
	if got := strings.Join(e.evictions, ","); got != "small" {
		t.Errorf("with a large do-not-disrupt pod the first pass evicted %q, want the small pod", got)
	}
}

func ownedBy(rs string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: rs, UID: types.UID(rs), Controller: ptr.To(true)}}
	}
}

// The smaller pods wait until the ReplicaSet has recreated the large pods the first
// pass evicted and the scheduler has tried each, so the replacements reach the
// scheduler large first; at most waveWait.
func TestDrainHoldsTheSmallPodsUntilTheLargePodsReplacementsAreScheduled(t *testing.T) {
	n := node(corev1.ConditionTrue)
	n.Status.Allocatable = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("16"), corev1.ResourceMemory: resource.MustParse("128Gi")}
	large := func(name string) *corev1.Pod { return pod(name, requests("3500m", "28Gi"), ownedBy("large-rs")) }
	small := pod("small", requests("900m", "3100Mi"), ownedBy("small-rs"))
	e := newEnv(t, deletingClaim(nil), false, n, large("large-a"), large("large-b"), small)
	ctx := context.Background()
	e.reconcile(t)
	if got := strings.Join(e.evictions, ","); got != "large-a,large-b" {
		t.Fatalf("first pass evicted %q, want the two large pods", got)
	}
	replacement := func(name string) *corev1.Pod {
		p := large(name)
		p.Spec.NodeName = ""
		p.Status = corev1.PodStatus{Phase: corev1.PodPending}
		p.CreationTimestamp = metav1.Time{Time: e.clock.Now()}
		return p
	}
	step := func(why string) {
		t.Helper()
		e.clock.Step(time.Second)
		e.reconcile(t)
		if got := strings.Join(e.evictions, ","); got != "large-a,large-b" {
			t.Fatalf("%s: evictions are %q, want the small pod held", why, got)
		}
	}
	step("no replacement yet")
	must(t, e.kube.Create(ctx, replacement("large-c")))
	bound := replacement("large-d")
	bound.Spec.NodeName = "other"
	must(t, e.kube.Create(ctx, bound))
	step("one replacement waits for the scheduler")
	p := e.podExists(t, "large-c")
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable}}
	must(t, e.kube.Status().Update(ctx, p))
	e.clock.Step(time.Second)
	e.reconcile(t)
	if got := strings.Join(e.evictions, ","); got != "large-a,large-b,small" {
		t.Errorf("with both replacements tried, evictions are %q, want the small pod too", got)
	}

	// Replacements that never come hold the small pods for waveWait only.
	e = newEnv(t, deletingClaim(nil), false, n.DeepCopy(), large("large-a"), small.DeepCopy())
	e.reconcile(t)
	e.clock.Step(waveWait - time.Second)
	e.reconcile(t)
	if got := strings.Join(e.evictions, ","); got != "large-a" {
		t.Fatalf("before waveWait evictions are %q, want the small pod held", got)
	}
	e.clock.Step(time.Second)
	e.reconcile(t)
	if got := strings.Join(e.evictions, ","); got != "large-a,small" {
		t.Errorf("after waveWait evictions are %q, want the small pod too", got)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// A node of small pods drained beside a node of large ones holds its pods back
// too, until the large pods' replacements are scheduled: ordering each node alone
// sent the small pods first from nodes that had no large ones.
func TestDrainHoldsSmallPodsBehindTheLargePodsOfOtherDrains(t *testing.T) {
	e := newEnv(t, deletingClaim(nil), false, drainingBeside("large",
		pod("small-a", requests("900m", "3100Mi"), ownedBy("small-rs")), pod("small-b", requests("900m", "3100Mi"), ownedBy("small-rs")))...)
	ctx := context.Background()
	e.reconcile(t)
	if len(e.evictions) != 0 {
		t.Fatalf("the node of small pods evicted %v while a large pod of another drain had not gone", e.evictions)
	}
	nc := &v1.NodeClaim{}
	must(t, e.kube.Get(ctx, client.ObjectKey{Name: "default-b"}, nc))
	if _, err := e.c.Reconcile(ctx, nc); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(e.evictions, ","); got != "large" {
		t.Fatalf("evictions are %q, want the large pod", got)
	}
	// The large pod's node is empty now and goes; its pod's replacement still
	// holds the small pods.
	e.clock.Step(time.Second)
	must(t, e.kube.Get(ctx, client.ObjectKey{Name: "default-b"}, nc))
	if _, err := e.c.Reconcile(ctx, nc); err != nil {
		t.Fatal(err)
	}
	if err := e.kube.Get(ctx, client.ObjectKey{Name: "other"}, &corev1.Node{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the emptied node is still there (%v)", err)
	}
	e.reconcile(t)
	if got := strings.Join(e.evictions, ","); got != "large" {
		t.Fatalf("before the large pod's replacement was scheduled evictions are %q, want the small pods held", got)
	}
	replacement := pod("large-new", requests("3500m", "28Gi"), ownedBy("large-rs"))
	replacement.Spec.NodeName = "elsewhere"
	replacement.CreationTimestamp = metav1.Time{Time: e.clock.Now()}
	must(t, e.kube.Create(ctx, replacement))
	e.clock.Step(time.Second)
	e.reconcile(t)
	if got := strings.Join(e.evictions, ","); got != "large,small-a,small-b" {
		t.Errorf("once the large pod's replacement was bound evictions are %q, want the small pods too", got)
	}
}

// Two drains that each evict a pod of one ReplicaSet wait for both replacements:
// the ReplicaSet recreates in order, and the first replacement must not count for
// both.
func TestDrainWavesOfOneReplicaSetWaitForAllItsReplacements(t *testing.T) {
	e := newEnv(t, deletingClaim(nil), false, drainingBeside("large-b",
		pod("large-a", requests("3500m", "28Gi"), ownedBy("large-rs")), pod("small", requests("900m", "3100Mi"), ownedBy("small-rs")))...)
	ctx := context.Background()
	nc := &v1.NodeClaim{}
	must(t, e.kube.Get(ctx, client.ObjectKey{Name: "default-b"}, nc))
	if _, err := e.c.Reconcile(ctx, nc); err != nil {
		t.Fatal(err)
	}
	e.reconcile(t)
	if got := strings.Join(e.evictions, ","); got != "large-b,large-a" {
		t.Fatalf("evictions are %q, want both large pods", got)
	}
	replace := func(name string) {
		p := pod(name, requests("3500m", "28Gi"), ownedBy("large-rs"))
		p.Spec.NodeName = "elsewhere"
		p.CreationTimestamp = metav1.Time{Time: e.clock.Now()}
		must(t, e.kube.Create(ctx, p))
		e.clock.Step(time.Second)
		e.reconcile(t)
	}
	replace("large-new-1")
	if got := strings.Join(e.evictions, ","); got != "large-b,large-a" {
		t.Fatalf("with one of two replacements made, evictions are %q, want the small pod held", got)
	}
	replace("large-new-2")
	if got := strings.Join(e.evictions, ","); got != "large-b,large-a,small" {
		t.Errorf("with both replacements bound, evictions are %q, want the small pod too", got)
	}
}

// A drain's wave is dropped with its claim, even when the node went some other way
// (a reclaimed instance, kubectl delete node), and the recent waves are only the
// last waveWait's: a controller that drains nodes all day keeps neither.
func TestDrainWavesAreForgotten(t *testing.T) {
	e := newEnv(t, deletingClaim(nil), false, node(corev1.ConditionTrue), pod("web"))
	e.reconcile(t)
	must(t, e.kube.Delete(context.Background(), node(corev1.ConditionTrue)))
	for range 5 {
		e.clock.Step(waveWait)
		if e.reconcile(t); e.terminated(t) {
			break
		}
	}
	if !e.terminated(t) {
		t.Fatal("the claim whose node vanished was not terminated")
	}
	if len(e.c.waves) != 0 {
		t.Errorf("waves of terminated claims are kept: %v", e.c.waves)
	}
	for i := range 100 {
		e.c.wave(fmt.Sprintf("claim-%d", i), e.clock.Now())
		e.clock.Step(time.Second)
	}
	if n := len(e.c.recentWaves); n > int(waveWait/time.Second)+1 {
		t.Errorf("%d recent waves kept after 100 drains a second apart, want those of the last %s", n, waveWait)
	}
}

// drainingBeside is the objects of the test's node (16 cpu, 64Gi) with its pods,
// and of another node draining beside it, claim default-b, holding one large pod
// of ReplicaSet large-rs.
func drainingBeside(largePod string, pods ...client.Object) []client.Object {
	alloc := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("16"), corev1.ResourceMemory: resource.MustParse("64Gi")}
	n := node(corev1.ConditionTrue)
	n.Status.Allocatable = alloc
	other := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "other"}, Status: corev1.NodeStatus{Allocatable: alloc}}
	otherClaim := deletingClaim(nil)
	otherClaim.Name, otherClaim.Status.NodeName, otherClaim.Status.ProviderID = "default-b", "other", fake.ProviderIDPrefix+"test-zone-a/i-00002"
	otherClaim.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	large := pod(largePod, requests("3500m", "28Gi"), ownedBy("large-rs"))
	large.Spec.NodeName = "other"
	return append([]client.Object{n, other, otherClaim, large}, pods...)
}
