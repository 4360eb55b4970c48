package disruption

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/dovetail-sh/dovetail/controller/apis/scheme"
	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/controller/cloudprovider"
	dtaws "github.com/dovetail-sh/dovetail/controller/cloudprovider/aws"
	"github.com/dovetail-sh/dovetail/controller/controllers/provisioning"
	"github.com/dovetail-sh/dovetail/controller/metrics"
	"github.com/dovetail-sh/dovetail/controller/repair"
	"github.com/dovetail-sh/dovetail/controller/scheduling"
	"github.com/dovetail-sh/dovetail/controller/state"
)

const reservation = "cr-0123456789abcdef0"

// reservationCloud offers r.large in one capacity reservation, full unless
// roomInReservation, and on demand (available unless onDemandGone); it says the
// claims annotated "test/drifted" drifted.
type reservationCloud struct {
	pricedCloud
	roomInReservation, onDemandGone bool
}

func (c reservationCloud) GetInstanceTypes(context.Context, *v1.NodePool) ([]*scheduling.InstanceType, error) {
	return []*scheduling.InstanceType{scheduling.NewInstanceType("r.large", map[string]string{v1.LabelArch: "amd64"},
		corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("8Gi"), corev1.ResourcePods: resource.MustParse("29"),
			corev1.ResourceEphemeralStorage: resource.MustParse("20Gi")},
		[]scheduling.Offering{
			{Zone: "a", CapacityType: v1.CapacityTypeReserved, Price: 0.0000001, Available: c.roomInReservation, ReservationID: reservation},
			{Zone: "a", CapacityType: v1.CapacityTypeOnDemand, Price: 0.1, Available: !c.onDemandGone},
		}, scheduling.DefaultAllocatableSettings())}, nil
}

func (reservationCloud) IsDrifted(_ context.Context, nc *v1.NodeClaim) (cloudprovider.DriftReason, error) {
	if nc.Annotations["test/drifted"] == "true" {
		return "AMIDrift", nil
	}
	return "", nil
}

// reservedNode is an initialized r.large in the reservation (or on demand, without
// one), drifted or Ready=False for an hour as asked, running one 1-CPU pod of a
// ReplicaSet.
func reservedNode(name, capacityType string, drifted, unhealthy bool) []client.Object {
	nc, node := initializedClaim(name, repairNow.Add(-2*time.Hour))
	nc.Labels = map[string]string{v1.LabelNodePool: "default", v1.LabelInstanceType: "r.large", v1.LabelCapacityType: capacityType, v1.LabelTopologyZone: "a"}
	if capacityType == v1.CapacityTypeReserved {
		nc.Labels[v1.LabelCapacityReservationID] = reservation
	}
	node.Labels = nc.Labels
	if drifted {
		nc.Annotations = map[string]string{"test/drifted": "true"}
	}
	ready := corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(repairNow.Add(-2 * time.Hour))}
	if unhealthy {
		ready = corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionFalse, Reason: "KubeletNotReady", LastTransitionTime: metav1.NewTime(repairNow.Add(-time.Hour))}
	}
	node.Status.Conditions = []corev1.NodeCondition{ready}
	yes := true
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name + "-app", Namespace: "default", UID: k8stypes.UID("uid-" + name),
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "app", UID: "rs", Controller: &yes}}},
		Spec: corev1.PodSpec{NodeName: node.Name, Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi")}}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	return []client.Object{nc, node, pod}
}

// reservedPool allows the capacity types given; static with replicas, when not nil,
// and Ready.
func reservedPool(replicas *int64, limitNodes string, capacityTypes ...string) *v1.NodePool {
	np := &v1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "default"}}
	np.Spec.Template.Spec.Requirements = []v1.NodePoolRequirement{{Key: v1.LabelCapacityType, RequirementBody: v1.RequirementBody{Operator: v1.OpIn, Values: capacityTypes}}}
	np.Spec.Replicas = replicas
	if limitNodes != "" {
		np.Spec.Limits = v1.Limits{v1.ResourceNodes: resource.MustParse(limitNodes)}
	}
	np.Status.Conditions = []metav1.Condition{{Type: v1.ConditionTypeReady, Status: metav1.ConditionTrue, Reason: "Ready", LastTransitionTime: metav1.NewTime(repairNow)}}
	return np
}

