package provisioningrequest

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	autoscalingv1 "github.com/dovetail-sh/dovetail/controller/apis/autoscaling/v1"
	dovetailv1alpha1 "github.com/dovetail-sh/dovetail/controller/apis/dovetail/v1alpha1"
	"github.com/dovetail-sh/dovetail/controller/apis/scheme"
	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	fakecloud "github.com/dovetail-sh/dovetail/controller/cloudprovider/fake"
	"github.com/dovetail-sh/dovetail/controller/controllers/provisioning"
	"github.com/dovetail-sh/dovetail/controller/provreq"
	"github.com/dovetail-sh/dovetail/controller/scheduling"
	"github.com/dovetail-sh/dovetail/controller/state"
)

// env is a controller and the provisioner it launches through, on a fake client
// and a fake clock, with one pool of 4-cpu nodes.
type env struct {
	ctx         context.Context
	t           *testing.T
	kube        client.Client
	clk         *clocktesting.FakeClock
	provisioner *provisioning.Provisioner
	c           *Controller
}

// gangSpec asks 3 cpu: one pod a 4-cpu node.
var gangSpec = corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
	corev1.ResourceCPU: resource.MustParse("3"), corev1.ResourceMemory: resource.MustParse("1Gi")}}}}}

// start is when the fake clock starts and the requests were created.
var start = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

// restart is a new process: nothing in memory, the same cluster.
func (e *env) restart() {
	e.provisioner, e.c = wire(e.kube, e.clk)
}

func wire(kube client.Client, clk *clocktesting.FakeClock) (*provisioning.Provisioner, *Controller) {
	cloud := fakecloud.New(clk, fakecloud.InstanceType("m.xlarge", "4", "16Gi", "zone-a"))
	p := provisioning.NewProvisioner(kube, state.NewCluster(kube, clk), cloud, clk, record.NewFakeRecorder(1000),
		provisioning.NewBatcher(clk, time.Second, 10*time.Second), scheduling.DefaultNodeCosts())
	bookings := provreq.NewCache()
	p.WithBookings(bookings)
	return p, NewController(kube, kube, p, bookings, clk, record.NewFakeRecorder(1000), Options{InitialBackoff: 2 * time.Second, MaxBackoff: 10 * time.Second})
}

func newEnv(t *testing.T, objs ...client.Object) *env {
	clk := clocktesting.NewFakeClock(start)
	objs = append(objs, &v1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "default", UID: "pool-uid"}},
		&corev1.PodTemplate{ObjectMeta: metav1.ObjectMeta{Name: "ppt-train-worker", Namespace: "ml"}, Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"job": "train"}}, Spec: gangSpec}})
	kube := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(objs...).
		WithStatusSubresource(&autoscalingv1.ProvisioningRequest{}).Build()
	p, c := wire(kube, clk)
	return &env{ctx: context.Background(), t: t, kube: kube, clk: clk, provisioner: p, c: c}
}

func request(name, class string, count int32, params map[string]autoscalingv1.Parameter) *autoscalingv1.ProvisioningRequest {
	return &autoscalingv1.ProvisioningRequest{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ml", UID: types.UID("uid-" + name), CreationTimestamp: metav1.NewTime(start)},
		Spec: autoscalingv1.ProvisioningRequestSpec{ProvisioningClassName: class, Parameters: params,
			PodSets: []autoscalingv1.PodSet{{PodTemplateRef: autoscalingv1.Reference{Name: "ppt-train-worker"}, Count: count}}},
	}
}

func (e *env) reconcile(name string) reconcile.Result {
	e.t.Helper()
	res, err := e.c.Reconcile(e.ctx, reconcile.Request{NamespacedName: client.ObjectKey{Namespace: "ml", Name: name}})
	if err != nil {
		e.t.Fatal(err)
	}
	return res
}

func (e *env) condition(name, kind string) *metav1.Condition {
	e.t.Helper()
	pr := &autoscalingv1.ProvisioningRequest{}
	if err := e.kube.Get(e.ctx, client.ObjectKey{Namespace: "ml", Name: name}, pr); err != nil {
		e.t.Fatal(err)
	}
	return meta.FindStatusCondition(pr.Status.Conditions, kind)
}

