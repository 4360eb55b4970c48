// Package capacitymix is a NodePool's spot/on-demand mix: at least a base of its
// nodes on-demand, and of the nodes beyond the base at most a share on spot, as
// EC2 Auto Scaling's on-demand base and percentage above base. It is stated with
// annotations on the pool (Dovetail's, so a Karpenter install does not prune
// them) and held by every launch and disruption. It does no I/O.
package capacitymix

import (
	"fmt"
	"slices"
	"strconv"

	"k8s.io/apimachinery/pkg/api/meta"

	karpv1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/controller/scheduling"
)

// The pool annotations that state a mix.
const (
	// OnDemandBaseAnnotationKey is how many of the pool's nodes, first, are on-demand.
	OnDemandBaseAnnotationKey = "dovetail.sh/on-demand-base"
	// SpotPercentAnnotationKey is the most of the nodes beyond the base that may
	// be spot, in percent (0 to 100).
	SpotPercentAnnotationKey = "dovetail.sh/spot-percent"
)

// Mix is a pool's mix.
type Mix struct {
	OnDemandBase int
	SpotPercent  int
}

// Counts are a pool's nodes by how they are bought; reserved capacity counts as
// on-demand (it is not interrupted).
type Counts struct {
	OnDemand, Spot int
}

// Of reads the pool's mix: false when it states none, an error naming the
// annotation when one does not parse or is out of range.
func Of(np *karpv1.NodePool) (Mix, bool, error) {
	base, hasBase := np.Annotations[OnDemandBaseAnnotationKey]
	share, hasShare := np.Annotations[SpotPercentAnnotationKey]
	if !hasBase && !hasShare {
		return Mix{}, false, nil
	}
	m := Mix{SpotPercent: 100}
	if hasBase {
		n, err := strconv.Atoi(base)
		if err != nil || n < 0 {
			return Mix{}, false, fmt.Errorf("annotation %s=%q: want a whole number of nodes, 0 or more", OnDemandBaseAnnotationKey, base)
		}
		m.OnDemandBase = n
	}
	if hasShare {
		n, err := strconv.Atoi(share)
		if err != nil || n < 0 || n > 100 {
			return Mix{}, false, fmt.Errorf("annotation %s=%q: want a percentage from 0 to 100", SpotPercentAnnotationKey, share)
		}
		m.SpotPercent = n
	}
	return m, true, nil
}

// MaxSpot is how many of total nodes may be spot.
func (m Mix) MaxSpot(total int) int {
	beyond := max(total-m.OnDemandBase, 0)
	return beyond * m.SpotPercent / 100
}

// Holds reports whether the counts keep the mix: the base on-demand (of as many
// nodes as there are) and no more spot beyond it than the share.
func (m Mix) Holds(c Counts) bool { return c.Spot <= m.MaxSpot(c.OnDemand+c.Spot) }

// AllowsSpot reports whether one more node may be spot.
func (m Mix) AllowsSpot(c Counts) bool {
	return m.Holds(Counts{OnDemand: c.OnDemand, Spot: c.Spot + 1})
}

// String is the mix as events and predictions say it.
func (m Mix) String() string {
	return fmt.Sprintf("on-demand base %d, at most %d%% spot beyond it", m.OnDemandBase, m.SpotPercent)
}

// String is the counts as events and predictions say them.
func (c Counts) String() string { return fmt.Sprintf("%d on-demand, %d spot", c.OnDemand, c.Spot) }

// MaySpot reports whether a claim may launch as spot: launched as spot, or not
// launched yet with spot among its capacity types (the cloud picks the cheapest).
func MaySpot(nc *karpv1.NodeClaim) bool {
	if ct, ok := nc.Labels[karpv1.LabelCapacityType]; ok && launched(nc) {
		return ct == karpv1.CapacityTypeSpot
	}
	for _, r := range nc.Spec.Requirements {
		if r.Key != karpv1.LabelCapacityType {
			continue
		}
		switch r.Operator {
		case karpv1.OpIn:
			return slices.Contains(r.Values, karpv1.CapacityTypeSpot)
		case karpv1.OpNotIn:
			if slices.Contains(r.Values, karpv1.CapacityTypeSpot) {
				return false
			}
		}
	}
	return true
}

