package lifecycle

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dovetail-sh/dovetail/controller/apis/scheme"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	fakeclient "sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	awsv1 "github.com/dovetail-sh/dovetail/controller/apis/aws/v1"
	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/controller/cloudprovider"
	"github.com/dovetail-sh/dovetail/controller/cloudprovider/fake"
	"github.com/dovetail-sh/dovetail/controller/metrics"
	"github.com/dovetail-sh/dovetail/controller/metrics/metricstest"
)

const ttl = 15 * time.Minute

type env struct {
	kube     client.Client
	cloud    *fake.CloudProvider
	clock    *clocktesting.FakeClock
	recorder *record.FakeRecorder
	c        *Controller
}

func newEnv(t *testing.T, funcs *interceptor.Funcs, objs ...client.Object) *env {
	t.Helper()
	b := fakeclient.NewClientBuilder().WithScheme(scheme.New()).WithObjects(objs...).
		WithStatusSubresource(&v1.NodeClaim{}, &corev1.Node{}).
		WithIndex(&corev1.Node{}, ProviderIDIndex, func(o client.Object) []string { return []string{o.(*corev1.Node).Spec.ProviderID} })
	if funcs != nil {
		b = b.WithInterceptorFuncs(*funcs)
	}
	clk := clocktesting.NewFakeClock(time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC))
	e := &env{kube: b.Build(), cloud: fake.New(clk), clock: clk, recorder: record.NewFakeRecorder(100)}
	e.c = NewController(e.kube, e.cloud, clk, e.recorder, ttl)
	return e
}

// restart is a new process: nothing in memory, the same cluster and cloud.
func (e *env) restart() {
	e.c = NewController(e.kube, e.cloud, e.clock, e.recorder, ttl)
}

func (e *env) get(t *testing.T, name string) *v1.NodeClaim {
	t.Helper()
	nc := &v1.NodeClaim{}
	if err := e.kube.Get(context.Background(), client.ObjectKey{Name: name}, nc); err != nil {
		t.Fatalf("getting nodeclaim %s: %v", name, err)
	}
	return nc
}

func (e *env) reconcile(t *testing.T, nc *v1.NodeClaim) reconcile.Result {
	t.Helper()
	res, err := e.c.Reconcile(context.Background(), nc.DeepCopy())
	if err != nil {
		t.Fatalf("reconcile: %v", err)
	}
	return res
}

func (e *env) events() []string {
	var out []string
	for {
		select {
		case ev := <-e.recorder.Events:
			out = append(out, ev)
		default:
			return out
		}
	}
}

func hasEvent(events []string, reason string) (string, bool) {
	for _, ev := range events {
		if strings.Contains(ev, " "+reason+" ") {
			return ev, true
		}
	}
	return "", false
}

func claim(name string, created time.Time) *v1.NodeClaim {
	return &v1.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name), CreationTimestamp: metav1.NewTime(created),
			Labels: map[string]string{v1.LabelNodePool: "default"}, Finalizers: []string{v1.TerminationFinalizer}},
		Spec: v1.NodeClaimSpec{
			Requirements: []v1.NodeSelectorRequirementWithMinValues{{Key: v1.LabelCapacityType, RequirementBody: v1.RequirementBody{Operator: v1.OpIn, Values: []string{v1.CapacityTypeOnDemand}}}},
			NodeClassRef: &v1.NodeClassReference{Group: awsv1.Group, Kind: "EC2NodeClass", Name: "default"},
			Resources:    v1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}},
		},
	}
}

func TestLaunchRecordsTheInstanceOnTheClaim(t *testing.T) {
	e := newEnv(t, nil)
	nc := claim("default-a", time.Time{})
	nc.Finalizers = nil
	nc.CreationTimestamp = metav1.NewTime(e.clock.Now())
	if err := e.kube.Create(context.Background(), nc); err != nil {
		t.Fatal(err)
	}
	e.reconcile(t, e.get(t, "default-a"))
	got := e.get(t, "default-a")
	if got.Status.ProviderID == "" || got.Status.ImageID != "ami-fake" || got.Status.Capacity.Cpu().Cmp(resource.MustParse("2")) != 0 || got.Status.Allocatable.Cpu().IsZero() {
		t.Errorf("launch not recorded in status: %+v", got.Status)
	}
	for k, want := range map[string]string{v1.LabelInstanceType: "fake.large", v1.LabelTopologyZone: "test-zone-a", v1.LabelCapacityType: v1.CapacityTypeOnDemand, v1.LabelNodePool: "default"} {
		if got.Labels[k] != want {
			t.Errorf("label %s = %q, want %q", k, got.Labels[k], want)
		}
	}
	if !meta.IsStatusConditionTrue(got.Status.Conditions, v1.ConditionTypeLaunched) {
		t.Errorf("Launched is not True: %v", got.Status.Conditions)
	}
	if c := meta.FindStatusCondition(got.Status.Conditions, v1.ConditionTypeRegistered); c == nil || c.Status != metav1.ConditionUnknown {
		t.Errorf("Registered is not Unknown: %v", got.Status.Conditions)
	}
	if len(got.Finalizers) != 1 || got.Finalizers[0] != v1.TerminationFinalizer {
		t.Errorf("finalizers %v, want the termination finalizer", got.Finalizers)
	}
	if _, ok := hasEvent(e.events(), "Launched"); !ok {
		t.Errorf("no Launched event")
	}
	if n := e.cloud.Creates("default-a"); n != 1 {
		t.Errorf("Create called %d times, want 1", n)
	}
}

