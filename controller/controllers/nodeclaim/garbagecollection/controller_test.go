package garbagecollection

import (
	"context"
	"sort"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	fakeclient "sigs.k8s.io/controller-runtime/pkg/client/fake"

	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/controller/cloudprovider/fake"
	"github.com/dovetail-sh/dovetail/controller/metrics"
	"github.com/dovetail-sh/dovetail/controller/metrics/metricstest"
)

var start = time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)

type env struct {
	kube  client.Client
	cloud *fake.CloudProvider
	clock *clocktesting.FakeClock
	c     *Controller
}

func newEnv(t *testing.T, objs ...client.Object) *env {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := v1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	clk := clocktesting.NewFakeClock(start)
	e := &env{clock: clk, cloud: fake.New(clk)}
	e.kube = fakeclient.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).WithStatusSubresource(&v1.NodeClaim{}).Build()
	e.c = NewController(e.kube, e.cloud, clk)
	return e
}

func pid(id string) string { return fake.ProviderIDPrefix + "test-zone-a/" + id }

// instance is one the cloud runs, tagged with a claim, launched at launched.
func (e *env) instance(id, claim string, launched time.Time) {
	e.cloud.AddInstance(&v1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: claim, CreationTimestamp: metav1.NewTime(launched)},
		Status: v1.NodeClaimStatus{ProviderID: pid(id)}})
}

// claim exists since created; with an id, it recorded that instance's launch then.
func claim(name, id string, created time.Time) *v1.NodeClaim {
	nc := &v1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(created), Finalizers: []string{v1.TerminationFinalizer}}}
	if id != "" {
		nc.Status.ProviderID = pid(id)
		nc.Status.Conditions = []metav1.Condition{{Type: v1.ConditionTypeLaunched, Status: metav1.ConditionTrue, Reason: "Launched", LastTransitionTime: metav1.NewTime(created)}}
	}
	return nc
}

func (e *env) collect(t *testing.T) {
	t.Helper()
	if err := e.c.Collect(context.Background()); err != nil {
		t.Fatalf("collect: %v", err)
	}
}

func (e *env) terminated() string {
	d := e.cloud.Deleted()
	sort.Strings(d)
	return strings.Join(d, ",")
}

func (e *env) deleting(t *testing.T, name string) bool {
	t.Helper()
	nc := &v1.NodeClaim{}
	if err := e.kube.Get(context.Background(), client.ObjectKey{Name: name}, nc); err != nil {
		if apierrors.IsNotFound(err) {
			return true
		}
		t.Fatal(err)
	}
	return nc.DeletionTimestamp != nil
}

// An instance no claim records is terminated once past the grace a launch needs
// to record itself; the instances claims record are kept.
func TestOrphanedInstanceIsTerminated(t *testing.T) {
	e := newEnv(t, claim("default-a", "i-a", start.Add(-time.Hour)))
	e.instance("i-a", "default-a", start.Add(-time.Hour))
	e.instance("i-gone", "default-gone", start.Add(-time.Hour))
	e.instance("i-new", "default-new", start.Add(-DefaultGrace/2))
	e.collect(t)
	if got := e.terminated(); got != pid("i-gone") {
		t.Errorf("terminated %q, want only the instance of the claim that is gone", got)
	}
	e.clock.Step(DefaultGrace)
	e.collect(t)
	if got := e.terminated(); got != pid("i-gone")+","+pid("i-new") {
		t.Errorf("terminated %q, want the young orphan too once past the grace", got)
	}
}

// A claim whose launch went unrecorded (its process died between the launch and
// the status write) keeps its instance while its next launch may still adopt it;
// the lifecycle controller gives up on the claim after the registration TTL, and
// then the instance goes.
func TestInstanceOfAClaimThatRecordedNothingIsTerminatedAfterTheLaunchGrace(t *testing.T) {
	e := newEnv(t, claim("default-a", "", start))
	e.instance("i-a", "default-a", start)
	e.clock.Step(DefaultGrace * 2)
	e.collect(t)
	if got := e.terminated(); got != "" {
		t.Fatalf("terminated %q while its claim may still adopt it", got)
	}
	e.clock.SetTime(start.Add(DefaultLaunchGrace))
	e.collect(t)
	if got := e.terminated(); got != pid("i-a") {
		t.Errorf("terminated %q, want the instance no claim adopted within %s", got, DefaultLaunchGrace)
	}
}

// A deleting claim that recorded no launch will never adopt the instance tagged
// with it, and its finalizer goes without terminating anything.
func TestInstanceOfADeletingClaimThatRecordedNothingIsTerminated(t *testing.T) {
	nc := claim("default-a", "", start)
	nc.DeletionTimestamp = &metav1.Time{Time: start}
	e := newEnv(t, nc)
	e.instance("i-a", "default-a", start)
	e.clock.Step(DefaultGrace)
	e.collect(t)
	if got := e.terminated(); got != pid("i-a") {
		t.Errorf("terminated %q, want the instance of the deleting claim", got)
	}
}

// A claim launched twice (a launch whose result was lost, then another) records
// one instance; the other is terminated.
func TestSecondInstanceOfAClaimIsTerminated(t *testing.T) {
	e := newEnv(t, claim("default-a", "i-b", start))
	e.instance("i-a", "default-a", start)
	e.instance("i-b", "default-a", start)
	e.clock.Step(DefaultGrace)
	e.collect(t)
	if got := e.terminated(); got != pid("i-a") {
		t.Errorf("terminated %q, want the instance the claim did not record", got)
	}
}

// A launched claim whose instance is gone (reclaimed, terminated by hand) is
// deleted once past the grace, so its pods are planned again.
func TestClaimWhoseInstanceVanishedIsDeleted(t *testing.T) {
	e := newEnv(t, claim("default-a", "i-a", start), claim("default-b", "i-b", start), claim("default-c", "", start))
	e.instance("i-b", "default-b", start)
	e.collect(t)
	if e.deleting(t, "default-a") {
		t.Fatalf("deleted within the grace after its launch")
	}
	e.clock.Step(DefaultGrace)
	before := metricstest.Sum(metrics.NodeClaimsDisrupted, "reason", "garbage_collected")
	e.collect(t)
	if !e.deleting(t, "default-a") {
		t.Errorf("claim whose instance vanished not deleted")
	}
	if got := metricstest.Sum(metrics.NodeClaimsDisrupted, "reason", "garbage_collected") - before; got != 1 {
		t.Errorf("nodeclaims disrupted for garbage_collected rose by %v, want 1", got)
	}
	if e.deleting(t, "default-b") || e.deleting(t, "default-c") {
		t.Errorf("a claim with its instance, or one not launched yet, was deleted")
	}
}
