package scheduling

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
)

// A node that goes first frees its place in a full reservation: the freed snapshot
// plans into it, and the snapshot it came from still sees the reservation full.
func TestFreeingReservationLeavesTheSnapshotAsItWas(t *testing.T) {
	it := NewInstanceType("r.large", map[string]string{v1.LabelArch: "amd64"},
		corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("8Gi"), corev1.ResourcePods: resource.MustParse("29"), corev1.ResourceEphemeralStorage: resource.MustParse("20Gi")},
		[]Offering{{Zone: "a", CapacityType: v1.CapacityTypeReserved, Price: 0.001, ReservationID: "cr-1"}, {Zone: "a", CapacityType: v1.CapacityTypeOnDemand, Price: 0.1}},
		DefaultAllocatableSettings())
	np := &v1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "default"}}
	np.Spec.Template.Spec.Requirements = []v1.NodePoolRequirement{{Key: v1.LabelCapacityType, RequirementBody: v1.RequirementBody{Operator: v1.OpIn, Values: []string{v1.CapacityTypeReserved}}}}
	snap := &Snapshot{Pools: []*v1.NodePool{np}, InstanceTypes: map[string][]*InstanceType{"default": {it}}}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default", UID: "p"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}}}}}

	if r := snap.PlanWithout(nil, []*corev1.Pod{pod}); len(r.Unschedulable) != 1 {
		t.Fatalf("a full reservation took the pod: %d claims", len(r.NodeClaims))
	}
	full, offered, err := TemplateReservationsFull(np, snap.InstanceTypes["default"])
	if err != nil || !full || !offered.Has("cr-1") {
		t.Errorf("TemplateReservationsFull = %v, %v, %v; want full, offering cr-1", full, offered, err)
	}
	freed := snap.FreeingReservation("cr-1")
	r := freed.PlanWithout(nil, []*corev1.Pod{pod})
	if len(r.NodeClaims) != 1 || r.NodeClaims[0].Offering.ReservationID != "cr-1" {
		t.Fatalf("the freed place was not planned into: %d claims, unschedulable %v", len(r.NodeClaims), r.Unschedulable)
	}
	if it.Offerings[0].Available || snap.InstanceTypes["default"][0] != it {
		t.Error("freeing the reservation changed the snapshot it was made from")
	}
	if full, _, _ := TemplateReservationsFull(np, freed.InstanceTypes["default"]); full {
		t.Error("the reservation is still full with a place freed")
	}
}
