package consolidation

import (
	corev1 "k8s.io/api/core/v1"

	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/controller/scheduling"
)

// PoolDrift is why a claim drifted from its NodePool ("NodePoolDrift",
// "RequirementsDrift", or "" for none), and whether the change is applied to the
// claim and its node in place instead: a template whose labels or annotations alone
// changed is, unless driftOnMetadata (--drift-on-metadata) keeps Karpenter's way.
// The disruption controller and the plan-time impact both decide with it. node may
// be nil (a claim not yet registered): the claim's labels stand for it.
func PoolDrift(np *v1.NodePool, nc *v1.NodeClaim, node *corev1.Node, driftOnMetadata bool) (reason string, inPlace bool) {
	// A hash an older Dovetail wrote is the same template until re-stamped.
	if h, ok := nc.Annotations[v1.NodePoolHashAnnotationKey]; ok && nc.Annotations[v1.NodePoolHashVersionAnnotationKey] == v1.NodePoolHashVersion &&
		h != np.Hash() && h != np.LegacyHash() {
		if driftOnMetadata || !np.OnlyMetadataChanged(nc) {
			return "NodePoolDrift", false
		}
		inPlace = true
	}
	labels := nc.Labels
	if node != nil {
		labels = node.Labels
	}
	if reqs, err := scheduling.FromNodePoolRequirements(np.Spec.Template.Spec.Requirements); err == nil {
		for key, req := range reqs {
			if v, ok := labels[key]; ok && !req.Has(v) {
				return "RequirementsDrift", false
			}
		}
	}
	return "", inPlace
}
