package aws

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/dovetail-sh/dovetail/controller/repair"
)

// The AWS set is one the matcher takes, with or without reboots, and decides as
// Karpenter v1.15's does: a reboot-clearable XID is rebooted only with the gate, a
// fatal one replaced after 10 minutes, an unknown GPU fault after 30, a NotReady
// node after 30 with a 10-minute drain.
func TestRepairPoliciesAreKarpenters(t *testing.T) {
	start := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	node := func(condition corev1.NodeConditionType, status corev1.ConditionStatus, reason string) *corev1.Node {
		return &corev1.Node{Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: condition, Status: status, Reason: reason, LastTransitionTime: metav1.NewTime(start)}}}}
	}
	for _, reboot := range []bool{false, true} {
		m, err := repair.NewMatcher(RepairPolicies(reboot), sets.New(repair.Replace, repair.Reboot))
		if err != nil {
			t.Fatalf("rebootForRepair=%v: %v", reboot, err)
		}
		clearable := repair.Replace
		if reboot {
			clearable = repair.Reboot
		}
		for _, tc := range []struct {
			node       *corev1.Node
			after      time.Duration
			action     repair.Action
			drainBound time.Duration
		}{
			{node(corev1.NodeReady, corev1.ConditionFalse, "KubeletNotReady"), 30 * time.Minute, repair.Replace, 10 * time.Minute},
			{node(corev1.NodeReady, corev1.ConditionUnknown, "NodeStatusUnknown"), 30 * time.Minute, repair.Replace, 10 * time.Minute},
			{node("AcceleratedHardwareReady", corev1.ConditionFalse, "NvidiaXID48Error"), 10 * time.Minute, clearable, 5 * time.Minute},
			{node("AcceleratedHardwareReady", corev1.ConditionFalse, "NvidiaXID79Error"), 10 * time.Minute, repair.Replace, 5 * time.Minute},
			{node("AcceleratedHardwareReady", corev1.ConditionFalse, "NvidiaXID13Error"), 30 * time.Minute, repair.Replace, 10 * time.Minute},
			{node("KernelReady", corev1.ConditionFalse, "KernelBug"), 30 * time.Minute, repair.Replace, 10 * time.Minute},
		} {
			c := tc.node.Status.Conditions[0]
			if early := repair.Resolve(m.Match(tc.node), start.Add(tc.after-time.Second), time.Time{}); early.Action != "" {
				t.Errorf("rebootForRepair=%v %s=%s %s: %s before its %s toleration", reboot, c.Type, c.Status, c.Reason, early.Action, tc.after)
			}
			r := repair.Resolve(m.Match(tc.node), start.Add(tc.after), time.Time{})
			if r.Action != tc.action || r.TerminationGracePeriod == nil || *r.TerminationGracePeriod != tc.drainBound {
				t.Errorf("rebootForRepair=%v %s=%s %s: %s with drain bound %v, want %s within %s", reboot, c.Type, c.Status, c.Reason, r.Action, r.TerminationGracePeriod, tc.action, tc.drainBound)
			}
		}
		if m.Covers(corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionTrue}) {
			t.Error("a Ready node counts as unhealthy")
		}
	}
}
