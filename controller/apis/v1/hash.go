package v1

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
)

// Hash identifies the parts of a pool's template that shape a node once launched.
// Requirements are left out: a node drifts from them only when its own labels stop
// satisfying them, which is checked directly.
func (np *NodePool) Hash() string {
	tmpl := np.Spec.Template.DeepCopy()
	tmpl.Spec.Requirements = nil
	b, _ := json.Marshal(tmpl)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}