func launched(nc *karpv1.NodeClaim) bool {
	return meta.IsStatusConditionTrue(nc.Status.Conditions, karpv1.ConditionTypeLaunched) || nc.Status.ProviderID != ""
}

// CountPool counts the pool's claims that are not being deleted; a claim not
// launched yet that may be spot counts as spot.
func CountPool(claims []karpv1.NodeClaim, pool string) Counts {
	var c Counts
	for i := range claims {
		if claims[i].Labels[karpv1.LabelNodePool] == pool {
			c = c.With(&claims[i])
		}
	}
	return c
}

// With is the counts with the claim, counted as CountPool counts it.
func (c Counts) With(nc *karpv1.NodeClaim) Counts { return c.add(nc, 1) }

// Without is the counts with the claim gone.
func (c Counts) Without(nc *karpv1.NodeClaim) Counts { return c.add(nc, -1) }

// WithPlan is the counts with a planned claim, counted as Hold counts it once
// held: spot when it may launch as spot.
func (c Counts) WithPlan(plan *scheduling.NodeClaimPlan) Counts {
	if PlanMaySpot(plan) {
		c.Spot++
	} else {
		c.OnDemand++
	}
	return c
}

func (c Counts) add(nc *karpv1.NodeClaim, n int) Counts {
	switch {
	case nc.DeletionTimestamp != nil:
	case MaySpot(nc):
		c.Spot += n
	default:
		c.OnDemand += n
	}
	return c
}

// PinOnDemand narrows a claim not launched yet to on-demand, and reports whether
// its requirements allow on-demand at all.
func PinOnDemand(nc *karpv1.NodeClaim) bool {
	for i, r := range nc.Spec.Requirements {
		if r.Key != karpv1.LabelCapacityType {
			continue
		}
		allowed := r.Operator == karpv1.OpExists || (r.Operator == karpv1.OpIn && slices.Contains(r.Values, karpv1.CapacityTypeOnDemand)) ||
			(r.Operator == karpv1.OpNotIn && !slices.Contains(r.Values, karpv1.CapacityTypeOnDemand))
		if !allowed {
			return false
		}
		nc.Spec.Requirements[i] = karpv1.NodeSelectorRequirementWithMinValues{Key: karpv1.LabelCapacityType,
			RequirementBody: karpv1.RequirementBody{Operator: karpv1.OpIn, Values: []string{karpv1.CapacityTypeOnDemand}}}
		return true
	}
	nc.Spec.Requirements = append(nc.Spec.Requirements, karpv1.NodeSelectorRequirementWithMinValues{Key: karpv1.LabelCapacityType,
		RequirementBody: karpv1.RequirementBody{Operator: karpv1.OpIn, Values: []string{karpv1.CapacityTypeOnDemand}}})
	return true
}

// excess is how many more spot nodes the counts have than the mix allows.
func (m Mix) excess(c Counts) int { return c.Spot - m.MaxSpot(c.OnDemand+c.Spot) }

// Breaks reports whether going from the counts before to those after breaks the
// mix: it must hold after, or, where it did not hold before, be no further from
// holding.
func (m Mix) Breaks(before, after Counts) bool {
	return m.excess(after) > max(m.excess(before), 0)
}

// NeedsEachOnDemand reports whether removing any one on-demand node of the counts
// would break the mix: the pool has no on-demand node to spare.
func (m Mix) NeedsEachOnDemand(c Counts) bool {
	return c.OnDemand > 0 && m.Breaks(c, Counts{OnDemand: c.OnDemand - 1, Spot: c.Spot})
}

