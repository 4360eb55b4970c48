package buffer

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dovetail-sh/dovetail/controller/apis/autoscaling/v1beta1"
	"github.com/dovetail-sh/dovetail/controller/scheduling"
)

func i32(v int32) *int32 { return &v }

func template(cpu string) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}, Annotations: map[string]string{"note": "x"}},
		Spec: corev1.PodSpec{
			Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}},
				{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
			Containers: []corev1.Container{{Name: "c", VolumeMounts: []corev1.VolumeMount{{Name: "data"}, {Name: "tmp"}},
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse("1Gi")}}}},
		}}
}

// TestCapacityBufferReplicas is Karpenter's replica table: the larger of replicas
// and percentage (rounded up, at least 1, of a scalable's replicas only), capped
// by what fits in limits; limits alone give what fits; nothing gives 0.
func TestCapacityBufferReplicas(t *testing.T) {
	scalable := &v1beta1.ScalableRef{Kind: "Deployment", Name: "web"}
	pt := &v1beta1.LocalObjectRef{Name: "web"}
	for _, tc := range []struct {
		name     string
		spec     v1beta1.CapacityBufferSpec
		scalable *int32
		want     int32
	}{
		{"replicas", v1beta1.CapacityBufferSpec{PodTemplateRef: pt, Replicas: i32(3)}, nil, 3},
		{"20% of 10", v1beta1.CapacityBufferSpec{ScalableRef: scalable, Percentage: i32(20)}, i32(10), 2},
		{"20% of 5, rounded up", v1beta1.CapacityBufferSpec{ScalableRef: scalable, Percentage: i32(30)}, i32(5), 2},
		{"10% of 1, at least 1", v1beta1.CapacityBufferSpec{ScalableRef: scalable, Percentage: i32(10)}, i32(1), 1},
		{"replicas above percentage", v1beta1.CapacityBufferSpec{ScalableRef: scalable, Replicas: i32(5), Percentage: i32(20)}, i32(10), 5},
		{"percentage above replicas", v1beta1.CapacityBufferSpec{ScalableRef: scalable, Replicas: i32(5), Percentage: i32(80)}, i32(10), 8},
		{"percentage of a template is ignored", v1beta1.CapacityBufferSpec{PodTemplateRef: pt, Replicas: i32(2), Percentage: i32(500)}, nil, 2},
		{"capped by limits", v1beta1.CapacityBufferSpec{PodTemplateRef: pt, Replicas: i32(10), Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("3")}}, nil, 3},
		{"limits alone", v1beta1.CapacityBufferSpec{PodTemplateRef: pt, Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("5"), corev1.ResourceMemory: resource.MustParse("4Gi")}}, nil, 4},
		{"a limit the pods do not request", v1beta1.CapacityBufferSpec{PodTemplateRef: pt, Replicas: i32(2), Limits: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}}, nil, 2},
		{"nothing", v1beta1.CapacityBufferSpec{ScalableRef: scalable}, i32(4), 0},
	} {
		if got := Replicas(tc.spec, tc.scalable, template("1")); got != tc.want {
			t.Errorf("%s: %d, want %d", tc.name, got, tc.want)
		}
	}
}

// TestCapacityBufferVirtualPods: copies of the template with deterministic names
// and UIDs, its labels but not its annotations, no volume claims, Karpenter's
// annotations, pending.
func TestCapacityBufferVirtualPods(t *testing.T) {
	cb := &v1beta1.CapacityBuffer{ObjectMeta: metav1.ObjectMeta{Name: "spare", Namespace: "shop", UID: "cb-uid"}}
	pods := VirtualPods(cb, template("1"), 2)
	if len(pods) != 2 {
		t.Fatalf("%d pods, want 2", len(pods))
	}
	p := pods[1]
	if p.Name != "capacity-buffer-spare-2" || p.Namespace != "shop" || p.UID != "cb-uid-2" || p.Labels["app"] != "web" || p.Annotations["note"] != "" || !IsVirtual(p) ||
		p.Annotations[NameAnnotation] != "spare" || p.Annotations[NamespaceAnnotation] != "shop" || p.Spec.NodeName != "" {
		t.Errorf("virtual pod %+v", p.ObjectMeta)
	}
	if len(p.Spec.Volumes) != 1 || p.Spec.Volumes[0].Name != "tmp" || len(p.Spec.Containers[0].VolumeMounts) != 1 {
		t.Errorf("volumes %v, mounts %v; want the claim dropped", p.Spec.Volumes, p.Spec.Containers[0].VolumeMounts)
	}
}

// TestCapacityBufferTemplateWithLimitsOnly: a template that sets limits and no
// requests makes pods that request their limits, so its buffer holds that much
// room, and limits count replicas by it, in the controller as in simulate.
func TestCapacityBufferTemplateWithLimitsOnly(t *testing.T) {
	tmpl := template("1")
	tmpl.Spec.Containers[0].Resources = corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("1Gi")}}
	cb := &v1beta1.CapacityBuffer{ObjectMeta: metav1.ObjectMeta{Name: "spare", Namespace: "shop"}}
	pods := VirtualPods(cb, tmpl, 1)
	if got := scheduling.PodRequests(pods[0]); got.MilliCPU != 2000 {
		t.Errorf("a virtual pod of a limits-only template requests %dm cpu; want its 2 cpu limit", got.MilliCPU)
	}
	spec := v1beta1.CapacityBufferSpec{PodTemplateRef: &v1beta1.LocalObjectRef{Name: "web"}, Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("5")}}
	if got := Replicas(spec, nil, tmpl); got != 2 {
		t.Errorf("5 cpu of 2-cpu pods: %d replicas, want 2", got)
	}
}

// TestCapacityBufferProvisioningCondition: Karpenter's Provisioning condition from
// where the plan put a buffer's pods.
func TestCapacityBufferProvisioningCondition(t *testing.T) {
	vp := func(name string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{VirtualPodAnnotation: "true", NameAnnotation: "spare", NamespaceAnnotation: "shop"}}}
	}
	r := &scheduling.Results{
		Existing:   []*scheduling.ExistingPlacement{{Pods: []*corev1.Pod{vp("a"), {ObjectMeta: metav1.ObjectMeta{Name: "real"}}}}},
		NodeClaims: []*scheduling.NodeClaimPlan{{Pods: []*corev1.Pod{vp("b")}}},
	}
	placed := Classify(r)["shop/spare"]
	if placed != (Placement{Existing: 1, New: 1}) {
		t.Fatalf("placed %+v", placed)
	}
	for _, tc := range []struct {
		ready   bool
		desired int32
		placed  Placement
		planned bool
		reason  string
		message string
	}{
		{false, 2, placed, true, ReasonNotReadyForProvisioning, "Buffer is not ReadyForProvisioning"},
		{true, 0, placed, true, ReasonBufferEmpty, "Buffer has zero desired replicas"},
		{true, 2, placed, true, ReasonRequiresNewCapacity, "1/2 virtual pods required new capacity, 0 failed"},
		{true, 2, Placement{Existing: 2}, true, ReasonFitsExistingCapacity, "All 2 virtual pods fit on existing capacity"},
		{true, 2, Placement{}, false, "", ""},
	} {
		cond := ProvisioningCondition(tc.ready, tc.desired, tc.placed, tc.planned)
		switch {
		case tc.reason == "" && cond != nil:
			t.Errorf("%+v: %+v, want no change", tc, cond)
		case tc.reason != "" && (cond == nil || cond.Reason != tc.reason || cond.Message != tc.message):
			t.Errorf("%+v: %+v, want %s %q", tc, cond, tc.reason, tc.message)
		}
	}
}