func (e *env) wantCondition(name, kind string, status metav1.ConditionStatus, reason string) *metav1.Condition {
	e.t.Helper()
	c := e.condition(name, kind)
	if c == nil || c.Status != status || c.Reason != reason {
		e.t.Fatalf("%s: %s is %+v; want %s/%s", name, kind, c, status, reason)
	}
	return c
}

func (e *env) claims() (live, deleting []v1.NodeClaim) {
	e.t.Helper()
	var list v1.NodeClaimList
	if err := e.kube.List(e.ctx, &list); err != nil {
		e.t.Fatal(err)
	}
	for _, nc := range list.Items {
		if nc.DeletionTimestamp != nil {
			deleting = append(deleting, nc)
		} else {
			live = append(live, nc)
		}
	}
	return live, deleting
}

// launched marks the claim launched, as the lifecycle controller does once the
// cloud has an instance for it.
func (e *env) launched(nc v1.NodeClaim) {
	e.t.Helper()
	meta.SetStatusCondition(&nc.Status.Conditions, metav1.Condition{Type: v1.ConditionTypeLaunched, Status: metav1.ConditionTrue, Reason: "Launched", LastTransitionTime: metav1.NewTime(e.clk.Now())})
	nc.Status.ProviderID = "fake:///" + nc.Name
	nc.Status.Allocatable = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("15Gi"), corev1.ResourcePods: resource.MustParse("110")}
	nc.Status.Capacity = nc.Status.Allocatable
	if err := e.kube.Update(e.ctx, &nc); err != nil {
		e.t.Fatal(err)
	}
}