// A Reconcile that reads the claim from a cache not yet showing the launch (the
// launch's own status write triggers one) must not launch a second instance.
func TestStaleReadAfterLaunchDoesNotLaunchAgain(t *testing.T) {
	e := newEnv(t, nil, claim("default-a", time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)))
	stale := e.get(t, "default-a")
	e.reconcile(t, stale)
	for i := 0; i < 3; i++ {
		e.reconcile(t, stale)
	}
	if n := e.cloud.Creates("default-a"); n != 1 || e.cloud.Instances() != 1 {
		t.Fatalf("a stale read launched again: %d Create calls, %d instances", n, e.cloud.Instances())
	}
	// The cache catches up: the claim carries the launch, and nothing more launches.
	fresh := e.get(t, "default-a")
	e.reconcile(t, fresh)
	e.reconcile(t, e.get(t, "default-a"))
	if n := e.cloud.Creates("default-a"); n != 1 {
		t.Errorf("Create called %d times, want 1", n)
	}
	if fresh.Status.ProviderID == "" || fresh.Labels[v1.LabelInstanceType] == "" {
		t.Errorf("launch not recorded: %+v %v", fresh.Status, fresh.Labels)
	}
}

// A process that recorded the launch's status and died before the labels leaves a
// claim with a providerID and no instance labels; the next one labels it from the
// cloud provider's record of the instance, without launching again.
func TestLaunchedClaimWithoutLabelsGetsThemFromTheCloud(t *testing.T) {
	failLabels := true
	funcs := &interceptor.Funcs{Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
		if _, ok := obj.(*v1.NodeClaim); ok && failLabels {
			return errors.New("connection refused")
		}
		return c.Patch(ctx, obj, patch, opts...)
	}}
	e := newEnv(t, funcs, claim("default-a", time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)))
	if _, err := e.c.Reconcile(context.Background(), e.get(t, "default-a")); err == nil {
		t.Fatalf("the label write failed but Reconcile did not say so")
	}
	half := e.get(t, "default-a")
	if half.Status.ProviderID == "" || half.Labels[v1.LabelInstanceType] != "" {
		t.Fatalf("want the status recorded and the labels not: %+v %v", half.Status, half.Labels)
	}
	failLabels = false
	e.restart()
	e.reconcile(t, half)
	got := e.get(t, "default-a")
	inst, err := e.cloud.Get(context.Background(), got.Status.ProviderID)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{v1.LabelInstanceType, v1.LabelTopologyZone, v1.LabelCapacityType, v1.LabelArch} {
		if got.Labels[k] == "" || got.Labels[k] != inst.Labels[k] {
			t.Errorf("label %s = %q, want the instance's %q", k, got.Labels[k], inst.Labels[k])
		}
	}
	if n := e.cloud.Creates("default-a"); n != 1 {
		t.Errorf("Create called %d times, want 1", n)
	}
}

// The same convergence when this process still remembers the launch: the labels
// come from its record, with the annotations the cloud provider added.
func TestFailedLabelWriteIsRetriedFromTheLaunchRecord(t *testing.T) {
	failLabels := true
	funcs := &interceptor.Funcs{Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
		if _, ok := obj.(*v1.NodeClaim); ok && failLabels {
			return errors.New("connection refused")
		}
		return c.Patch(ctx, obj, patch, opts...)
	}}
	e := newEnv(t, funcs, claim("default-a", time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)))
	if _, err := e.c.Reconcile(context.Background(), e.get(t, "default-a")); err == nil {
		t.Fatalf("the label write failed but Reconcile did not say so")
	}
	failLabels = false
	e.reconcile(t, e.get(t, "default-a"))
	got := e.get(t, "default-a")
	if got.Labels[v1.LabelInstanceType] != "fake.large" {
		t.Errorf("labels %v, want the launched instance type", got.Labels)
	}
	if n := e.cloud.Creates("default-a"); n != 1 {
		t.Errorf("Create called %d times, want 1", n)
	}
}

