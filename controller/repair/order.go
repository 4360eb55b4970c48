package repair

import (
	"cmp"
	"slices"
	"time"
)

// Candidate is a node whose repair is eligible.
type Candidate struct {
	Node   string
	Result Result
	// DisruptionCost is what disrupting the node costs its pods (as consolidation
	// weighs it): between equally urgent repairs, the cheaper goes first.
	DisruptionCost float64
}

// Order sorts candidates most urgent first, every one scored as of now (one time
// for the whole pass, so nodes of equal rank and age stay tied however far apart
// they were resolved): by score, then the lower disruption cost, then the node's
// name, so the order never depends on the order read.
func Order(candidates []Candidate, now time.Time) {
	slices.SortStableFunc(candidates, func(a, b Candidate) int {
		if sa, sb := a.Result.ScoreAt(now), b.Result.ScoreAt(now); sa != sb {
			return cmp.Compare(sb, sa)
		}
		if a.DisruptionCost != b.DisruptionCost {
			return cmp.Compare(a.DisruptionCost, b.DisruptionCost)
		}
		return cmp.Compare(a.Node, b.Node)
	})
}