// newTerminateFirstFixture runs the controller with the gates given, repairing by
// AWS's policies as a disruption method.
func newTerminateFirstFixture(t *testing.T, cloud reservationCloud, driftGate, repairGate bool, pool *v1.NodePool, objs ...client.Object) *repairFixture {
	t.Helper()
	clk := clocktesting.NewFakeClock(repairNow)
	kube := fake.NewClientBuilder().WithScheme(scheme.New()).WithStatusSubresource(&v1.NodeClaim{}, &v1.NodePool{}).
		WithObjects(append([]client.Object{pool}, objs...)...).Build()
	recorder := record.NewFakeRecorder(1000)
	prov := provisioning.NewProvisioner(kube, state.NewCluster(kube, clk), cloud, clk, recorder,
		provisioning.NewBatcher(clk, time.Second, 10*time.Second), scheduling.DefaultNodeCosts())
	matcher, err := repair.NewMatcher(dtaws.RepairPolicies(false), sets.New(repair.Replace))
	if err != nil {
		t.Fatal(err)
	}
	opts := DefaultOptions()
	opts.Repair, opts.TerminateFirstDrift, opts.TerminateFirstRepair = matcher, driftGate, repairGate
	return &repairFixture{kube: kube, clock: clk, recorder: recorder, ctrl: NewController(kube, cloud, prov, clk, recorder, opts)}
}

func terminateFirstCount(reason, why string) float64 {
	return testutil.ToFloat64(metrics.VoluntaryDisruptionTerminateFirstDecisions.WithLabelValues("default", reason, why))
}

// Karpenter v1.15's TerminateFirstDrift (its terminatefirst_test.go, Drift/Reserved
// and StaticDrift): a drifted node that holds the only place its replacement can
// launch into goes first; every other drifted node is replaced first, or waits.
func TestTerminateFirstDrift(t *testing.T) {
	one := int64(1)
	for _, c := range []struct {
		name              string
		cloud             reservationCloud
		gate              bool
		pool              *v1.NodePool
		node              []client.Object
		others            []client.Object
		deleted, launched bool
		terminateFirstWhy string
	}{
		{name: "the reservation is full and there is no fallback: deleted first, nothing launched",
			gate: true, pool: reservedPool(nil, "", v1.CapacityTypeReserved), node: reservedNode("held", v1.CapacityTypeReserved, true, false),
			deleted: true, terminateFirstWhy: terminateFirstNoReservedCapacity},
		{name: "the gate off: the node waits (Blocked)",
			pool: reservedPool(nil, "", v1.CapacityTypeReserved), node: reservedNode("held", v1.CapacityTypeReserved, true, false)},
		{name: "an on-demand fallback exists: replaced first",
			gate: true, pool: reservedPool(nil, "", v1.CapacityTypeReserved, v1.CapacityTypeOnDemand), node: reservedNode("held", v1.CapacityTypeReserved, true, false),
			launched: true},
		{name: "the reservation still has a place: replaced first",
			gate: true, cloud: reservationCloud{roomInReservation: true}, pool: reservedPool(nil, "", v1.CapacityTypeReserved), node: reservedNode("held", v1.CapacityTypeReserved, true, false),
			launched: true},
		{name: "an on-demand node whose capacity is gone frees no reservation: it waits",
			gate: true, cloud: reservationCloud{onDemandGone: true}, pool: reservedPool(nil, "", v1.CapacityTypeOnDemand), node: reservedNode("held", v1.CapacityTypeOnDemand, true, false)},
		{name: "a static pool at limits.nodes: deleted first",
			gate: true, pool: reservedPool(&one, "1", v1.CapacityTypeOnDemand), node: reservedNode("held", v1.CapacityTypeOnDemand, true, false),
			deleted: true, terminateFirstWhy: terminateFirstStaticAtLimit},
		{name: "a static pool at limits.nodes that is not Ready: it waits",
			gate: true, pool: func() *v1.NodePool {
				np := reservedPool(&one, "1", v1.CapacityTypeOnDemand)
				np.Status.Conditions = nil
				return np
			}(),
			node: reservedNode("held", v1.CapacityTypeOnDemand, true, false)},
		{name: "a static pool at limits.nodes with the gate off: it waits",
			pool: reservedPool(&one, "1", v1.CapacityTypeOnDemand), node: reservedNode("held", v1.CapacityTypeOnDemand, true, false)},
		{name: "a static pool below limits.nodes: replaced first from its template",
			gate: true, pool: reservedPool(&one, "2", v1.CapacityTypeOnDemand), node: reservedNode("held", v1.CapacityTypeOnDemand, true, false),
			launched: true},
		{name: "a static pool whose full reservations are its only capacity: the node holding a place goes first, even below limits.nodes",
			gate: true, pool: reservedPool(&one, "", v1.CapacityTypeReserved), node: reservedNode("held", v1.CapacityTypeReserved, true, false),
			deleted: true, terminateFirstWhy: terminateFirstNoReservedCapacity},
		{name: "a static pool whose full reservations are its only capacity: a node holding no place in them waits",
			gate: true, pool: reservedPool(&one, "", v1.CapacityTypeReserved), node: reservedNode("held", v1.CapacityTypeOnDemand, true, false)},
		{name: "a static pool whose template allows on-demand, unavailable: not full, so it is replaced first (as Karpenter)",
			gate: true, cloud: reservationCloud{onDemandGone: true}, pool: reservedPool(&one, "", v1.CapacityTypeReserved, v1.CapacityTypeOnDemand), node: reservedNode("held", v1.CapacityTypeReserved, true, false)},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := terminateFirstCount("drifted", c.terminateFirstWhy)
			f := newTerminateFirstFixture(t, c.cloud, c.gate, false, c.pool, c.node...)
			f.reconcile(t)
			launched := f.replacements(t, "held")
			if deleting(f.claim(t, "held")) != c.deleted || (len(launched) > 0) != c.launched {
				t.Fatalf("drifted node deleting %v, %d claims launched; want deleting %v, launched %v; events %v",
					deleting(f.claim(t, "held")), len(launched), c.deleted, c.launched, f.events())
			}
			if c.terminateFirstWhy == "" {
				return
			}
			if got := terminateFirstCount("drifted", c.terminateFirstWhy) - before; got != 1 {
				t.Errorf("karpenter_voluntary_disruption_terminate_first_decisions_total{reason=drifted,terminate_first_reason=%s} rose by %v, want 1", c.terminateFirstWhy, got)
			}
			if !containsEvent(f.events(), "TerminateFirstDrift") {
				t.Error("no event on the node says it goes first, and why")
			}
		})
	}
}