// A launch that cannot succeed as things are deletes the claim at once, so its pods
// are planned again, as Karpenter v1.15 does: no capacity for any offering, or a
// node class found not Ready (rather than retrying until the launch times out).
func TestLaunchErrorsThatDeleteTheClaimAtOnce(t *testing.T) {
	for _, tc := range []struct {
		err           error
		reason, event string
	}{
		{cloudprovider.NewInsufficientCapacityError(errors.New("InsufficientInstanceCapacity")), "insufficient_capacity", "InsufficientCapacityError"},
		{cloudprovider.NewNodeClassNotReadyError(errors.New(`EC2NodeClass "default" is not ready (SubnetsReady: no subnet matches)`)), "nodeclass_not_ready", "NodeClassNotReady"},
	} {
		t.Run(tc.reason, func(t *testing.T) {
			e := newEnv(t, nil, claim("default-a", time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)))
			e.cloud.SetCreateErr(tc.err)
			before := metricstest.Sum(metrics.NodeClaimsDisrupted, "reason", tc.reason)
			e.reconcile(t, e.get(t, "default-a"))
			if got := metricstest.Sum(metrics.NodeClaimsDisrupted, "reason", tc.reason) - before; got != 1 {
				t.Errorf("nodeclaims disrupted for %s rose by %v, want 1", tc.reason, got)
			}
			if got := e.get(t, "default-a"); got.DeletionTimestamp == nil {
				t.Errorf("the claim is not deleting after %v", tc.err)
			}
			if msg, ok := hasEvent(e.events(), tc.event); !ok || !strings.Contains(msg, errors.Unwrap(tc.err).Error()) {
				t.Errorf("no %s event saying why: %q", tc.event, msg)
			}
		})
	}
}

// A Reconcile that reads the refused claim from a cache that does not show its
// deletion yet launches nothing: the instance would belong to a claim being deleted,
// and its node would sit tainted unregistered while the pods wait for it.
func TestRefusedClaimIsNotLaunchedFromAStaleRead(t *testing.T) {
	e := newEnv(t, nil, claim("default-a", time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)))
	stale := e.get(t, "default-a")
	e.cloud.SetCreateErr(cloudprovider.NewInsufficientCapacityError(errors.New("InsufficientInstanceCapacity")))
	e.reconcile(t, stale.DeepCopy())
	e.cloud.SetCreateErr(nil)
	e.reconcile(t, stale.DeepCopy())
	if n := e.cloud.Creates("default-a"); n != 1 {
		t.Errorf("%d launches for a claim deleted for want of capacity after its first, want only that one", n)
	}
}