// A gang of 4 on best-effort-atomic-scale-up: its 4 nodes are launched together
// and held for it; when one is refused the other 3 are deleted and the request
// waits its backoff; the retry launches 4 anew, all launch, and it is
// Provisioned; its pods consume the booking.
func TestAtomicScaleUpLaunchesAllOrNone(t *testing.T) {
	e := newEnv(t, request("train", autoscalingv1.ProvisioningClassBestEffortAtomicScaleUp, 4, nil))
	e.reconcile("train")
	e.wantCondition("train", autoscalingv1.ConditionAccepted, metav1.ConditionTrue, provreq.ReasonAccepted)
	if c := e.condition("train", autoscalingv1.ConditionProvisioned); c != nil {
		t.Fatalf("Provisioned before any node launched: %+v", c)
	}
	live, _ := e.claims()
	if len(live) != 4 {
		t.Fatalf("%d nodeclaims; want 4, one per 3-cpu pod on 4-cpu nodes", len(live))
	}
	for _, nc := range live {
		if nc.Labels[dovetailv1alpha1.ProvisioningRequestLabelKey] != "uid-train" || nc.Annotations[dovetailv1alpha1.ProvisioningRequestAnnotationKey] != "ml/train" ||
			!strings.HasSuffix(nc.Annotations[dovetailv1alpha1.ProvisioningRequestBatchAnnotationKey], "/4") {
			t.Fatalf("claim %s is not marked as the gang's: labels %v annotations %v", nc.Name, nc.Labels, nc.Annotations)
		}
	}

	gang := live
	// Three launch, the fourth is refused (the lifecycle controller deletes it).
	for _, nc := range gang[:3] {
		e.launched(nc)
	}
	// The gang's nodes are held for it: another pending pod, which would fit on
	// any of the 3 launched, gets a node of its own.
	if err := e.kube.Create(e.ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "web-uid"}, Spec: gangSpec}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.provisioner.Schedule(e.ctx); err != nil {
		t.Fatal(err)
	}
	if live, _ = e.claims(); len(live) != 5 {
		t.Fatalf("%d nodeclaims after a pod came; want 5: the gang's 4 are booked", len(live))
	}
	if res := e.reconcile("train"); res.RequeueAfter == 0 {
		t.Fatal("a gang still launching is not looked at again")
	}
	if err := e.kube.Delete(e.ctx, &gang[3]); err != nil {
		t.Fatal(err)
	}
	res := e.reconcile("train")
	e.wantCondition("train", autoscalingv1.ConditionProvisioned, metav1.ConditionFalse, provreq.ReasonCapacityIsNotFound)
	live, deleting := e.claims()
	if len(live) != 1 || len(deleting) != 4 {
		t.Fatalf("after one of 4 was refused: %d live, %d deleting; want the other pod's node live and the gang's 4 deleting", len(live), len(deleting))
	}
	if res.RequeueAfter != 2*time.Second {
		t.Errorf("requeue after %s; want the initial backoff, 2s", res.RequeueAfter)
	}
	// Within the backoff nothing is launched.
	e.clk.Step(time.Second)
	e.reconcile("train")
	if live, _ := e.claims(); len(live) != 1 {
		t.Fatalf("%d live claims within the backoff; want 1", len(live))
	}
	e.clk.Step(time.Second)
	e.reconcile("train")
	live, _ = e.claims()
	var retry []v1.NodeClaim
	for _, nc := range live {
		if nc.Labels[dovetailv1alpha1.ProvisioningRequestLabelKey] == "uid-train" {
			retry = append(retry, nc)
		}
	}
	if len(retry) != 4 {
		t.Fatalf("the retry launched %d; want 4", len(retry))
	}
	for _, nc := range retry {
		e.launched(nc)
	}
	e.reconcile("train")
	provisioned := e.wantCondition("train", autoscalingv1.ConditionProvisioned, metav1.ConditionTrue, provreq.ReasonCapacityIsProvisioned)
	if !provisioned.LastTransitionTime.Time.Equal(e.clk.Now()) {
		t.Errorf("Provisioned at %s; want now", provisioned.LastTransitionTime)
	}

	// The pods Kueue creates consume the booking: once all are scheduled, it ends.
	for i := range 4 {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "train-" + string(rune('a'+i)), Namespace: "ml",
			Annotations: map[string]string{autoscalingv1.ConsumeAnnotationKey: "train", autoscalingv1.ClassAnnotationKey: autoscalingv1.ProvisioningClassBestEffortAtomicScaleUp}},
			Spec: *gangSpec.DeepCopy()}
		pod.Spec.NodeName = retry[i].Name
		if err := e.kube.Create(e.ctx, pod); err != nil {
			t.Fatal(err)
		}
		e.reconcile("train")
		if i < 3 && e.condition("train", autoscalingv1.ConditionBookingExpired) != nil {
			t.Fatalf("the booking ended with %d of 4 pods scheduled", i+1)
		}
	}
	e.wantCondition("train", autoscalingv1.ConditionBookingExpired, metav1.ConditionTrue, provreq.ReasonCapacityBookingConsumed)
}

