package simulate

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	autoscalingv1 "github.com/dovetail-sh/dovetail/controller/apis/autoscaling/v1"
	"github.com/dovetail-sh/dovetail/controller/provreq"
	"github.com/dovetail-sh/dovetail/controller/scheduling"
)

// RequestPlan is what the controller does with a ProvisioningRequest now: all of
// its pods placed together (on capacity there is, or on the nodes launched for
// them), or why not.
type RequestPlan struct {
	Name  string `json:"name"`
	Class string `json:"class"`
	Pods  int    `json:"pods"`
	// Outcome is Booked (provisioned before: its capacity is held for its pods),
	// Found (all fit on capacity there is), Launches (the nodes for all of them),
	// NotFound (tried again later), Failed, Ended, or Ignored (a class Dovetail
	// does not serve).
	Outcome string `json:"outcome"`
	// OnExistingNodes counts the pods placed on nodes there are or claims in
	// flight; NodeClaims are launched for the rest.
	OnExistingNodes int                `json:"onExistingNodes"`
	NodeClaims      []PlannedNodeClaim `json:"nodeClaims,omitempty"`
	PricePerHour    float64            `json:"pricePerHour"`
	Reason          string             `json:"reason,omitempty"`
}

// Outcomes of a request.
const (
	RequestBooked   = "Booked"
	RequestFound    = "Found"
	RequestLaunches = "Launches"
	RequestNotFound = "NotFound"
	RequestFailed   = "Failed"
	RequestEnded    = "Ended"
	RequestIgnored  = "Ignored"
)

// requestTemplates are the input's PodTemplates in the request's namespace, by name.
func requestTemplates(in *Inputs, pr *autoscalingv1.ProvisioningRequest) map[string]*corev1.PodTemplate {
	out := map[string]*corev1.PodTemplate{}
	for _, set := range pr.Spec.PodSets {
		if t, ok := in.podTemplates[pr.Namespace+"/"+set.PodTemplateRef.Name]; ok {
			out[set.PodTemplateRef.Name] = &corev1.PodTemplate{ObjectMeta: metav1.ObjectMeta{Name: set.PodTemplateRef.Name, Namespace: pr.Namespace}, Template: t}
		}
	}
	return out
}

// heldBookings are the bookings of the input's provisioned requests, which the
// controller holds in every snapshot.
func heldBookings(in *Inputs) []provreq.Booking {
	var out []provreq.Booking
	for _, pr := range in.ProvisioningRequests {
		if !provreq.Supported(pr.Spec.ProvisioningClassName) || !inForce(pr) || !meta.IsStatusConditionTrue(pr.Status.Conditions, autoscalingv1.ConditionProvisioned) {
			continue
		}
		if pods, err := provreq.VirtualPods(pr, requestTemplates(in, pr)); err == nil {
			out = append(out, provreq.Booking{Key: provreq.Key(pr.Namespace, pr.Name), UID: pr.UID, Pods: pods})
		}
	}
	return out
}

func inForce(pr *autoscalingv1.ProvisioningRequest) bool {
	return !meta.IsStatusConditionTrue(pr.Status.Conditions, autoscalingv1.ConditionFailed) && !meta.IsStatusConditionTrue(pr.Status.Conditions, autoscalingv1.ConditionBookingExpired)
}

// planRequests plans each request as the controller would, each as a unit, in
// the order they were created, on the snapshot with the bookings of the
// requests before it held (a request's new nodes are its own).
func planRequests(in *Inputs, snap *scheduling.Snapshot) []RequestPlan {
	requests := append([]*autoscalingv1.ProvisioningRequest(nil), in.ProvisioningRequests...)
	sort.SliceStable(requests, func(i, j int) bool {
		a, b := requests[i], requests[j]
		if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
			return a.CreationTimestamp.Before(&b.CreationTimestamp)
		}
		return provreq.Key(a.Namespace, a.Name) < provreq.Key(b.Namespace, b.Name)
	})
	out := make([]RequestPlan, 0, len(requests))
	for _, pr := range requests {
		out = append(out, planRequest(in, snap, pr))
	}
	return out
}