// A launch that fails for another reason (node class not ready, no image for the
// architecture, UnauthorizedOperation) is retried with backoff, says why on the
// Launched condition, and gives up after the TTL: the claim is deleted so its pods
// are planned again.
func TestFailingLaunchIsRetriedThenTimesOut(t *testing.T) {
	created := time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)
	e := newEnv(t, nil, claim("default-a", created))
	e.cloud.SetCreateErr(errors.New("creating fleet, UnauthorizedOperation: You are not authorized to perform this operation"))
	res := e.reconcile(t, e.get(t, "default-a"))
	if res.RequeueAfter <= 0 {
		t.Errorf("a failed launch is not retried: %+v", res)
	}
	got := e.get(t, "default-a")
	cond := meta.FindStatusCondition(got.Status.Conditions, v1.ConditionTypeLaunched)
	if cond == nil || cond.Status != metav1.ConditionFalse || cond.Reason != "LaunchFailed" || !strings.Contains(cond.Message, "UnauthorizedOperation") {
		t.Errorf("Launched condition %+v, want False/LaunchFailed naming the error", cond)
	}
	if got.DeletionTimestamp != nil {
		t.Fatalf("deleted on the first failure")
	}
	if ev, ok := hasEvent(e.events(), "LaunchFailed"); !ok || !strings.Contains(ev, "UnauthorizedOperation") {
		t.Errorf("no LaunchFailed event naming the error: %q", ev)
	}
	// The condition write wakes the controller at once; that is no reason to retry.
	e.reconcile(t, got)
	if n := e.cloud.Creates("default-a"); n != 1 {
		t.Errorf("retried without backoff: %d Create calls", n)
	}
	e.clock.Step(res.RequeueAfter)
	e.reconcile(t, e.get(t, "default-a"))
	if n := e.cloud.Creates("default-a"); n != 2 {
		t.Errorf("not retried after the backoff: %d Create calls", n)
	}
	// Retries keep failing until the claim has existed for the TTL.
	for i := 0; i < 100 && e.get(t, "default-a").DeletionTimestamp == nil; i++ {
		res := e.reconcile(t, e.get(t, "default-a"))
		if e.get(t, "default-a").DeletionTimestamp != nil {
			break
		}
		if res.RequeueAfter <= 0 || res.RequeueAfter > time.Minute {
			t.Fatalf("retry after %s, want within (0, 1m]", res.RequeueAfter)
		}
		if e.clock.Since(created) < ttl && e.clock.Since(created)+res.RequeueAfter > ttl+time.Second {
			t.Fatalf("the retry at %s overshoots the TTL", e.clock.Since(created)+res.RequeueAfter)
		}
		e.clock.Step(res.RequeueAfter)
	}
	got = e.get(t, "default-a")
	if got.DeletionTimestamp == nil {
		t.Fatalf("the claim still launches after %s", e.clock.Since(created))
	}
	if age := e.clock.Since(created); age < ttl || age > ttl+time.Second {
		t.Errorf("deleted after %s, want at the TTL %s", age, ttl)
	}
	cond = meta.FindStatusCondition(got.Status.Conditions, v1.ConditionTypeLaunched)
	if cond == nil || cond.Reason != "LaunchTimeout" || !strings.Contains(cond.Message, "UnauthorizedOperation") {
		t.Errorf("Launched condition %+v, want LaunchTimeout with the last error", cond)
	}
	if ev, ok := hasEvent(e.events(), "LaunchTimeout"); !ok || !strings.Contains(ev, "UnauthorizedOperation") {
		t.Errorf("no LaunchTimeout event naming the last error: %q", ev)
	}
}

// A launch that succeeds on a retry clears the failure.
func TestLaunchSucceedsOnRetry(t *testing.T) {
	e := newEnv(t, nil, claim("default-a", time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)))
	e.cloud.SetCreateErr(errors.New(`EC2NodeClass "default" is not ready`))
	res := e.reconcile(t, e.get(t, "default-a"))
	e.cloud.SetCreateErr(nil)
	e.clock.Step(res.RequeueAfter)
	e.reconcile(t, e.get(t, "default-a"))
	got := e.get(t, "default-a")
	if got.Status.ProviderID == "" || !meta.IsStatusConditionTrue(got.Status.Conditions, v1.ConditionTypeLaunched) {
		t.Errorf("not launched on the retry: %+v", got.Status)
	}
}

func TestNodeThatNeverRegistersTimesOut(t *testing.T) {
	e := newEnv(t, nil, claim("default-a", time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)))
	e.reconcile(t, e.get(t, "default-a"))
	e.reconcile(t, e.get(t, "default-a"))
	e.clock.Step(ttl - time.Second)
	if res := e.reconcile(t, e.get(t, "default-a")); res.RequeueAfter <= 0 {
		t.Errorf("not waiting for registration: %+v", res)
	}
	if e.get(t, "default-a").DeletionTimestamp != nil {
		t.Fatalf("deleted before the registration TTL")
	}
	e.clock.Step(2 * time.Second)
	before := metricstest.Sum(metrics.NodeClaimsDisrupted, "reason", "registration_timeout")
	e.reconcile(t, e.get(t, "default-a"))
	if e.get(t, "default-a").DeletionTimestamp == nil {
		t.Errorf("not deleted after the registration TTL")
	}
	if got := metricstest.Sum(metrics.NodeClaimsDisrupted, "reason", "registration_timeout") - before; got != 1 {
		t.Errorf("nodeclaims disrupted for registration_timeout rose by %v, want 1", got)
	}
	if _, ok := hasEvent(e.events(), "RegistrationTimeout"); !ok {
		t.Errorf("no RegistrationTimeout event")
	}
}

func readyNode(name, providerID string, taints ...corev1.Taint) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"kubernetes.io/hostname": name}},
		Spec:       corev1.NodeSpec{ProviderID: providerID, Taints: taints},
		Status: corev1.NodeStatus{
			Conditions:  []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
			Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")},
		},
	}
}

