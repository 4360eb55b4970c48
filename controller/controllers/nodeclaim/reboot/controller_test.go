package reboot

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	fakeclient "sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/dovetail-sh/dovetail/controller/apis/scheme"
	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/controller/cloudprovider"
	"github.com/dovetail-sh/dovetail/controller/cloudprovider/fake"
	"github.com/dovetail-sh/dovetail/controller/metrics"
)

const (
	providerID = "fake:///sick"
	nodeName   = "sick-node"
)

var requested = time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)

type env struct {
	kube     client.Client
	cloud    *fake.CloudProvider
	clock    *clocktesting.FakeClock
	recorder *record.FakeRecorder
	c        *Controller

	mu        sync.Mutex
	evictions []string
}

// rebootingClaim is a claim repair committed a reboot to at requested, its drain
// bounded by bound ("" unbounded).
func rebootingClaim(bound string) *v1.NodeClaim {
	nc := &v1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "sick", UID: "uid-sick", Finalizers: []string{v1.TerminationFinalizer},
		Labels: map[string]string{v1.LabelNodePool: "default"}, Annotations: map[string]string{}},
		Status: v1.NodeClaimStatus{ProviderID: providerID, NodeName: nodeName}}
	if bound != "" {
		nc.Annotations[v1.RebootTerminationGracePeriodAnnotationKey] = bound
	}
	nc.SetDisruptionReason(string(v1.DisruptionReasonUnhealthy), requested)
	meta.SetStatusCondition(&nc.Status.Conditions, metav1.Condition{Type: v1.ConditionTypeRebooting, Status: metav1.ConditionTrue, Reason: v1.RebootRequested,
		Message: "rebooting for AcceleratedHardwareReady/NvidiaXID48Error", LastTransitionTime: metav1.NewTime(requested)})
	return nc
}

func sickNode() *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeName}, Spec: corev1.NodeSpec{ProviderID: providerID},
		Status: corev1.NodeStatus{NodeInfo: corev1.NodeSystemInfo{BootID: "boot-1"},
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
}

func appPod(name string, mutate ...func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
		Spec:   corev1.PodSpec{NodeName: nodeName, Containers: []corev1.Container{{Name: "c", Image: "pause"}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	for _, m := range mutate {
		m(p)
	}
	return p
}

// newEnv runs the controller at requested; blockEvictions answers every eviction
// 429, as a PodDisruptionBudget allowing none does.
func newEnv(t *testing.T, nc *v1.NodeClaim, blockEvictions bool, objs ...client.Object) *env {
	t.Helper()
	clk := clocktesting.NewFakeClock(requested)
	e := &env{clock: clk, recorder: record.NewFakeRecorder(100)}
	funcs := interceptor.Funcs{
		SubResourceCreate: func(ctx context.Context, c client.Client, subResource string, obj, sub client.Object, opts ...client.SubResourceCreateOption) error {
			if subResource == "eviction" {
				e.mu.Lock()
				e.evictions = append(e.evictions, obj.GetName())
				e.mu.Unlock()
				if blockEvictions {
					return apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 0)
				}
				return c.Delete(ctx, obj)
			}
			return c.SubResource(subResource).Create(ctx, obj, sub, opts...)
		},
	}
	e.kube = fakeclient.NewClientBuilder().WithScheme(scheme.New()).WithObjects(append(objs, nc)...).
		WithStatusSubresource(&v1.NodeClaim{}, &corev1.Node{}).
		WithIndex(&corev1.Pod{}, "spec.nodeName", func(o client.Object) []string { return []string{o.(*corev1.Pod).Spec.NodeName} }).
		WithInterceptorFuncs(funcs).Build()
	e.cloud = fake.New(clk)
	e.cloud.AddInstance(&v1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: nc.Name}, Status: v1.NodeClaimStatus{ProviderID: providerID}})
	e.c = NewController(e.kube, e.cloud, clk, e.recorder)
	return e
}

func (e *env) reconcile(t *testing.T) (time.Duration, error) {
	t.Helper()
	nc := e.claim(t)
	if nc == nil {
		t.Fatal("the claim is gone")
	}
	res, err := e.c.Reconcile(context.Background(), nc)
	return res.RequeueAfter, err
}

func (e *env) claim(t *testing.T) *v1.NodeClaim {
	t.Helper()
	nc := &v1.NodeClaim{}
	if err := e.kube.Get(context.Background(), client.ObjectKey{Name: "sick"}, nc); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		t.Fatal(err)
	}
	return nc
}

func (e *env) node(t *testing.T) *corev1.Node {
	t.Helper()
	n := &corev1.Node{}
	if err := e.kube.Get(context.Background(), client.ObjectKey{Name: nodeName}, n); err != nil {
		t.Fatal(err)
	}
	return n
}

// bootAs is the instance coming back from its reboot with a new boot ID.
func (e *env) bootAs(t *testing.T, id string, ready corev1.ConditionStatus) {
	t.Helper()
	n := e.node(t)
	n.Status.NodeInfo.BootID = id
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: ready}}
	if err := e.kube.Status().Update(context.Background(), n); err != nil {
		t.Fatal(err)
	}
}

