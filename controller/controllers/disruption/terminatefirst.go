package disruption

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/util/sets"

	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/controller/scheduling"
)

// Why a command terminates first, as Karpenter v1.15's terminate_first_reason
// label names it.
const (
	// terminateFirstNoReservedCapacity: the replacement has nowhere to launch but
	// the place the node holds in a full capacity reservation.
	terminateFirstNoReservedCapacity = "no-reserved-capacity"
	// terminateFirstStaticAtLimit: the node's static pool is at limits.nodes, so
	// its replacement cannot launch beside it.
	terminateFirstStaticAtLimit = "static-at-limit"
)

// freesItsReservation reports whether deleting the candidate first is what lets
// its pods run again (Karpenter's terminate-first, RFC kubernetes-sigs/karpenter
// #3203): it holds a place in a capacity reservation, and with that place free every
// one of its pods has one, taking no more of the reservation than the one place.
// Called once replacing it first has failed: a reservation is finite and
// exclusive, so its replacement cannot launch while it runs, where spot or
// on-demand capacity would just add a node.
func freesItsReservation(s *pass, cand *candidate) (string, bool) {
	id := cand.Node.Labels[v1.LabelCapacityReservationID]
	if cand.Node.Labels[v1.LabelCapacityType] != v1.CapacityTypeReserved || id == "" {
		return "", false
	}
	results := simulateOn(s.snap.FreeingReservation(id), s, []*candidate{cand})
	if unplaced(results, []*candidate{cand}) != nil {
		return "", false
	}
	taken := 0
	for _, p := range results.NodeClaims {
		if p.Offering.ReservationID == id {
			taken++
		}
	}
	return id, taken <= 1
}

// staticTerminateFirst is what a static pool's drifted or unhealthy nodes do when
// the pool cannot launch their replacements first, as Karpenter's StaticDrift and
// repair do: with the gate on, a pool that is Ready (its static provisioning
// refills it) deletes the nodes that free what the replacement needs, each saying
// why; the rest wait. The reservations are checked first, so a node whose
// reservation-bound replacement has no place is not counted at the node limit.
func staticTerminateFirst(s *pass, np *v1.NodePool, cands []*candidate, atLimit bool) (first []*candidate, reason string, err error) {
	if np.DeletionTimestamp != nil || !meta.IsStatusConditionTrue(np.Status.Conditions, v1.ConditionTypeReady) {
		return nil, "", nil
	}
	full, offered, err := scheduling.TemplateReservationsFull(np, s.snap.InstanceTypes[np.Name])
	if err != nil {
		return nil, "", err
	}
	if full {
		return holdingOneOf(cands, offered), terminateFirstNoReservedCapacity, nil
	}
	if atLimit {
		return cands, terminateFirstStaticAtLimit, nil
	}
	return nil, "", nil
}

// holdingOneOf are the candidates that hold a place in one of the reservations.
func holdingOneOf(cands []*candidate, reservations sets.Set[string]) []*candidate {
	var out []*candidate
	for _, cand := range cands {
		if cand.Node.Labels[v1.LabelCapacityType] == v1.CapacityTypeReserved && reservations.Has(cand.Node.Labels[v1.LabelCapacityReservationID]) {
			out = append(out, cand)
		}
	}
	return out
}

// terminateFirstExplanation says, on a terminate-first command's nodes, why
// nothing replaces them first.
func terminateFirstExplanation(reason string, np *v1.NodePool) string {
	if reason == terminateFirstStaticAtLimit {
		return fmt.Sprintf("static nodepool %s is at its limits.nodes, so the replacement launches once the node has gone", np.Name)
	}
	return fmt.Sprintf("static nodepool %s can launch only into its full capacity reservations, so the replacement launches into the place the node frees", np.Name)
}