func TestNodeIsRegisteredThenInitialized(t *testing.T) {
	startup := corev1.Taint{Key: "example.com/agent-not-ready", Effect: corev1.TaintEffectNoSchedule}
	nc := claim("default-a", time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC))
	nc.Spec.StartupTaints = []corev1.Taint{startup}
	nc.Spec.Taints = []corev1.Taint{{Key: "dedicated", Value: "x", Effect: corev1.TaintEffectNoSchedule}}
	nc.Annotations = map[string]string{"example.com/team": "search", "example.com/kept": "claim"}
	e := newEnv(t, nil, nc)
	e.reconcile(t, e.get(t, "default-a"))
	launched := e.get(t, "default-a")
	node := readyNode("ip-10-0-0-1", launched.Status.ProviderID, v1.UnregisteredNoExecuteTaint, startup)
	node.Annotations = map[string]string{"example.com/kept": "node"}
	if err := e.kube.Create(context.Background(), node); err != nil {
		t.Fatal(err)
	}
	e.reconcile(t, launched)
	got := e.get(t, "default-a")
	if !meta.IsStatusConditionTrue(got.Status.Conditions, v1.ConditionTypeRegistered) || got.Status.NodeName != node.Name {
		t.Fatalf("not registered: %+v", got.Status)
	}
	if meta.IsStatusConditionTrue(got.Status.Conditions, v1.ConditionTypeInitialized) {
		t.Errorf("initialized while the startup taint is on the node")
	}
	n := &corev1.Node{}
	if err := e.kube.Get(context.Background(), client.ObjectKeyFromObject(node), n); err != nil {
		t.Fatal(err)
	}
	if n.Labels[v1.LabelNodeRegistered] != "true" || n.Labels[v1.LabelInstanceType] != "fake.large" || n.Labels[v1.LabelNodePool] != "default" {
		t.Errorf("node labels %v, want the claim's and registered", n.Labels)
	}
	if n.Annotations["example.com/team"] != "search" || n.Annotations["example.com/kept"] != "node" {
		t.Errorf("node annotations %v: want the claim's added, the node's own kept", n.Annotations)
	}
	if len(n.OwnerReferences) != 1 || n.OwnerReferences[0].UID != got.UID {
		t.Errorf("node owners %v, want the claim", n.OwnerReferences)
	}
	var keys []string
	for _, taint := range n.Spec.Taints {
		keys = append(keys, taint.Key)
	}
	if strings.Contains(strings.Join(keys, ","), v1.UnregisteredNoExecuteTaint.Key) || !strings.Contains(strings.Join(keys, ","), "dedicated") {
		t.Errorf("node taints %v: want the unregistered taint gone and the claim's taints added", keys)
	}
	// The agent removes its startup taint: the node is ready for pods.
	patch := client.MergeFrom(n.DeepCopy())
	var kept []corev1.Taint
	for _, taint := range n.Spec.Taints {
		if !taint.MatchTaint(&startup) {
			kept = append(kept, taint)
		}
	}
	n.Spec.Taints = kept
	if err := e.kube.Patch(context.Background(), n, patch); err != nil {
		t.Fatal(err)
	}
	e.reconcile(t, got)
	got = e.get(t, "default-a")
	if !meta.IsStatusConditionTrue(got.Status.Conditions, v1.ConditionTypeInitialized) || !meta.IsStatusConditionTrue(got.Status.Conditions, v1.ConditionTypeReady) {
		t.Errorf("not initialized: %v", got.Status.Conditions)
	}
	if err := e.kube.Get(context.Background(), client.ObjectKeyFromObject(node), n); err != nil || n.Labels[v1.LabelNodeInitialized] != "true" {
		t.Errorf("node not labelled initialized: %v %v", n.Labels, err)
	}
}

// A registered claim whose node is deleted lost its instance: it is deleted.
func TestClaimWhoseNodeWentIsDeleted(t *testing.T) {
	e := newEnv(t, nil, claim("default-a", time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)))
	e.reconcile(t, e.get(t, "default-a"))
	launched := e.get(t, "default-a")
	node := readyNode("ip-10-0-0-1", launched.Status.ProviderID)
	if err := e.kube.Create(context.Background(), node); err != nil {
		t.Fatal(err)
	}
	e.reconcile(t, launched)
	if err := e.kube.Delete(context.Background(), node); err != nil {
		t.Fatal(err)
	}
	e.reconcile(t, e.get(t, "default-a"))
	if e.get(t, "default-a").DeletionTimestamp == nil {
		t.Errorf("claim not deleted after its registered node went")
	}
}