func (e *env) reboots() []string { return e.cloud.Reboots() }

func rebooting(nc *v1.NodeClaim) *metav1.Condition {
	return meta.FindStatusCondition(nc.Status.Conditions, v1.ConditionTypeRebooting)
}

func events(r *record.FakeRecorder) string {
	var out []string
	for {
		select {
		case e := <-r.Events:
			out = append(out, e)
		default:
			return strings.Join(out, "\n")
		}
	}
}

func count(result string) float64 {
	return testutil.ToFloat64(metrics.NodesReboots.WithLabelValues(result))
}

// The whole reboot, as Karpenter v1.15's nodeclaim.reboot controller: the node is
// fenced and drained, its boot ID kept, the reboot asked once; a new boot ID lifts
// the fence, and Ready ends the reboot with the claim, its node and its pods' place
// kept.
func TestRebootDrainsReissuesNothingAndSucceeds(t *testing.T) {
	before := count(resultSucceeded)
	e := newEnv(t, rebootingClaim("5m0s"), false, sickNode(), appPod("app"))
	if _, err := e.reconcile(t); err != nil {
		t.Fatal(err)
	}
	if !fenced(e.node(t)) || len(e.evictions) != 1 || len(e.reboots()) != 0 {
		t.Fatalf("first pass: fenced %v, evictions %v, reboots %v; want fenced, the pod evicted, no reboot while it drains", fenced(e.node(t)), e.evictions, e.reboots())
	}
	if after, err := e.reconcile(t); err != nil || after <= 0 || len(e.reboots()) != 0 {
		t.Fatalf("drained within the 5-second least drain: requeue %v, %v, reboots %v; want to wait", after, err, e.reboots())
	}
	e.clock.Step(6 * time.Second)
	if _, err := e.reconcile(t); err != nil {
		t.Fatal(err)
	}
	nc := e.claim(t)
	if len(e.reboots()) != 1 || rebooting(nc).Reason != v1.RebootIssued || nc.Annotations[v1.RebootPreBootIDAnnotationKey] != "boot-1" {
		t.Fatalf("reboots %v, Rebooting %+v, pre-boot id %q; want one reboot, Issued, boot-1 kept", e.reboots(), rebooting(nc), nc.Annotations[v1.RebootPreBootIDAnnotationKey])
	}
	if !strings.HasPrefix(e.reboots()[0], "uid-sick-") {
		t.Errorf("operation id %q does not name the claim", e.reboots()[0])
	}
	// Not back yet: it waits, fenced, and asks nothing more.
	if _, err := e.reconcile(t); err != nil || len(e.reboots()) != 1 || !fenced(e.node(t)) {
		t.Fatalf("before the new boot: %v, reboots %v, fenced %v", err, e.reboots(), fenced(e.node(t)))
	}
	e.bootAs(t, "boot-2", corev1.ConditionFalse)
	if _, err := e.reconcile(t); err != nil {
		t.Fatal(err)
	}
	if fenced(e.node(t)) || rebooting(e.claim(t)).Status != metav1.ConditionTrue || !strings.Contains(events(e.recorder), "RebootObserved") {
		t.Fatal("a new boot ID lifts the fence and says so; the reboot ends only once the node is Ready")
	}
	e.bootAs(t, "boot-2", corev1.ConditionTrue)
	if _, err := e.reconcile(t); err != nil {
		t.Fatal(err)
	}
	nc = e.claim(t)
	if c := rebooting(nc); c.Status != metav1.ConditionFalse || c.Reason != v1.RebootSucceeded || nc.DeletionTimestamp != nil {
		t.Fatalf("Rebooting %+v, deleting %v; want False/RebootSucceeded and the claim kept", c, nc.DeletionTimestamp != nil)
	}
	if _, ok := nc.Annotations[v1.RebootPreBootIDAnnotationKey]; ok || meta.FindStatusCondition(nc.Status.Conditions, v1.ConditionTypeDisruptionReason) != nil {
		t.Errorf("the reboot's annotation or DisruptionReason stayed: %v, %+v", nc.Annotations, nc.Status.Conditions)
	}
	if got := count(resultSucceeded) - before; got != 1 {
		t.Errorf("karpenter_nodes_reboots_total{result=succeeded} rose by %v, want 1", got)
	}
}

