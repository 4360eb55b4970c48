package metrics

import (
	"strings"

	corev1 "k8s.io/api/core/v1"

	dv1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
)

// nodeLabelKeys are the node labels Karpenter's karpenter_nodes_* gauges carry, one
// metric label each, named by the part of the key after "/" in snake case.
var nodeLabelKeys = []string{
	dv1.LabelNodePool, dv1.LabelCapacityType, dv1.LabelTopologyZone, dv1.LabelTopologyRegion, dv1.LabelInstanceType,
	dv1.LabelArch, dv1.LabelOS, dv1.LabelWindowsBuild, dv1.LabelZoneID,
	dv1.LabelInstanceCategory, dv1.LabelInstanceFamily, dv1.LabelInstanceGen, dv1.LabelInstanceSize,
	dv1.LabelInstanceCPU, dv1.LabelInstanceCPUMfr, dv1.LabelInstanceCPUClock, dv1.LabelInstanceMemory,
	dv1.LabelInstanceEBSBw, dv1.LabelInstanceNetBw, dv1.LabelInstanceGPUName, dv1.LabelInstanceGPUMfr,
	dv1.LabelInstanceGPUCount, dv1.LabelInstanceGPUMem, dv1.LabelInstanceAccName, dv1.LabelInstanceAccMfr,
	dv1.LabelInstanceAccCount, dv1.LabelInstanceLocalNVMe, dv1.LabelInstanceHypervisor, dv1.LabelInstanceEncryptionInTransit,
	"karpenter.k8s.aws/instance-capability-flex", "karpenter.k8s.aws/instance-tenancy",
	"karpenter.k8s.aws/capacity-reservation-id", "karpenter.k8s.aws/capacity-reservation-type", "karpenter.k8s.aws/capacity-reservation-interruptible",
	"karpenter.k8s.aws/placement-group-id", "karpenter.k8s.aws/placement-group-partition",
}

// metricLabelName is Karpenter's metric label for a node label key.
func metricLabelName(key string) string {
	if i := strings.LastIndex(key, "/"); i >= 0 {
		key = key[i+1:]
	}
	return strings.ReplaceAll(strings.ToLower(key), "-", "_")
}

// nodeMetricLabels are the label names of the karpenter_nodes_* gauges, extra last.
func nodeMetricLabels(extra ...string) []string {
	out := []string{"node_name"}
	for _, k := range nodeLabelKeys {
		out = append(out, metricLabelName(k))
	}
	return append(append(out, "phase", "managed"), extra...)
}

// nodeMetricValues are the values for nodeMetricLabels, extra last.
func nodeMetricValues(n *corev1.Node, extra ...string) []string {
	out := []string{n.Name}
	for _, k := range nodeLabelKeys {
		out = append(out, n.Labels[k])
	}
	return append(append(out, string(n.Status.Phase), managed(n)), extra...)
}

// managed says whether Dovetail (or Karpenter before it) launched the node.
func managed(n *corev1.Node) string {
	if n == nil {
		return "false"
	}
	_, ok := n.Labels[dv1.LabelNodePool]
	return boolString(ok)
}

func boolString(b bool) string {
	if b {
		return "true"
	}
	return "false"
}