// A provider that launched other than as planned (on-demand for a claim that asked
// for spot, for want of the spot service-linked role) says why: the claim's
// Launched condition carries its reason and message, and a Warning event repeats it.
func TestLaunchNotAsPlannedIsSurfaced(t *testing.T) {
	e := newEnv(t, nil)
	e.cloud.LaunchedCondition = &metav1.Condition{Type: v1.ConditionTypeLaunched, Status: metav1.ConditionTrue, Reason: "SpotUnavailable", Message: "launched on-demand instead of spot: create the role"}
	nc := claim("default-a", time.Time{})
	nc.Finalizers = nil
	nc.CreationTimestamp = metav1.NewTime(e.clock.Now())
	if err := e.kube.Create(context.Background(), nc); err != nil {
		t.Fatal(err)
	}
	e.reconcile(t, e.get(t, "default-a"))
	cond := meta.FindStatusCondition(e.get(t, "default-a").Status.Conditions, v1.ConditionTypeLaunched)
	if cond == nil || cond.Status != metav1.ConditionTrue || cond.Reason != "SpotUnavailable" || cond.Message != "launched on-demand instead of spot: create the role" {
		t.Errorf("Launched condition %+v; want True with the provider's reason and message", cond)
	}
	if ev, ok := hasEvent(e.events(), "SpotUnavailable"); !ok || !strings.Contains(ev, "Warning") {
		t.Errorf("event %q; want a SpotUnavailable Warning", ev)
	}
}

// countingWrites counts the claim writes and status writes that reach the API
// server, and keeps the resourceVersion each one produced.
func countingWrites(writes, statusWrites *int, versions *[]string) *interceptor.Funcs {
	return &interceptor.Funcs{
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			if _, ok := obj.(*v1.NodeClaim); !ok {
				return c.Patch(ctx, obj, patch, opts...)
			}
			*writes++
			err := c.Patch(ctx, obj, patch, opts...)
			*versions = append(*versions, obj.GetResourceVersion())
			return err
		},
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
			if _, ok := obj.(*v1.NodeClaim); !ok {
				return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
			}
			*statusWrites++
			err := c.SubResource(sub).Patch(ctx, obj, patch, opts...)
			*versions = append(*versions, obj.GetResourceVersion())
			return err
		},
	}
}

// Every write's watch event brings a Reconcile, often before the cache has the
// write: one that reads a version this process already wrote over does nothing
// (before, its locked status write failed with a conflict and was retried every
// 100 ms until the cache caught up), and the current version is reconciled as usual.
func TestReconcileOfAVersionItWroteOverWritesNothing(t *testing.T) {
	var writes, statusWrites int
	var versions []string
	e := newEnv(t, countingWrites(&writes, &statusWrites, &versions), claim("default-a", time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)))
	created := e.get(t, "default-a")
	e.reconcile(t, created)
	launched := e.get(t, "default-a")
	if len(versions) != 2 || versions[1] != launched.ResourceVersion {
		t.Fatalf("the launch wrote versions %v, want its status then its labels, ending at %s", versions, launched.ResourceVersion)
	}
	if err := e.kube.Create(context.Background(), readyNode("ip-10-0-0-1", launched.Status.ProviderID, v1.UnregisteredNoExecuteTaint)); err != nil {
		t.Fatal(err)
	}
	// What the cache shows until it has the launch: the claim as created, then the
	// claim with the launch's status and without its labels.
	statusOnly := launched.DeepCopy()
	statusOnly.ResourceVersion = versions[0]
	for _, k := range launchLabels {
		delete(statusOnly.Labels, k)
	}
	writes, statusWrites = 0, 0
	for _, outdated := range []*v1.NodeClaim{created, statusOnly} {
		e.reconcile(t, outdated)
	}
	if writes+statusWrites != 0 {
		t.Fatalf("Reconciles of versions this process wrote over made %d writes and %d status writes, want none", writes, statusWrites)
	}
	e.reconcile(t, launched)
	got := e.get(t, "default-a")
	if !meta.IsStatusConditionTrue(got.Status.Conditions, v1.ConditionTypeRegistered) {
		t.Fatalf("the current version was not reconciled: %v", got.Status.Conditions)
	}
	if n := e.cloud.Creates("default-a"); n != 1 {
		t.Errorf("Create called %d times, want 1", n)
	}
	// Once the current version is read (and nothing more written), nothing older is
	// remembered: a claim's record does not outlive the lag it covers.
	e.reconcile(t, got)
	if _, remembered := e.c.writes.replaced.Load(got.UID); remembered {
		t.Errorf("the replaced versions are still remembered after the current one was read")
	}
}