// check-capacity launches nothing: it finds the capacity there is (and books
// it), or says it is not found and tries again after a backoff, or fails when
// asked not to retry.
func TestCheckCapacityLaunchesNothing(t *testing.T) {
	e := newEnv(t,
		request("fits", autoscalingv1.ProvisioningClassCheckCapacity, 1, nil),
		request("later", autoscalingv1.ProvisioningClassCheckCapacity, 2, nil),
		request("once", autoscalingv1.ProvisioningClassCheckCapacity, 2, map[string]autoscalingv1.Parameter{provreq.NoRetryParameter: "true"}),
		request("missing", autoscalingv1.ProvisioningClassCheckCapacity, 1, nil),
	)
	missing := &autoscalingv1.ProvisioningRequest{}
	if err := e.kube.Get(e.ctx, client.ObjectKey{Namespace: "ml", Name: "missing"}, missing); err != nil {
		t.Fatal(err)
	}
	missing.Spec.PodSets[0].PodTemplateRef.Name = "gone"
	if err := e.kube.Update(e.ctx, missing); err != nil {
		t.Fatal(err)
	}
	// One 4-cpu node, empty.
	if err := e.kube.Create(e.ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a", Labels: map[string]string{v1.LabelHostname: "node-a"}},
		Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("16Gi"), corev1.ResourcePods: resource.MustParse("110")},
			Capacity: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("16Gi"), corev1.ResourcePods: resource.MustParse("110")}}}); err != nil {
		t.Fatal(err)
	}
	e.reconcile("fits")
	e.wantCondition("fits", autoscalingv1.ConditionProvisioned, metav1.ConditionTrue, provreq.ReasonCapacityIsFound)
	// The node is booked for "fits": the next checks find no room on it.
	res := e.reconcile("later")
	e.wantCondition("later", autoscalingv1.ConditionProvisioned, metav1.ConditionFalse, provreq.ReasonCapacityIsNotFound)
	if res.RequeueAfter != 2*time.Second {
		t.Errorf("requeue after %s; want 2s", res.RequeueAfter)
	}
	e.reconcile("once")
	e.wantCondition("once", autoscalingv1.ConditionFailed, metav1.ConditionTrue, provreq.ReasonCapacityIsNotFound)
	e.reconcile("missing")
	e.wantCondition("missing", autoscalingv1.ConditionFailed, metav1.ConditionTrue, provreq.ReasonFailedToCreatePods)
	if live, _ := e.claims(); len(live) != 0 {
		t.Fatalf("check-capacity created %d nodeclaims", len(live))
	}
	// The second retry waits twice as long.
	e.clk.Step(2 * time.Second)
	if res := e.reconcile("later"); res.RequeueAfter != 4*time.Second {
		t.Errorf("second retry after %s; want 4s", res.RequeueAfter)
	}
	// The booking of "fits" expires after BookingTime: the node is anyone's again.
	e.clk.Step(provreq.BookingTime)
	e.reconcile("fits")
	e.wantCondition("fits", autoscalingv1.ConditionBookingExpired, metav1.ConditionTrue, provreq.ReasonCapacityReservationTimeExpired)
}

// A controller killed after creating 2 of a gang's 4 claims leaves a batch short
// of its size: the next one rolls it back (nothing of it keeps billing) and,
// after the backoff, launches the gang whole.
func TestAtomicScaleUpRollsBackABatchCutShortByARestart(t *testing.T) {
	e := newEnv(t, request("train", autoscalingv1.ProvisioningClassBestEffortAtomicScaleUp, 4, nil))
	e.reconcile("train")
	live, _ := e.claims()
	if len(live) != 4 {
		t.Fatalf("%d claims; want 4", len(live))
	}
	// The process died after its second create: the other two never were.
	for _, nc := range live[2:] {
		nc.Finalizers = nil
		if err := e.kube.Update(e.ctx, &nc); err != nil {
			t.Fatal(err)
		}
		if err := e.kube.Delete(e.ctx, &nc); err != nil {
			t.Fatal(err)
		}
	}
	e.launched(live[0])
	e.restart()
	e.reconcile("train")
	e.wantCondition("train", autoscalingv1.ConditionProvisioned, metav1.ConditionFalse, provreq.ReasonCapacityIsNotFound)
	if c := e.condition("train", autoscalingv1.ConditionProvisioned); !strings.Contains(c.Message, "2 of the 4 NodeClaims planned are gone") {
		t.Errorf("Provisioned=False says %q; want it to say the batch is short", c.Message)
	}
	live, deleting := e.claims()
	if len(live) != 0 || len(deleting) != 2 {
		t.Fatalf("after the restart: %d live, %d deleting; want the 2 left rolled back", len(live), len(deleting))
	}
	e.clk.Step(2 * time.Second)
	e.reconcile("train")
	if live, _ := e.claims(); len(live) != 4 {
		t.Fatalf("the retry launched %d; want 4", len(live))
	}
}