func planRequest(in *Inputs, snap *scheduling.Snapshot, pr *autoscalingv1.ProvisioningRequest) RequestPlan {
	rp := RequestPlan{Name: provreq.Key(pr.Namespace, pr.Name), Class: pr.Spec.ProvisioningClassName}
	for _, set := range pr.Spec.PodSets {
		rp.Pods += int(set.Count)
	}
	conditions := pr.Status.Conditions
	switch {
	case !provreq.Supported(pr.Spec.ProvisioningClassName):
		rp.Outcome, rp.Reason = RequestIgnored, "Dovetail serves "+autoscalingv1.ProvisioningClassCheckCapacity+" and "+autoscalingv1.ProvisioningClassBestEffortAtomicScaleUp+" only"
		return rp
	case meta.IsStatusConditionTrue(conditions, autoscalingv1.ConditionFailed):
		rp.Outcome, rp.Reason = RequestFailed, meta.FindStatusCondition(conditions, autoscalingv1.ConditionFailed).Message
		return rp
	case meta.IsStatusConditionTrue(conditions, autoscalingv1.ConditionBookingExpired):
		rp.Outcome, rp.Reason = RequestEnded, meta.FindStatusCondition(conditions, autoscalingv1.ConditionBookingExpired).Message
		return rp
	}
	pods, err := provreq.VirtualPods(pr, requestTemplates(in, pr))
	if err != nil {
		var missing *provreq.MissingTemplatesError
		if errors.As(err, &missing) {
			err = fmt.Errorf("%w (PodTemplates are read from the input, as the controller reads them from the request's namespace)", err)
		}
		rp.Outcome, rp.Reason = RequestFailed, "Failed to create pods, "+err.Error()
		return rp
	}
	if meta.IsStatusConditionTrue(conditions, autoscalingv1.ConditionProvisioned) {
		held := 0
		for _, n := range snap.Nodes {
			for _, p := range n.Pods {
				if p.Annotations[provreq.VirtualPodAnnotation] == rp.Name {
					held++
				}
			}
		}
		rp.Outcome, rp.OnExistingNodes = RequestBooked, held
		rp.Reason = fmt.Sprintf("provisioned: room for %d of its %d pods is held for them until they are scheduled or the booking expires", held, len(pods))
		return rp
	}
	launch := pr.Spec.ProvisioningClassName == autoscalingv1.ProvisioningClassBestEffortAtomicScaleUp
	results := snap.Plan(nil, pods, launch)
	for _, e := range results.Existing {
		rp.OnExistingNodes += len(e.Pods)
	}
	switch {
	case len(results.Unschedulable) > 0:
		rp.Outcome, rp.Reason = RequestNotFound, provreq.NotFoundMessage(results, len(pods), launch)
		if pr.Spec.Parameters[provreq.NoRetryParameter] == "true" {
			rp.Outcome = RequestFailed
		}
		return rp
	case len(results.NodeClaims) == 0:
		rp.Outcome, rp.Reason = RequestFound, "all pods fit on capacity in the cluster"
		provreq.Hold(snap, []provreq.Booking{{Key: rp.Name, UID: pr.UID, Pods: pods}})
		return rp
	}
	rp.Outcome = RequestLaunches
	types := make([]string, 0, len(results.NodeClaims))
	for _, nc := range results.NodeClaims {
		rp.NodeClaims = append(rp.NodeClaims, plannedNodeClaim(nc))
		types = append(types, nc.InstanceType.Name)
	}
	rp.PricePerHour = round(results.PricePerHour())
	rp.Reason = fmt.Sprintf("all %d nodes are launched together (%s), or none is kept", len(results.NodeClaims), strings.Join(types, ", "))
	return rp
}