// Karpenter v1.15's Repair/TerminateFirst: an unhealthy node that holds the only
// place its replacement can launch into goes first under TerminateFirstRepair, its
// drain still bounded by the policy; the drift gate alone does not do it.
func TestTerminateFirstRepair(t *testing.T) {
	one := int64(1)
	for _, c := range []struct {
		name                  string
		driftGate, repairGate bool
		pool                  *v1.NodePool
		capacityType          string
		deleted, launched     bool
		terminateFirstWhy     string
		blocked               string
	}{
		{name: "the reservation is full and there is no fallback: deleted first",
			repairGate: true, pool: reservedPool(nil, "", v1.CapacityTypeReserved), capacityType: v1.CapacityTypeReserved,
			deleted: true, terminateFirstWhy: terminateFirstNoReservedCapacity},
		{name: "the gate off: blocked, saying why",
			pool: reservedPool(nil, "", v1.CapacityTypeReserved), capacityType: v1.CapacityTypeReserved, blocked: "repair would leave pod default/held-app without a place"},
		{name: "only the drift gate on: blocked",
			driftGate: true, pool: reservedPool(nil, "", v1.CapacityTypeReserved), capacityType: v1.CapacityTypeReserved, blocked: "without a place"},
		{name: "a static pool at limits.nodes: deleted first",
			repairGate: true, pool: reservedPool(&one, "1", v1.CapacityTypeOnDemand), capacityType: v1.CapacityTypeOnDemand,
			deleted: true, terminateFirstWhy: terminateFirstStaticAtLimit},
		{name: "a static pool at limits.nodes with the gate off: blocked",
			pool: reservedPool(&one, "1", v1.CapacityTypeOnDemand), capacityType: v1.CapacityTypeOnDemand, blocked: "limits.nodes leaves no room"},
		{name: "a static pool below limits.nodes: replaced first from its template",
			pool: reservedPool(&one, "2", v1.CapacityTypeOnDemand), capacityType: v1.CapacityTypeOnDemand, launched: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := terminateFirstCount("unhealthy", c.terminateFirstWhy)
			f := newTerminateFirstFixture(t, reservationCloud{}, c.driftGate, c.repairGate, c.pool, reservedNode("held", c.capacityType, false, true)...)
			f.reconcile(t)
			launched := f.replacements(t, "held")
			if deleting(f.claim(t, "held")) != c.deleted || (len(launched) > 0) != c.launched {
				t.Fatalf("unhealthy node deleting %v, %d claims launched; want deleting %v, launched %v; events %v",
					deleting(f.claim(t, "held")), len(launched), c.deleted, c.launched, f.events())
			}
			events := f.events()
			if c.blocked != "" && !containsEvent(events, c.blocked) {
				t.Errorf("events %v do not say %q", events, c.blocked)
			}
			if c.terminateFirstWhy == "" {
				return
			}
			if got := terminateFirstCount("unhealthy", c.terminateFirstWhy) - before; got != 1 {
				t.Errorf("karpenter_voluntary_disruption_terminate_first_decisions_total{reason=unhealthy,terminate_first_reason=%s} rose by %v, want 1", c.terminateFirstWhy, got)
			}
			if held := f.claim(t, "held"); held != nil {
				want := f.clock.Now().Add(10 * time.Minute).UTC().Format(time.RFC3339)
				if got := held.Annotations[v1.NodeClaimTerminationTimestampAnnotationKey]; got != want {
					t.Errorf("termination deadline %q, want %q: going first does not lift the policy's drain bound", got, want)
				}
			}
		})
	}
}
