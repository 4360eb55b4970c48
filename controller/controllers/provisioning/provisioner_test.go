package provisioning

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
		{"another scheduler", corev1.Pod{Spec: corev1.PodSpec{SchedulerName: "custom"}}, false},
		{"scheduled but not yet bound", corev1.Pod{Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}}}}, false},
	}
	for _, tc := range cases {
		if got := IsProvisionable(&tc.pod); got != tc.want {
			t.Errorf("%s: IsProvisionable = %v, want %v", tc.name, got, tc.want)
		}
	}
}
