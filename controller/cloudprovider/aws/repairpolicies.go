package aws

import (
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/dovetail-sh/dovetail/controller/repair"
)

// gpuRebootXIDs are the GPU faults a reboot clears (transient XIDs), and
// gpuFatalXIDs those it cannot: the EKS node monitoring agent puts the code in the
// AcceleratedHardwareReady condition's reason.
const (
	gpuRebootXIDs = `.*XID(46|48|54|62|63|95|109|110|136|140|143|155|156|158).*`
	gpuFatalXIDs  = `.*XID(64|74|79|119|120).*`
)

// RepairPolicies are Karpenter v1.15's AWS repair policies, for repair as a
// disruption method: the kubelet's Ready and the node monitoring agent's
// conditions, each replaced after its toleration with a bounded drain (the kubelet
// still answers, so a drain honouring PDBs can run, but never for the ~19 days an
// unbounded one may). Reboot-clearable GPU faults are rebooted with the
// RebootForRepair gate and replaced without it; an unrecognised GPU fault, the
// set's one fallback, waits longer before it is replaced.
func RepairPolicies(rebootForRepair bool) []repair.Policy {
	bounded := func(d time.Duration) *time.Duration { return &d }
	gpuReboot := repair.Replace
	if rebootForRepair {
		gpuReboot = repair.Reboot
	}
	replaceAfter30m := func(condition corev1.NodeConditionType, status corev1.ConditionStatus) repair.Policy {
		return repair.Policy{ConditionType: condition, ConditionStatus: status, ReasonRegex: ".*", Toleration: 30 * time.Minute,
			TerminationGracePeriod: bounded(10 * time.Minute), Action: repair.Replace}
	}
	return []repair.Policy{
		replaceAfter30m(corev1.NodeReady, corev1.ConditionFalse),
		replaceAfter30m(corev1.NodeReady, corev1.ConditionUnknown),
		{ConditionType: "AcceleratedHardwareReady", ConditionStatus: corev1.ConditionFalse, ReasonRegex: gpuRebootXIDs, Toleration: 10 * time.Minute,
			TerminationGracePeriod: bounded(5 * time.Minute), Action: gpuReboot},
		{ConditionType: "AcceleratedHardwareReady", ConditionStatus: corev1.ConditionFalse, ReasonRegex: gpuFatalXIDs, Toleration: 10 * time.Minute,
			TerminationGracePeriod: bounded(5 * time.Minute), Action: repair.Replace},
		{ConditionType: "AcceleratedHardwareReady", ConditionStatus: corev1.ConditionFalse, Toleration: 30 * time.Minute,
			TerminationGracePeriod: bounded(10 * time.Minute), Action: repair.Replace},
		replaceAfter30m("StorageReady", corev1.ConditionFalse),
		replaceAfter30m("NetworkingReady", corev1.ConditionFalse),
		replaceAfter30m("KernelReady", corev1.ConditionFalse),
		replaceAfter30m("ContainerRuntimeReady", corev1.ConditionFalse),
	}
}