// What ends a reboot another way: a refusal or a node that never comes back is
// replaced, its drain bounded as the reboot's; a bound that does not parse leaves
// the node as it is; a transient error is retried; a restart after the reboot was
// asked does not ask again; pods a PDB holds ride the reboot once the bound is out;
// 0s reboots without a drain.
func TestRebootEndsOtherwise(t *testing.T) {
	t.Run("the cloud refuses: replaced", func(t *testing.T) {
		before := count(resultProviderError)
		e := newEnv(t, rebootingClaim("0s"), false, sickNode())
		e.cloud.RebootErr = &cloudprovider.NodeRebootFailedError{Err: errors.New("UnauthorizedOperation")}
		if _, err := e.reconcile(t); err != nil {
			t.Fatal(err)
		}
		if nc := e.claim(t); nc != nil && nc.DeletionTimestamp == nil {
			t.Fatal("a refused reboot did not fall back to replacing the node")
		}
		if fenced(e.node(t)) || count(resultProviderError)-before != 1 || !strings.Contains(events(e.recorder), "RebootFailed") {
			t.Error("the fence stays, or the failure is not counted and told")
		}
	})
	t.Run("a transient error: retried, then the issuance timeout replaces", func(t *testing.T) {
		e := newEnv(t, rebootingClaim("0s"), false, sickNode())
		e.cloud.RebootErr = errors.New("RequestLimitExceeded")
		if _, err := e.reconcile(t); err == nil || e.claim(t).DeletionTimestamp != nil {
			t.Fatal("a throttled reboot was not retried")
		}
		e.clock.Step(IssuanceTimeout + time.Second)
		if _, err := e.reconcile(t); err != nil {
			t.Fatal(err)
		}
		if nc := e.claim(t); nc != nil && nc.DeletionTimestamp == nil {
			t.Fatal("no reboot accepted within the issuance timeout, and the node stays")
		}
	})
	t.Run("the node never comes back: replaced with its drain bounded", func(t *testing.T) {
		before := count(resultRecoveryTimeout)
		e := newEnv(t, rebootingClaim("0s"), false, sickNode())
		if _, err := e.reconcile(t); err != nil || rebooting(e.claim(t)).Reason != v1.RebootIssued {
			t.Fatalf("not issued: %v", err)
		}
		e.clock.Step(ObservationWindow - time.Minute)
		if _, err := e.reconcile(t); err != nil || e.claim(t).DeletionTimestamp != nil {
			t.Fatal("replaced inside the observation window")
		}
		e.clock.Step(2 * time.Minute)
		if _, err := e.reconcile(t); err != nil {
			t.Fatal(err)
		}
		nc := e.claim(t)
		if nc != nil && nc.DeletionTimestamp == nil {
			t.Fatal("a node that did not come back within the window stays")
		}
		if nc != nil && nc.Annotations[v1.NodeClaimTerminationTimestampAnnotationKey] != e.clock.Now().UTC().Format(time.RFC3339) {
			t.Errorf("termination deadline %q; want now plus the reboot's 0s bound", nc.Annotations[v1.NodeClaimTerminationTimestampAnnotationKey])
		}
		if count(resultRecoveryTimeout)-before != 1 {
			t.Error("karpenter_nodes_reboots_total{result=recovery_timeout} not counted")
		}
	})
	t.Run("an invalid bound: failed, the node kept", func(t *testing.T) {
		e := newEnv(t, rebootingClaim("5min"), false, sickNode())
		if _, err := e.reconcile(t); err != nil {
			t.Fatal(err)
		}
		nc := e.claim(t)
		if c := rebooting(nc); nc.DeletionTimestamp != nil || c.Status != metav1.ConditionFalse || c.Reason != v1.RebootFailed || len(e.reboots()) != 0 {
			t.Fatalf("Rebooting %+v, deleting %v, reboots %v; want RebootFailed, kept, nothing asked", c, nc.DeletionTimestamp != nil, e.reboots())
		}
	})
	t.Run("a restart after the reboot was asked: not asked again", func(t *testing.T) {
		nc := rebootingClaim("0s")
		nc.Annotations[v1.RebootPreBootIDAnnotationKey] = "boot-0"
		e := newEnv(t, nc, false, sickNode())
		if _, err := e.reconcile(t); err != nil {
			t.Fatal(err)
		}
		if len(e.reboots()) != 0 || rebooting(e.claim(t)).Reason != v1.RebootIssued {
			t.Fatalf("reboots %v, Rebooting %+v; the boot changed since, so it is issued without asking", e.reboots(), rebooting(e.claim(t)))
		}
	})
	t.Run("pods a PDB holds ride the reboot once the bound runs out", func(t *testing.T) {
		e := newEnv(t, rebootingClaim("1m0s"), true, sickNode(), appPod("held"))
		if _, err := e.reconcile(t); err != nil || len(e.reboots()) != 0 {
			t.Fatalf("rebooted while the bound still holds the drain: %v", err)
		}
		e.clock.Step(61 * time.Second)
		if _, err := e.reconcile(t); err != nil || len(e.reboots()) != 1 {
			t.Fatalf("not rebooted once the bound ran out: %v, reboots %v", err, e.reboots())
		}
		pod := &corev1.Pod{}
		if err := e.kube.Get(context.Background(), client.ObjectKey{Namespace: "default", Name: "held"}, pod); err != nil {
			t.Errorf("the held pod was deleted (%v); a reboot keeps it", err)
		}
	})
	t.Run("0s: no drain", func(t *testing.T) {
		e := newEnv(t, rebootingClaim("0s"), false, sickNode(), appPod("app"))
		if _, err := e.reconcile(t); err != nil || len(e.evictions) != 0 || len(e.reboots()) != 1 {
			t.Fatalf("%v, evictions %v, reboots %v; want rebooted at once, nothing evicted", err, e.evictions, e.reboots())
		}
	})
}