// A node that is already Ready when it registers is registered and initialized in
// one status write and one node write.
func TestReadyNodeIsRegisteredAndInitializedInOneWrite(t *testing.T) {
	var writes, statusWrites int
	var versions []string
	e := newEnv(t, countingWrites(&writes, &statusWrites, &versions), claim("default-a", time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)))
	e.reconcile(t, e.get(t, "default-a"))
	launched := e.get(t, "default-a")
	node := readyNode("ip-10-0-0-1", launched.Status.ProviderID, v1.UnregisteredNoExecuteTaint)
	if err := e.kube.Create(context.Background(), node); err != nil {
		t.Fatal(err)
	}
	writes, statusWrites = 0, 0
	e.reconcile(t, launched)
	got := e.get(t, "default-a")
	for _, cond := range []string{v1.ConditionTypeRegistered, v1.ConditionTypeInitialized, v1.ConditionTypeReady} {
		if !meta.IsStatusConditionTrue(got.Status.Conditions, cond) {
			t.Errorf("%s is not True: %v", cond, got.Status.Conditions)
		}
	}
	if writes != 0 || statusWrites != 1 {
		t.Errorf("registration took %d claim writes and %d status writes, want 0 and 1", writes, statusWrites)
	}
	n := &corev1.Node{}
	if err := e.kube.Get(context.Background(), client.ObjectKeyFromObject(node), n); err != nil {
		t.Fatal(err)
	}
	if n.Labels[v1.LabelNodeRegistered] != "true" || n.Labels[v1.LabelNodeInitialized] != "true" {
		t.Errorf("node labels %v, want registered and initialized", n.Labels)
	}
	e.reconcile(t, got)
	if writes != 0 || statusWrites != 1 {
		t.Errorf("the next Reconcile wrote again: %d claim writes and %d status writes", writes, statusWrites)
	}
}

// The node sync writes the node's whole taint list. A Reconcile that reads the
// claim as registered but the Node from before the registration (two watches, the
// Node's busier) must not write that old list back: the claim's taints would be lost
// for good (they are synced once) and a startup taint already removed would return.
func TestOutdatedNodeReadDoesNotUndoRegistration(t *testing.T) {
	startup := corev1.Taint{Key: "example.com/agent-not-ready", Effect: corev1.TaintEffectNoSchedule}
	dedicated := corev1.Taint{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule}
	nc := claim("default-a", time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC))
	nc.Spec.StartupTaints = []corev1.Taint{startup}
	nc.Spec.Taints = []corev1.Taint{dedicated}
	var outdatedNode *corev1.Node
	funcs := &interceptor.Funcs{List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
		if nodes, ok := list.(*corev1.NodeList); ok && outdatedNode != nil {
			nodes.Items = []corev1.Node{*outdatedNode.DeepCopy()}
			return nil
		}
		return c.List(ctx, list, opts...)
	}}
	e := newEnv(t, funcs, nc)
	e.reconcile(t, e.get(t, "default-a"))
	launched := e.get(t, "default-a")
	node := readyNode("ip-10-0-0-1", launched.Status.ProviderID, v1.UnregisteredNoExecuteTaint, startup)
	if err := e.kube.Create(context.Background(), node); err != nil {
		t.Fatal(err)
	}
	beforeRegistration := &corev1.Node{}
	must(t, e.kube.Get(context.Background(), client.ObjectKeyFromObject(node), beforeRegistration))
	e.reconcile(t, launched)
	registered := e.get(t, "default-a")
	if !meta.IsStatusConditionTrue(registered.Status.Conditions, v1.ConditionTypeRegistered) {
		t.Fatalf("not registered: %v", registered.Status.Conditions)
	}
	// The agent removes its startup taint; then a Reconcile reads the Node as it was
	// before the registration.
	n := &corev1.Node{}
	must(t, e.kube.Get(context.Background(), client.ObjectKeyFromObject(node), n))
	patch := client.MergeFrom(n.DeepCopy())
	n.Spec.Taints = []corev1.Taint{dedicated}
	must(t, e.kube.Patch(context.Background(), n, patch))
	outdatedNode = beforeRegistration
	if _, err := e.c.Reconcile(context.Background(), registered.DeepCopy()); err != nil {
		t.Fatalf("reconcile: %v", err)
	}
	must(t, e.kube.Get(context.Background(), client.ObjectKeyFromObject(node), n))
	if len(n.Spec.Taints) != 1 || !n.Spec.Taints[0].MatchTaint(&dedicated) {
		t.Errorf("node taints %v after a Reconcile that read the Node from before registration, want only %s", n.Spec.Taints, dedicated.ToString())
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// A write that changed nothing keeps the claim's version: that version is the
// current one, and remembering it would silence the claim until its next change.
func TestOwnWritesRememberOnlyReplacedVersions(t *testing.T) {
	var w ownWrites
	nc := claim("default-a", time.Time{})
	w.wrote(nc.UID, "5", "5")
	nc.ResourceVersion = "5"
	if w.outdated(nc) {
		t.Fatalf("a write that changed nothing made the current version outdated")
	}
	w.wrote(nc.UID, "5", "6")
	w.wrote(nc.UID, "6", "7")
	for _, rv := range []string{"5", "6"} {
		nc.ResourceVersion = rv
		if !w.outdated(nc) {
			t.Errorf("version %s, written over, is not outdated", rv)
		}
	}
	nc.ResourceVersion = "7"
	if w.outdated(nc) {
		t.Errorf("the version the last write made is outdated")
	}
	nc.ResourceVersion = "5"
	if w.outdated(nc) {
		t.Errorf("replaced versions are still remembered after the current one was read")
	}
}

// A claim can be gone before a Reconcile sees it deleting (its finalizer released
// between two reads); its delete event drops everything remembered of it.
func TestDeletedClaimIsForgotten(t *testing.T) {
	created := time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)
	e := newEnv(t, nil, claim("launched", created), claim("refused", created), claim("failing", created))
	e.reconcile(t, e.get(t, "launched"))
	e.cloud.SetCreateErr(cloudprovider.NewInsufficientCapacityError(errors.New("InsufficientInstanceCapacity")))
	e.reconcile(t, e.get(t, "refused"))
	e.cloud.SetCreateErr(errors.New("creating fleet, RequestLimitExceeded"))
	e.reconcile(t, e.get(t, "failing"))
	remembered := func() []string {
		var out []string
		for _, name := range []string{"launched", "refused", "failing"} {
			uid := types.UID("uid-" + name)
			if _, ok := e.c.launched.Load(uid); ok {
				out = append(out, name+" launched")
			}
			if _, ok := e.c.refused.Load(uid); ok {
				out = append(out, name+" refused")
			}
			if e.c.retries.Get(string(uid)) > 0 {
				out = append(out, name+" retried")
			}
			if _, ok := e.c.writes.replaced.Load(uid); ok {
				out = append(out, name+" written")
			}
		}
		return out
	}
	want := []string{"launched launched", "launched written", "refused refused", "failing retried", "failing written"}
	if got := remembered(); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("remembered %v before the deletions, want %v", got, want)
	}
	deletions := e.c.deletions()
	for _, name := range []string{"launched", "refused", "failing"} {
		deletions.Delete(context.Background(), event.DeleteEvent{Object: e.get(t, name)}, nil)
	}
	if got := remembered(); len(got) != 0 {
		t.Errorf("still remembered after the claims' delete events: %v", got)
	}
}