// HoldOnPlans makes planned claims what their launches will be (as the
// provisioner pins them): in order, a spot plan that one more spot node would
// break its pool's mix for becomes its cheapest on-demand option, in the zones it
// allows. claims are the cluster's, counted as CountPool counts them.
func HoldOnPlans(plans []*scheduling.NodeClaimPlan, pools []*karpv1.NodePool, claims []karpv1.NodeClaim) {
	mixes := Mixes(pools)
	if len(mixes) == 0 {
		return
	}
	counts := map[string]Counts{}
	for name := range mixes {
		counts[name] = CountPool(claims, name)
	}
	Hold(plans, mixes, counts)
}

// Mixes are the mixes of the pools that state one that parses (the provider
// refuses the others at plan time, and the controller logs them).
func Mixes(pools []*karpv1.NodePool) map[string]Mix {
	var out map[string]Mix
	for _, np := range pools {
		if m, ok, err := Of(np); ok && err == nil {
			if out == nil {
				out = map[string]Mix{}
			}
			out[np.Name] = m
		}
	}
	return out
}

// Hold is HoldOnPlans for pools' mixes and their counts before the plans; counts
// become those after them. A plan is counted as the provisioner counts the claim
// it launches: one whose requirements allow spot counts as spot (the cloud takes
// the cheapest offering, and a replacement's narrowing may pick spot), unless one
// more spot node would break its pool's mix, when it is pinned to on-demand.
func Hold(plans []*scheduling.NodeClaimPlan, mixes map[string]Mix, counts map[string]Counts) {
	for _, plan := range plans {
		mix, ok := mixes[plan.NodePool]
		if !ok {
			continue
		}
		c := counts[plan.NodePool]
		switch {
		case !PlanMaySpot(plan):
			c.OnDemand++
		case mix.AllowsSpot(c):
			c.Spot++
		case pinPlan(plan):
			c.OnDemand++
		default:
			c.Spot++
		}
		counts[plan.NodePool] = c
	}
}

// PlanMaySpot reports whether a planned claim may launch as spot: its offering
// is spot, or its requirements allow spot.
func PlanMaySpot(plan *scheduling.NodeClaimPlan) bool {
	return plan.Offering.CapacityType == karpv1.CapacityTypeSpot || plan.Requirements.Get(karpv1.LabelCapacityType).Has(karpv1.CapacityTypeSpot)
}

// pinPlan narrows a plan to on-demand: its requirements, and a spot offering
// to its cheapest on-demand option (an on-demand offering stays, with what
// covers it). false when it has no on-demand option.
func pinPlan(plan *scheduling.NodeClaimPlan) bool {
	if plan.Offering.CapacityType == karpv1.CapacityTypeSpot {
		best, offering, ok := CheapestOnDemand(plan)
		if !ok {
			return false
		}
		plan.InstanceType, plan.Offering, plan.ListPrice, plan.CoveredBy = best, offering, offering.Price, ""
	}
	if plan.Requirements == nil {
		plan.Requirements = scheduling.Requirements{}
	}
	plan.Requirements[karpv1.LabelCapacityType] = scheduling.MustRequirement(karpv1.LabelCapacityType, karpv1.OpIn, karpv1.CapacityTypeOnDemand)
	return true
}

// CheapestOnDemand is the plan's cheapest available on-demand option and
// offering, in the zones it allows.
func CheapestOnDemand(plan *scheduling.NodeClaimPlan) (*scheduling.InstanceType, scheduling.Offering, bool) {
	zones := plan.Requirements.Get(karpv1.LabelTopologyZone)
	var best *scheduling.InstanceType
	var offering scheduling.Offering
	for _, it := range plan.InstanceTypeOptions {
		for _, o := range it.Offerings {
			if o.CapacityType != karpv1.CapacityTypeOnDemand || !o.Available || (zones != nil && !zones.Has(o.Zone)) {
				continue
			}
			if best == nil || o.Price < offering.Price {
				best, offering = it, o
			}
		}
	}
	return best, offering, best != nil
}
