package consolidation

import (
	"strings"

	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/dovetail-sh/dovetail/controller/scheduling"
)

// Why says why the plan keeps a candidate now ("" when it removes it now): the
// first reason it was held back, as the Unconsolidatable events and `dovetail
// explain` say it.
func (p *Plan) Why(c *Candidate) string {
	for _, b := range p.Blocked {
		if b.Candidate == c {
			return b.Reason
		}
	}
	return ""
}

// BalancedRejection reports whether a reason is a Balanced pool's rejection of a
// move (the controller reports those with the move's score).
func BalancedRejection(reason string) bool {
	return strings.HasPrefix(reason, "consolidationPolicy Balanced:")
}

// Candidate returns the candidate of the named node, or nil.
func (cl *Cluster) Candidate(node string) *Candidate {
	for _, c := range cl.Candidates {
		if c.Node.Name == node {
			return c
		}
	}
	return nil
}

// WithoutNode plans the candidate's pods as if its node alone were gone now:
// onto the other nodes first, new nodes after. Savings is what that saves per
// hour (the node's price, commitments applied, less the new nodes').
func (cl *Cluster) WithoutNode(c *Candidate) (r *scheduling.Results, savings float64) {
	r = cl.Snapshot.PlanWithout(sets.New(c.Node.Name, c.Claim.Name), c.Pods)
	return r, priceOf([]*Candidate{c}) - r.PricePerHour()
}
