// Package staticpool decides how a static NodePool (spec.replicas, gate
// StaticCapacity) grows toward its replicas: the static controller launches by it
// and `dovetail simulate` predicts by it. It is pure.
package staticpool

import (
	"fmt"
	"math"
	"strconv"

	dovetailv1alpha1 "github.com/dovetail-sh/dovetail/controller/apis/dovetail/v1alpha1"
	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/controller/consolidation"
	"github.com/dovetail-sh/dovetail/controller/scheduling"
)

// Delta is how many claims a static pool of replicas launches or removes, given its
// active claims and those being disrupted: a disrupted node holds its place
// against a scale-up until it is deleted, and is not taken for a scale-down (its
// successor is among the active claims).
func Delta(replicas, active, disrupting int) (launch, remove int) {
	switch {
	case active+disrupting < replicas:
		return replicas - active - disrupting, 0
	case active > replicas:
		return 0, active - replicas
	}
	return 0, 0
}

// ScalingDown is why a static pool replaces no drifted node while it has more
// claims than replicas (those being disrupted aside): the surplus goes first.
const ScalingDown = "the pool is scaling down"

// DriftRoom is how many of a static pool's candidates one drift or repair command
// replaces, one for one with nodes from its template launched first, as Karpenter's
// StaticDrift does: none while the pool is scaling down, and no more than
// limits.nodes leaves room for beside all its claims (deleting ones too). wait says
// why none.
func DriftRoom(np *v1.NodePool, claims, disrupting, candidates int) (room int, wait string) {
	if claims-disrupting > int(*np.Spec.Replicas) {
		return 0, ScalingDown
	}
	room = candidates
	if limit, ok := np.Spec.Limits[v1.ResourceNodes]; ok {
		room = max(min(room, int(limit.Value())-claims), 0)
	}
	if room == 0 {
		return 0, "limits.nodes leaves no room for their replacements"
	}
	return room, ""
}

// ScaleUp is what the pool launches toward its replicas when it lacks want claims:
// n claims, each starting from plan, as many as limits.nodes and the
// dovetail.sh/usd-per-hour limit leave room for, and, when that is fewer than
// want, which limit holds the rest. claims are all the pool's claims, those being
// deleted too: their instances may still run.
func ScaleUp(np *v1.NodePool, want int, claims []v1.NodeClaim, types []*scheduling.InstanceType) (n int, plan *scheduling.NodeClaimPlan, why string, err error) {
	n = want
	if room, held := NodeRoom(np, claims); room < n {
		n, why = room, held
	}
	if n <= 0 {
		return 0, nil, why, nil
	}
	plan, err = scheduling.TemplatePlan(np, types)
	if err != nil {
		return 0, nil, "", err
	}
	if limit, ok := scheduling.SpendLimit(np); ok && plan.Offering.Price > 0 {
		spent := Spend(claims, types)
		if room := int(math.Floor((limit-spent)/plan.Offering.Price + 1e-9)); room < n {
			n, why = max(room, 0), fmt.Sprintf("at its spend limit (%s of %s; a node costs %s)", scheduling.FormatDollars(spent), scheduling.FormatDollars(limit), scheduling.FormatDollars(plan.Offering.Price))
		}
	}
	return n, plan, why, nil
}

// NodeRoom is how many more claims limits.nodes lets the pool have (MaxInt without
// the limit), and the limit as the pool's events say it.
func NodeRoom(np *v1.NodePool, claims []v1.NodeClaim) (int, string) {
	limit, ok := np.Spec.Limits[v1.ResourceNodes]
	if !ok {
		return math.MaxInt, ""
	}
	return max(int(limit.Value())-len(claims), 0), fmt.Sprintf("at its node limit (limits.nodes %s, %d claims)", limit.String(), len(claims))
}

// Spend is what the claims cost per hour at list prices: each at the price it was
// planned at, else its offering's. Commitments are not charged against it, so a
// static pool stays within its limit whatever they later pay for.
func Spend(claims []v1.NodeClaim, types []*scheduling.InstanceType) float64 {
	total := 0.0
	for i := range claims {
		nc := &claims[i]
		if p, err := strconv.ParseFloat(nc.Annotations[dovetailv1alpha1.PlannedPriceAnnotationKey], 64); err == nil {
			total += p
			continue
		}
		if price := consolidation.Price(types, nc.Labels[v1.LabelInstanceType], nc.Labels[v1.LabelTopologyZone], nc.Labels[v1.LabelCapacityType]); !math.IsNaN(price) {
			total += price
		}
	}
	return total
}