// A claim deleted while its instance launched (a gang rolled back, a kubectl
// delete) had no providerID for termination to terminate: the launch that finds it
// gone terminates the instance, rather than leave it billing until garbage
// collection finds it.
func TestInstanceOfAClaimDeletedWhileItLaunchedIsTerminated(t *testing.T) {
	created := time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)
	funcs := &interceptor.Funcs{SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
		// Termination let the claim go while EC2 was launching its instance.
		nc := &v1.NodeClaim{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(obj), nc); err == nil {
			nc.Finalizers = nil
			if err := c.Update(ctx, nc); err != nil {
				return err
			}
			if err := c.Delete(ctx, nc); err != nil {
				return err
			}
		}
		return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
	}}
	e := newEnv(t, funcs, claim("default-a", created))
	e.reconcile(t, e.get(t, "default-a"))
	if e.cloud.Creates("default-a") != 1 || e.cloud.Instances() != 0 {
		t.Fatalf("%d launches, %d instances left; want the one launched terminated", e.cloud.Creates("default-a"), e.cloud.Instances())
	}

	// The launch was recorded in memory but its write conflicted; the claim's
	// delete event then comes without a providerID on it: the instance goes.
	conflict := &interceptor.Funcs{SubResourcePatch: func(context.Context, client.Client, string, client.Object, client.Patch, ...client.SubResourcePatchOption) error {
		return apierrors.NewConflict(v1.SchemeGroupVersion.WithResource("nodeclaims").GroupResource(), "default-b", errors.New("changed"))
	}}
	e = newEnv(t, conflict, claim("default-b", created))
	e.c.Reconcile(context.Background(), e.get(t, "default-b"))
	if e.cloud.Instances() != 1 {
		t.Fatalf("%d instances after a launch whose write conflicted; want 1", e.cloud.Instances())
	}
	e.c.deletions().Delete(context.Background(), event.DeleteEvent{Object: e.get(t, "default-b")}, nil)
	deadline := time.Now().Add(10 * time.Second)
	for e.cloud.Instances() != 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if e.cloud.Instances() != 0 {
		t.Errorf("the instance of a claim deleted before its launch was recorded is still there")
	}
}
