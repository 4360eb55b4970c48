package v1alpha1

import (
	"slices"
	"strings"
)

// Annotations Dovetail writes on NodeClaims.
const (
	// CoveredByAnnotationKey marks a NodeClaim planned at a price a Commitment
	// pays for (wholly or in part); the value names the commitment and what of it.
	CoveredByAnnotationKey = "dovetail.sh/covered-by"
	// PlannedPriceAnnotationKey is the $/h a NodeClaim was planned at
	// (commitments applied): what a spend limit counts it at until it launches
	// and its offering is known.
	PlannedPriceAnnotationKey = "dovetail.sh/planned-price"
	// TemplateLabelsAnnotationKey and TemplateAnnotationsAnnotationKey list, comma
	// separated, the label and annotation keys the NodePool template gave the
	// claim and its node, so that keys the template drops are removed in place.
	TemplateLabelsAnnotationKey      = "dovetail.sh/template-labels"
	TemplateAnnotationsAnnotationKey = "dovetail.sh/template-annotations"
	// DroppedLabelsAnnotationKey and DroppedAnnotationsAnnotationKey list the
	// keys an in-place update took off the claim, for the node's sync to take
	// off the node.
	DroppedLabelsAnnotationKey      = "dovetail.sh/dropped-labels"
	DroppedAnnotationsAnnotationKey = "dovetail.sh/dropped-annotations"
	// ProvisioningRequestAnnotationKey names (namespace/name) the
	// ProvisioningRequest a NodeClaim was launched for as part of a whole, and
	// ProvisioningRequestBatchAnnotationKey that launch: "ID/N", one of the N
	// claims planned together at ID. A batch missing a claim is rolled back.
	ProvisioningRequestAnnotationKey      = "dovetail.sh/provisioning-request"
	ProvisioningRequestBatchAnnotationKey = "dovetail.sh/provisioning-request-batch"
)

// ProvisioningRequestLabelKey carries the UID of the ProvisioningRequest a
// NodeClaim (and so its Node) was launched for: its capacity is held for the
// request's pods first, and a user can list a gang's nodes by it.
const ProvisioningRequestLabelKey = "dovetail.sh/provisioning-request-uid"

// JoinKeys writes one of these lists: the sorted keys of a template's labels or
// annotations.
func JoinKeys(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return strings.Join(keys, ",")
}

// SplitKeys reads one of these lists.
func SplitKeys(v string) []string {
	if v == "" {
		return nil
	}
	return strings.Split(v, ",")
}