// A request deleted while its gang launches (Kueue deleted the workload, or made
// its next attempt) takes the claims still launching with it; a node that is up
// stays, as any capacity.
func TestDeletedRequestTakesItsLaunchingClaims(t *testing.T) {
	e := newEnv(t, request("train", autoscalingv1.ProvisioningClassBestEffortAtomicScaleUp, 2, nil))
	e.reconcile("train")
	live, _ := e.claims()
	if len(live) != 2 {
		t.Fatalf("%d claims; want 2", len(live))
	}
	up := live[0]
	meta.SetStatusCondition(&up.Status.Conditions, metav1.Condition{Type: v1.ConditionTypeInitialized, Status: metav1.ConditionTrue, Reason: "Initialized", LastTransitionTime: metav1.NewTime(e.clk.Now())})
	if err := e.kube.Update(e.ctx, &up); err != nil {
		t.Fatal(err)
	}
	pr := &autoscalingv1.ProvisioningRequest{}
	if err := e.kube.Get(e.ctx, client.ObjectKey{Namespace: "ml", Name: "train"}, pr); err != nil {
		t.Fatal(err)
	}
	if err := e.kube.Delete(e.ctx, pr); err != nil {
		t.Fatal(err)
	}
	e.reconcile("train")
	live, deleting := e.claims()
	if len(live) != 1 || live[0].Name != up.Name || len(deleting) != 1 {
		t.Fatalf("after the request went: live %d (want %s only), deleting %d", len(live), up.Name, len(deleting))
	}
	// Its booking went with it: nothing is held on a node that would take it.
	free := &scheduling.ExistingNode{Name: "free", Labels: map[string]string{v1.LabelHostname: "free"},
		Allocatable: scheduling.Resources{MilliCPU: 64000, Memory: 256 << 30, Pods: 110}, Capacity: scheduling.Resources{MilliCPU: 64000, Memory: 256 << 30, Pods: 110}}
	e.c.bookings.Hold(&scheduling.Snapshot{Nodes: []*scheduling.ExistingNode{free}})
	if len(free.Pods) != 0 {
		t.Errorf("%d pods still booked for the deleted request", len(free.Pods))
	}
}

func (e *env) gang(uid string) (live, deleting []v1.NodeClaim) {
	l, d := e.claims()
	for _, nc := range l {
		if nc.Labels[dovetailv1alpha1.ProvisioningRequestLabelKey] == uid {
			live = append(live, nc)
		}
	}
	for _, nc := range d {
		if nc.Labels[dovetailv1alpha1.ProvisioningRequestLabelKey] == uid {
			deleting = append(deleting, nc)
		}
	}
	return live, deleting
}

// Two batches refused one after the other, their claims still being deleted:
// each refusal counts once, however often the request is looked at meanwhile.
func TestRolledBackBatchesCountOnce(t *testing.T) {
	e := newEnv(t, request("train", autoscalingv1.ProvisioningClassBestEffortAtomicScaleUp, 2, nil))
	e.reconcile("train")
	first, _ := e.gang("uid-train")
	if err := e.kube.Delete(e.ctx, &first[0]); err != nil {
		t.Fatal(err)
	}
	e.reconcile("train")
	e.clk.Step(2 * time.Second)
	e.reconcile("train")
	second, _ := e.gang("uid-train")
	if len(second) != 2 {
		t.Fatalf("the retry launched %d; want 2", len(second))
	}
	if err := e.kube.Delete(e.ctx, &second[0]); err != nil {
		t.Fatal(err)
	}
	res := e.reconcile("train")
	for range 3 {
		if again := e.reconcile("train"); again.RequeueAfter > res.RequeueAfter {
			t.Fatalf("looking again pushed the retry from %s to %s", res.RequeueAfter, again.RequeueAfter)
		}
	}
	if got := e.c.retries["uid-train"].attempts; got != 2 {
		t.Errorf("%d attempts counted after 2 refusals", got)
	}
	if res.RequeueAfter != 4*time.Second {
		t.Errorf("second retry after %s; want 4s", res.RequeueAfter)
	}
}

