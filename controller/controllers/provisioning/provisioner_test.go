package provisioning

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dovetail-sh/dovetail/controller/engineinput"
	"github.com/dovetail-sh/dovetail/controller/scheduling"
)

func TestIsProvisionable(t *testing.T) {
	now := metav1.Now()
	unschedulable := corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable}
	cases := []struct {
		name string
		pod  corev1.Pod
		want bool
	}{
		{"rejected by kube-scheduler", corev1.Pod{Status: corev1.PodStatus{Conditions: []corev1.PodCondition{unschedulable}}}, true},
		{"not yet looked at", corev1.Pod{}, true},
		{"bound", corev1.Pod{Spec: corev1.PodSpec{NodeName: "n"}}, false},
		{"terminating", corev1.Pod{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: &now}}, false},
		{"finished", corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodSucceeded}}, false},
		{"daemonset pod", corev1.Pod{ObjectMeta: metav1.ObjectMeta{OwnerReferences: []metav1.OwnerReference{{Kind: "DaemonSet", Name: "ds"}}}}, false},
		{"scheduling gated", corev1.Pod{Spec: corev1.PodSpec{SchedulingGates: []corev1.PodSchedulingGate{{Name: "wait"}}}}, false},
		{"another scheduler, not yet looked at", corev1.Pod{Spec: corev1.PodSpec{SchedulerName: "custom"}}, false},
		{"rejected by another scheduler profile", corev1.Pod{Spec: corev1.PodSpec{SchedulerName: "custom"}, Status: corev1.PodStatus{Conditions: []corev1.PodCondition{unschedulable}}}, true},
		{"scheduled but not yet bound", corev1.Pod{Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}}}}, false},
	}
	for _, tc := range cases {
		if got := engineinput.IsProvisionable(&tc.pod); got != tc.want {
			t.Errorf("%s: IsProvisionable = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestFilledClaims(t *testing.T) {
	pod := func(cpu string) *corev1.Pod {
		return &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse("128Mi")},
		}}}}}
	}
	it := &scheduling.InstanceType{Name: "m", Allocatable: scheduling.Resources{MilliCPU: 4000, Memory: 16 << 30, Pods: 100}}
	full := &scheduling.NodeClaimPlan{InstanceType: it, Requests: scheduling.Resources{MilliCPU: 3800, Memory: 1 << 30, Pods: 5}}
	roomy := &scheduling.NodeClaimPlan{InstanceType: it, Requests: scheduling.Resources{MilliCPU: 2000, Memory: 1 << 30, Pods: 2}}
	got := filledClaims([]*scheduling.NodeClaimPlan{full, roomy}, []*corev1.Pod{pod("500m"), pod("1")})
	if len(got) != 1 || got[0] != full {
		t.Errorf("want only the claim no pending pod fits into, got %d claims", len(got))
	}
	if got := filledClaims([]*scheduling.NodeClaimPlan{full}, nil); got != nil {
		t.Errorf("with no pending pods nothing is launched early, got %d", len(got))
	}
	// The tail of a gathering batch is full only because it was sized for the pods
	// gathered so far: it waits for the close.
	tail := &scheduling.NodeClaimPlan{InstanceType: it, Requests: full.Requests, SizedByDemand: true}
	if got := filledClaims([]*scheduling.NodeClaimPlan{full, tail}, []*corev1.Pod{pod("500m")}); len(got) != 1 || got[0] != full {
		t.Errorf("want the full claim only, not the tail, got %d claims", len(got))
	}
}
