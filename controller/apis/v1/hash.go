package v1

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"github.com/mitchellh/hashstructure/v2"
)

// Hash identifies the parts of a pool's template that shape a node once launched,
// computed exactly as Karpenter v1 computes its karpenter.sh/nodepool-hash
// (hashstructure FormatV2 over the template, slices as sets, zero values and nils
// ignored, requirements left out by their hash:"ignore" tag): nodes Karpenter
// launched keep matching their pool when Dovetail takes over, and a pool changed
// since is still seen as drift. Requirements are left out because a node drifts
// from them only when its own labels stop satisfying them, which is checked
// directly. TestNodePoolHashIsKarpenters holds it to values Karpenter computed.
func (np *NodePool) Hash() string {
	h, err := hashstructure.Hash(np.Spec.Template, hashstructure.FormatV2, &hashstructure.HashOptions{
		SlicesAsSets: true, IgnoreZeroValue: true, ZeroNil: true,
	})
	if err != nil {
		// Only types hashstructure cannot walk (channels, functions) fail; the
		// template has none.
		panic(fmt.Sprintf("hashing nodepool %s, %v", np.Name, err))
	}
	return fmt.Sprint(h)
}

// OnlyMetadataChanged reports whether the claim was launched from this pool's
// template as it is now but for the template's labels and annotations: the
// claim's own spec (taints, startup taints, node class, expireAfter,
// terminationGracePeriod, copied from the template at launch) with the pool's
// metadata hashes to the pool's hash. Such a claim is brought up to date in
// place rather than replaced. It works for claims Karpenter launched too. A
// template label the instance itself decides (kubernetes.io/arch, the capacity
// type, the zone...) that the claim does not already carry is no metadata: the
// template's labels are requirements too, and a node cannot change those in place.
func (np *NodePool) OnlyMetadataChanged(nc *NodeClaim) bool {
	h, ok := nc.Annotations[NodePoolHashAnnotationKey]
	if !ok || h == np.Hash() {
		return false
	}
	for k, v := range np.Spec.Template.Labels {
		if InstanceDecides(k) && nc.Labels[k] != v {
			return false
		}
	}
	launched := &NodePool{Spec: NodePoolSpec{Template: NodeClaimTemplate{ObjectMeta: np.Spec.Template.ObjectMeta, Spec: NodeClaimTemplateSpec{
		Taints: nc.Spec.Taints, StartupTaints: nc.Spec.StartupTaints, NodeClassRef: nc.Spec.NodeClassRef,
		TerminationGracePeriod: nc.Spec.TerminationGracePeriod, ExpireAfter: nc.Spec.ExpireAfter,
	}}}}
	return launched.Hash() == np.Hash()
}

// InstanceDecides reports whether a label's value comes from the instance a node
// runs on (a well-known label, or a deprecated key for one), not from a template.
func InstanceDecides(key string) bool {
	if normalized, ok := NormalizedLabels[key]; ok {
		key = normalized
	}
	return WellKnownLabels.Has(key) || key == LabelHostname
}

// LegacyHash is the hash Dovetail stamped on claims before it computed Karpenter's
// (a sha256 of the template's JSON under the same hash version): such a claim whose
// legacy hash still matches is re-stamped, not drifted.
func (np *NodePool) LegacyHash() string {
	tmpl := np.Spec.Template.DeepCopy()
	tmpl.Spec.Requirements = nil
	b, _ := json.Marshal(tmpl)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}