// Every claim of a batch gone before the controller saw one deleting (EC2 refused
// them all and termination let them go at once): the batch is rolled back and
// waits its backoff, not relaunched at once.
func TestVanishedBatchWaitsItsBackoff(t *testing.T) {
	e := newEnv(t, request("train", autoscalingv1.ProvisioningClassBestEffortAtomicScaleUp, 2, nil))
	e.reconcile("train")
	first, _ := e.gang("uid-train")
	// The cache lists them, as any pass of the provisioner makes it.
	if _, err := e.provisioner.Cluster().Read(e.ctx, state.ReadOnly); err != nil {
		t.Fatal(err)
	}
	for _, nc := range first {
		nc.Finalizers = nil
		if err := e.kube.Update(e.ctx, &nc); err != nil {
			t.Fatal(err)
		}
		if err := e.kube.Delete(e.ctx, &nc); err != nil {
			t.Fatal(err)
		}
	}
	e.reconcile("train")
	e.wantCondition("train", autoscalingv1.ConditionProvisioned, metav1.ConditionFalse, provreq.ReasonCapacityIsNotFound)
	if live, _ := e.gang("uid-train"); len(live) != 0 {
		t.Fatalf("relaunched %d at once", len(live))
	}
}

// A status write of CapacityIsFound that fails leaves the booking set: the next
// look plans without it and finds the capacity again, not its own booking in the way.
func TestFailedStatusWriteDoesNotBlockTheRequestWithItsOwnBooking(t *testing.T) {
	clk := clocktesting.NewFakeClock(start)
	fail := true
	kube := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(
		request("fits", autoscalingv1.ProvisioningClassCheckCapacity, 1, nil),
		&v1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "default", UID: "pool-uid"}},
		&corev1.PodTemplate{ObjectMeta: metav1.ObjectMeta{Name: "ppt-train-worker", Namespace: "ml"}, Template: corev1.PodTemplateSpec{Spec: gangSpec}},
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a", Labels: map[string]string{v1.LabelHostname: "node-a"}},
			Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("16Gi"), corev1.ResourcePods: resource.MustParse("110")},
				Capacity: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("16Gi"), corev1.ResourcePods: resource.MustParse("110")}}},
	).WithStatusSubresource(&autoscalingv1.ProvisioningRequest{}).WithInterceptorFuncs(interceptor.Funcs{
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
			if fail {
				fail = false
				return errors.New("etcdserver: request timed out")
			}
			return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
		}}).Build()
	p, c := wire(kube, clk)
	e := &env{ctx: context.Background(), t: t, kube: kube, clk: clk, provisioner: p, c: c}
	if _, err := e.c.Reconcile(e.ctx, reconcile.Request{NamespacedName: client.ObjectKey{Namespace: "ml", Name: "fits"}}); err == nil {
		t.Fatal("the first status write did not fail")
	}
	e.reconcile("fits")
	e.wantCondition("fits", autoscalingv1.ConditionProvisioned, metav1.ConditionTrue, provreq.ReasonCapacityIsFound)
}

// After a restart the provisioner plans nothing until every request that books
// capacity has been looked at again: a pending pod is not planned into the room
// of a provisioned gang whose booking is not held yet.
func TestProvisionerWaitsForBookingsAfterARestart(t *testing.T) {
	pr := request("train", autoscalingv1.ProvisioningClassCheckCapacity, 1, nil)
	pr.Status.Conditions = []metav1.Condition{{Type: autoscalingv1.ConditionProvisioned, Status: metav1.ConditionTrue, Reason: provreq.ReasonCapacityIsFound, LastTransitionTime: metav1.NewTime(start)}}
	four := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("16Gi"), corev1.ResourcePods: resource.MustParse("110")}
	e := newEnv(t, pr,
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a", Labels: map[string]string{v1.LabelHostname: "node-a"}}, Status: corev1.NodeStatus{Allocatable: four, Capacity: four}},
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "web-uid"}, Spec: gangSpec})
	waiting, err := e.provisioner.Schedule(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if live, _ := e.claims(); !waiting || len(live) != 0 {
		t.Fatalf("before the request was looked at: waiting %t, %d claims; want a wait and none", waiting, len(live))
	}
	e.reconcile("train")
	if _, err := e.provisioner.Schedule(e.ctx); err != nil {
		t.Fatal(err)
	}
	if live, _ := e.claims(); len(live) != 1 {
		t.Fatalf("%d claims once the booking is held; want a node for the web pod, node-a being booked", len(live))
	}
}
