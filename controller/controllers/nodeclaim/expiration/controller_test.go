package expiration

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	fakeclient "sigs.k8s.io/controller-runtime/pkg/client/fake"

	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
)

var start = time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)

func setup(t *testing.T, nc *v1.NodeClaim) (client.Client, *clocktesting.FakeClock, *record.FakeRecorder, *Controller) {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := v1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	kube := fakeclient.NewClientBuilder().WithScheme(scheme).WithObjects(nc).WithStatusSubresource(&v1.NodeClaim{}).Build()
	clk := clocktesting.NewFakeClock(start)
	recorder := record.NewFakeRecorder(10)
	return kube, clk, recorder, NewController(kube, clk, recorder)
}

func claim(expireAfter string) *v1.NodeClaim {
	return &v1.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "default-a", CreationTimestamp: metav1.NewTime(start), Finalizers: []string{v1.TerminationFinalizer},
			Labels: map[string]string{v1.LabelNodePool: "default", v1.LabelCapacityType: v1.CapacityTypeSpot}},
		Spec: v1.NodeClaimSpec{ExpireAfter: v1.MustParseNillableDuration(expireAfter)},
	}
}

func reconcileFresh(t *testing.T, kube client.Client, c *Controller) (time.Duration, *v1.NodeClaim) {
	t.Helper()
	nc := &v1.NodeClaim{}
	if err := kube.Get(context.Background(), client.ObjectKey{Name: "default-a"}, nc); err != nil {
		t.Fatal(err)
	}
	res, err := c.Reconcile(context.Background(), nc)
	if err != nil {
		t.Fatal(err)
	}
	if err := kube.Get(context.Background(), client.ObjectKey{Name: "default-a"}, nc); err != nil {
		t.Fatal(err)
	}
	return res.RequeueAfter, nc
}

// A claim lives until its expireAfter, counted from its creation, and is then
// deleted whatever budgets say; the controller wakes exactly when it is due.
func TestClaimIsDeletedWhenItExpires(t *testing.T) {
	kube, clk, recorder, c := setup(t, claim("720h"))
	clk.Step(700 * time.Hour)
	wait, nc := reconcileFresh(t, kube, c)
	if nc.DeletionTimestamp != nil {
		t.Fatalf("deleted before expiring")
	}
	if wait != 20*time.Hour {
		t.Errorf("requeued after %s, want the 20h left", wait)
	}
	clk.Step(wait)
	_, nc = reconcileFresh(t, kube, c)
	if nc.DeletionTimestamp == nil {
		t.Fatalf("not deleted once expired")
	}
	select {
	case ev := <-recorder.Events:
		if !strings.Contains(ev, "Expired") || !strings.Contains(ev, "720h") {
			t.Errorf("event %q, want Expired naming expireAfter", ev)
		}
	default:
		t.Errorf("no Expired event")
	}
}

func TestClaimThatNeverExpiresIsLeftAlone(t *testing.T) {
	kube, clk, _, c := setup(t, claim(v1.Never))
	clk.Step(10 * 365 * 24 * time.Hour)
	wait, nc := reconcileFresh(t, kube, c)
	if nc.DeletionTimestamp != nil || wait != 0 {
		t.Errorf("a claim with expireAfter Never was deleted or requeued (%s)", wait)
	}
}

func TestDeletingClaimIsLeftAlone(t *testing.T) {
	nc := claim("1h")
	nc.DeletionTimestamp = &metav1.Time{Time: start}
	kube, clk, recorder, c := setup(t, nc)
	clk.Step(2 * time.Hour)
	reconcileFresh(t, kube, c)
	select {
	case ev := <-recorder.Events:
		t.Errorf("a deleting claim expired again: %q", ev)
	default:
	}
}
