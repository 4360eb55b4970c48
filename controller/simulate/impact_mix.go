package simulate

import (
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/util/sets"

	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/controller/capacitymix"
	"github.com/dovetail-sh/dovetail/controller/scheduling"
)

// MixImpact is a changed pool's spot/on-demand mix before the change and after
// it, with the pool's nodes now and once the drifted ones are replaced.
type MixImpact struct {
	NodePool string `json:"nodePool"`
	// Was and Mix are the mix before and after the change; "none" where the pool
	// states none.
	Was    string    `json:"was"`
	Mix    string    `json:"mix"`
	Before MixCounts `json:"before"`
	After  MixCounts `json:"after"`
	// Holds reports whether the nodes after keep the mix after. Where they do not,
	// the controller does not replace nodes to reach it: its launches and
	// consolidation move the pool toward it.
	Holds bool `json:"holds"`
}

// String says the mix change, for the plan's warning.
func (m *MixImpact) String() string {
	mix := "Capacity mix: " + m.Mix
	if m.Was != m.Mix {
		mix += " (was: " + m.Was + ")"
	}
	mix += fmt.Sprintf("; nodes %s before, %s after", capacitymix.Counts(m.Before), capacitymix.Counts(m.After))
	if !m.Holds {
		mix += "; the nodes after do not keep it: new launches and consolidation move the pool toward it, and no node is replaced only for it"
	}
	return mix + "."
}

// mixCountsWithout counts every pool's claims but the replaced ones.
func mixCountsWithout(claims []v1.NodeClaim, replaced sets.Set[string]) map[string]capacitymix.Counts {
	counts := map[string]capacitymix.Counts{}
	for i := range claims {
		if nc := &claims[i]; !replaced.Has(nc.Name) {
			counts[nc.Labels[v1.LabelNodePool]] = counts[nc.Labels[v1.LabelNodePool]].With(nc)
		}
	}
	return counts
}

// holdMixes makes the replacements what they launch as within their pools'
// mixes, as the provisioner pins them (the claims they replace counted as
// gone), and adds them to counts.
func holdMixes(replacements []*scheduling.NodeClaimPlan, pools []*v1.NodePool, counts map[string]capacitymix.Counts) {
	mixes := capacitymix.Mixes(pools)
	capacitymix.Hold(replacements, mixes, counts)
	for _, r := range replacements {
		if _, held := mixes[r.NodePool]; !held {
			counts[r.NodePool] = counts[r.NodePool].WithPlan(r)
		}
	}
}

// mixImpact is the pool's mix before (in live) and after (in changed), or nil
// when it states none either way.
func mixImpact(live, changed []*v1.NodePool, pool string, before, after capacitymix.Counts) *MixImpact {
	find := func(pools []*v1.NodePool) (capacitymix.Mix, bool) {
		if i := slices.IndexFunc(pools, func(np *v1.NodePool) bool { return np.Name == pool }); i >= 0 {
			m, ok, err := capacitymix.Of(pools[i])
			return m, ok && err == nil
		}
		return capacitymix.Mix{}, false
	}
	was, hadMix := find(live)
	mix, hasMix := find(changed)
	if !hadMix && !hasMix {
		return nil
	}
	out := &MixImpact{NodePool: pool, Was: "none", Mix: "none", Before: MixCounts(before), After: MixCounts(after), Holds: true}
	if hadMix {
		out.Was = was.String()
	}
	if hasMix {
		out.Mix = mix.String()
		out.Holds = mix.Holds(after)
	}
	return out
}
