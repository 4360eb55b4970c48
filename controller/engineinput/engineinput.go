// Package engineinput builds the scheduling engine's input from a view of the
// cluster: which pods are pending, what every node and in-flight NodeClaim holds
// (with the pods nominated to it), which pools may launch and with what types. It
// is the one place that input is built, for the controller's provisioner and for
// every prediction (dovetail simulate, explain, the plan-time impact), and it does
// no I/O and keeps no books of its own.
package engineinput

import (
	"context"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"sigs.k8s.io/controller-runtime/pkg/log"

	dovetailv1alpha1 "github.com/dovetail-sh/dovetail/controller/apis/dovetail/v1alpha1"
	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/controller/apis/v1alpha1"
	"github.com/dovetail-sh/dovetail/controller/cloudprovider"
	"github.com/dovetail-sh/dovetail/controller/commitment"
	"github.com/dovetail-sh/dovetail/controller/scheduling"
	"github.com/dovetail-sh/dovetail/controller/state"
)

// NominationTTL is how long a pod stays nominated to a node that is ready for it
// before the provisioner considers it pending again.
const NominationTTL = 30 * time.Second

// Nomination is a pod's nomination to a NodeClaim or Node (Target, by name) made
// at At.
type Nomination struct {
	Target string
	At     time.Time
}

// TypesOf lists the instance types a pool may launch.
type TypesOf func(context.Context, *v1.NodePool) ([]*scheduling.InstanceType, error)

// MaxInstanceTypes caps the options written to a NodeClaim, as Karpenter does: the
// cheapest 60 leave the cloud plenty of choice and keep the object small.
const MaxInstanceTypes = 60

type Snapshot struct {
	Pending       []*corev1.Pod
	Nominated     int
	Nodes         []*scheduling.ExistingNode
	Pools         []*v1.NodePool
	PoolByName    map[string]*v1.NodePool
	InstanceTypes map[string][]*scheduling.InstanceType
	DaemonSetPods []*corev1.Pod
	// usage is what each pool holds toward its limits: every claim, including
	// those of nodes that are no place for pods (deleting, cordoned, disrupted).
	Usage map[string]scheduling.PoolUsage
	// claims by name, for taking what a claim holds out of its pool's usage.
	Claims map[string]*v1.NodeClaim
	// volumes are what pods' volumes require of their nodes; attachments the
	// volumes they attach, by CSI driver.
	Volumes     map[types.UID]scheduling.VolumeTopology
	Attachments map[types.UID]scheduling.AttachedVolumes
	// refused are the pending pods no node can take until their volumes change,
	// with why: they are not planned, and their events say so.
	Refused []scheduling.PodError
}

// Notes are what building a snapshot found for the provisioner's books.
type Notes struct {
	// expired are the nominations whose target is gone or long ready.
	Expired []types.UID
	// void are nominated pods that no longer fit their node: pending again.
	Void []*corev1.Pod
	// oversized are nodes that report more allocatable than their instance has.
	Oversized []OversizedNode
}

type OversizedNode struct {
	Node  *corev1.Node
	Claim *v1.NodeClaim
	Over  []corev1.ResourceName
}

// Build is the engine's input from a view of the cluster and the
// nominations in force at now: the one place it is built, for the controller and
// for every prediction. It changes nothing it reads and keeps no books of its own.
func Build(ctx context.Context, view *state.View, typesOf TypesOf, nominations map[types.UID]Nomination, now time.Time) (*Snapshot, Notes) {
	var notes Notes
	pods, nodes, claims, pools := view.Pods, view.Nodes, view.Claims, view.Pools
	s := &Snapshot{PoolByName: map[string]*v1.NodePool{}, InstanceTypes: map[string][]*scheduling.InstanceType{}}
	for i := range pools {
		np := &pools[i]
		// A pool whose node class is missing or invalid would only launch failures:
		// Karpenter plans only on pools that are Ready. One with no Ready condition
		// at all has not been looked at yet (or is a manifest from Git) and counts.
		if ready := meta.FindStatusCondition(np.Status.Conditions, v1.ConditionTypeReady); np.DeletionTimestamp != nil || (ready != nil && ready.Status != metav1.ConditionTrue) {
			continue
		}
		types, err := typesOf(ctx, np)
		if err != nil {
			// One pool's broken node class must not stop the others from launching.
			log.FromContext(ctx).Error(err, "skipping nodepool: its instance types are unknown", "nodepool", np.Name)
			continue
		}
		s.Pools = append(s.Pools, np)
		s.PoolByName[np.Name] = np
		s.InstanceTypes[np.Name] = types
	}
	bound := map[string][]*corev1.Pod{}
	var provisionable []*corev1.Pod
	volumes := scheduling.NewVolumes(view.PVCs, view.PVs, view.StorageClasses)
	s.Volumes = map[types.UID]scheduling.VolumeTopology{}
	s.Attachments = map[types.UID]scheduling.AttachedVolumes{}
	volumesOf := volumes.Requirements
	if view.VolumesUnknown {
		volumesOf = func(*corev1.Pod) (scheduling.VolumeTopology, error) { return nil, nil }
	}
	attach := func(pod *corev1.Pod) {
		if a := volumes.Attachments(pod); len(a) > 0 {
			s.Attachments[pod.UID] = a
		}
	}
	// The newest running pod of each DaemonSet says what it asks of a node (a
	// vertical autoscaler, or a template changed since), as Karpenter reads it.
	// They are found by the DaemonSet's namespace and name: a snapshot written by
	// hand may carry no UIDs.
	daemonPods := map[string]*corev1.Pod{}
	for i := range pods {
		pod := pods[i]
		if owner := metav1.GetControllerOf(pod); owner != nil && owner.Kind == "DaemonSet" && pod.Status.Phase != corev1.PodSucceeded && pod.Status.Phase != corev1.PodFailed {
			key := pod.Namespace + "/" + owner.Name
			if newest, ok := daemonPods[key]; !ok || newest.CreationTimestamp.Before(&pod.CreationTimestamp) {
				daemonPods[key] = pod
			}
		}
		switch {
		case pod.Spec.NodeName != "" && pod.Status.Phase != corev1.PodSucceeded && pod.Status.Phase != corev1.PodFailed:
			bound[pod.Spec.NodeName] = append(bound[pod.Spec.NodeName], pod)
			attach(pod)
			// A bound pod that consolidation moves stays with its volumes; one whose
			// claims cannot be read keeps none of their constraints.
			if reqs, err := volumesOf(pod); err == nil && len(reqs) > 0 {
				s.Volumes[pod.UID] = reqs
			}
		case IsProvisionable(pod):
			reqs, err := volumesOf(pod)
			if err != nil {
				// kube-scheduler places it on no node until its volume is sorted out:
				// a node launched for it would stay empty.
				s.Refused = append(s.Refused, scheduling.PodError{Pod: pod, Reason: err.Error()})
				continue
			}
			if len(reqs) > 0 {
				s.Volumes[pod.UID] = reqs
			}
			attach(pod)
			provisionable = append(provisionable, pod)
		}
	}
	volumeLimits := map[string]map[string]int{}
	for i := range view.CSINodes {
		for _, d := range view.CSINodes[i].Spec.Drivers {
			if d.Allocatable == nil || d.Allocatable.Count == nil {
				continue
			}
			if volumeLimits[view.CSINodes[i].Name] == nil {
				volumeLimits[view.CSINodes[i].Name] = map[string]int{}
			}
			volumeLimits[view.CSINodes[i].Name][d.Name] = int(*d.Allocatable.Count)
		}
	}
	nodeByProviderID := map[string]*corev1.Node{}
	for i := range nodes {
		n := &nodes[i]
		nodeByProviderID[n.Spec.ProviderID] = n
	}
	// Nominations hold while their target exists and is not yet ready for the pod
	// (or became ready only recently: kube-scheduler needs a moment to bind).
	live := map[string]time.Time{} // target -> when it became ready (zero: not yet)
	claimOfNode := map[string]string{}
	launchedAllocatable := map[string]corev1.ResourceList{}
	launchedClaim := map[string]*v1.NodeClaim{}
	startupTaints := map[string][]corev1.Taint{}
	draining := map[string]bool{} // nodes whose claim is being deleted
	for i := range claims {
		nc := &claims[i]
		if nc.DeletionTimestamp != nil {
			if n, ok := nodeByProviderID[nc.Status.ProviderID]; ok && nc.Status.ProviderID != "" {
				draining[n.Name] = true
			}
			continue
		}
		live[nc.Name] = initializedAt(nc)
		if n, ok := nodeByProviderID[nc.Status.ProviderID]; ok && nc.Status.ProviderID != "" {
			claimOfNode[n.Name] = nc.Name
			// Pods placed on a registered node are nominated to the node by its name,
			// which on EC2 is not the claim's.
			live[n.Name] = initializedAt(nc)
			launchedAllocatable[n.Name] = nc.Status.Allocatable
			launchedClaim[n.Name] = nc
			if initializedAt(nc).IsZero() {
				startupTaints[n.Name] = nc.Spec.StartupTaints
			}
		}
	}
	for i := range nodes {
		if _, ok := claimOfNode[nodes[i].Name]; !ok {
			live[nodes[i].Name] = nodes[i].CreationTimestamp.Time
		}
	}
	nominated := map[string][]*corev1.Pod{}
	for uid, nom := range nominations {
		ready, ok := live[nom.Target]
		if !ok || (!ready.IsZero() && now.Sub(maxTime(ready, nom.At)) > NominationTTL) {
			notes.Expired = append(notes.Expired, uid)
		}
	}
	expired := sets.New(notes.Expired...)
	for _, pod := range provisionable {
		if nom, ok := nominations[pod.UID]; ok && !expired.Has(pod.UID) {
			nominated[nom.Target] = append(nominated[nom.Target], pod)
			s.Nominated++
			continue
		}
		s.Pending = append(s.Pending, pod)
	}

	for i := range nodes {
		n := &nodes[i]
		if n.DeletionTimestamp != nil || n.Spec.Unschedulable || hasTaint(n, v1.DisruptedNoScheduleTaint.Key) || draining[n.Name] {
			continue
		}
		allocatable := n.Status.Allocatable
		if allocatable.Cpu().IsZero() && len(launchedAllocatable[n.Name]) > 0 {
			// A node that has registered but not yet reported its resources has what
			// its instance was launched with; reading it as empty would void every
			// Nomination to it and launch again.
			allocatable = launchedAllocatable[n.Name]
		}
		if nc := launchedClaim[n.Name]; nc != nil {
			if over := exceeding(allocatable, nc.Status.Capacity); len(over) > 0 {
				allocatable = trustedAllocatable(allocatable, nc.Status.Allocatable, over)
				notes.Oversized = append(notes.Oversized, OversizedNode{Node: n, Claim: nc, Over: over})
			}
		}
		en := &scheduling.ExistingNode{
			Name: n.Name, Labels: n.Labels, Taints: withoutStartupTaints(n.Spec.Taints, startupTaints[n.Name]),
			Capacity: scheduling.FromResourceList(n.Status.Capacity), Allocatable: scheduling.FromResourceList(allocatable),
			Pods: bound[n.Name], NodePool: n.Labels[v1.LabelNodePool], VolumeLimits: volumeLimits[n.Name],
		}
		targets := []string{n.Name}
		if claim, ok := claimOfNode[n.Name]; ok && claim != n.Name {
			targets = append(targets, claim)
		}
		var candidates []*corev1.Pod
		for _, t := range targets {
			candidates = append(candidates, nominated[t]...)
		}
		// kube-scheduler may bind other pods than the ones nominated here; a
		// Nomination that no longer fits is void and its pod is pending again.
		kept, void := fitNominations(en, candidates)
		if len(void) > 0 {
			log.FromContext(ctx).V(1).Info("nominations no longer fit", "node", n.Name, "bound", len(en.Pods), "kept", len(kept), "void", len(void))
		}
		en.Pods = append(append([]*corev1.Pod{}, en.Pods...), kept...)
		s.Pending = append(s.Pending, void...)
		s.Nominated -= len(void)
		notes.Void = append(notes.Void, void...)
		s.Nodes = append(s.Nodes, en)
	}
	for i := range claims {
		nc := &claims[i]
		if nc.DeletionTimestamp != nil {
			continue
		}
		if _, registered := nodeByProviderID[nc.Status.ProviderID]; registered && nc.Status.ProviderID != "" {
			continue
		}
		s.Nodes = append(s.Nodes, inFlight(nc, nominated[nc.Name]))
	}
	s.DaemonSetPods = daemonSetPods(view.DaemonSets, daemonPods)
	s.Usage = scheduling.UsageOfClaimsAndNodes(claims, nodes)
	s.Claims = make(map[string]*v1.NodeClaim, len(claims))
	for i := range claims {
		s.Claims[claims[i].Name] = &claims[i]
	}
	return s, notes
}

// fitNominations keeps the nominated pods that still fit beside the node's bound pods.
func fitNominations(n *scheduling.ExistingNode, nominated []*corev1.Pod) (kept, void []*corev1.Pod) {
	free := n.Allocatable
	for _, pod := range n.Pods {
		free = free.Sub(scheduling.PodRequests(pod))
	}
	for _, pod := range nominated {
		req := scheduling.PodRequests(pod)
		if req.Fits(free) {
			free = free.Sub(req)
			kept = append(kept, pod)
			continue
		}
		void = append(void, pod)
	}
	return kept, void
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func initializedAt(nc *v1.NodeClaim) time.Time {
	for _, c := range nc.Status.Conditions {
		if c.Type == v1.ConditionTypeInitialized && c.Status == metav1.ConditionTrue {
			return c.LastTransitionTime.Time
		}
	}
	return time.Time{}
}

func hasTaint(n *corev1.Node, key string) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == key {
			return true
		}
	}
	return false
}

// withoutStartupTaints drops taints that go away on their own (the unregistered
// taint, node conditions' taints, the NodePool's startup taints until the node
// initializes, and a reboot's taint) so capacity being born, or coming back from a
// reboot, is still usable: pods need not tolerate them, and the pods a reboot
// drains wait for their node rather than buy another, as in Karpenter.
func withoutStartupTaints(taints, startup []corev1.Taint) []corev1.Taint {
	out := make([]corev1.Taint, 0, len(taints))
	for _, t := range taints {
		if t.Key == v1.UnregisteredNoExecuteTaint.Key || t.Key == v1.RebootingNoScheduleTaint.Key ||
			strings.HasPrefix(t.Key, "node.kubernetes.io/") || strings.HasPrefix(t.Key, "node.cloudprovider.kubernetes.io/") {
			continue
		}
		if matchesAny(t, startup) {
			continue
		}
		out = append(out, t)
	}
	return out
}

func matchesAny(t corev1.Taint, taints []corev1.Taint) bool {
	for i := range taints {
		if taints[i].MatchTaint(&t) {
			return true
		}
	}
	return false
}

// inFlight describes a launched-or-launching claim as capacity: its requirements'
// labels, and its allocatable once known, else the requests it was planned with.
func inFlight(nc *v1.NodeClaim, pods []*corev1.Pod) *scheduling.ExistingNode {
	labels := map[string]string{}
	if reqs, err := cloudprovider.Requirements(nc); err == nil {
		for k, v := range reqs.Labels() {
			labels[k] = v
		}
	}
	for k, v := range nc.Labels {
		labels[k] = v
	}
	labels[v1.LabelHostname] = nc.Name
	allocatable := scheduling.FromResourceList(nc.Status.Allocatable)
	capacity := scheduling.FromResourceList(nc.Status.Capacity)
	if len(nc.Status.Allocatable) == 0 {
		allocatable = scheduling.FromResourceList(nc.Spec.Resources.Requests)
		capacity = allocatable
	}
	planned, err := strconv.ParseFloat(nc.Annotations[dovetailv1alpha1.PlannedPriceAnnotationKey], 64)
	if err != nil {
		planned = math.NaN()
	}
	return &scheduling.ExistingNode{
		Name: nc.Name, Labels: labels, Taints: nc.Spec.Taints, Capacity: capacity, Allocatable: allocatable,
		Pods: pods, NodePool: nc.Labels[v1.LabelNodePool], PlannedPrice: planned,
	}
}

func daemonSetPods(list []appsv1.DaemonSet, running map[string]*corev1.Pod) []*corev1.Pod {
	out := make([]*corev1.Pod, 0, len(list))
	for i := range list {
		ds := &list[i]
		// The template is not a Pod the API server has defaulted: a container
		// that sets only limits requests them.
		spec := scheduling.WithRequestsFromLimits(ds.Spec.Template.Spec)
		if pod, ok := running[ds.Namespace+"/"+ds.Name]; ok {
			// Where it runs is the template's to say (the DaemonSet controller pins
			// each pod to its node); what it asks is the running pod's.
			spec.Containers, spec.InitContainers, spec.Overhead, spec.Resources = pod.Spec.Containers, pod.Spec.InitContainers, pod.Spec.Overhead, pod.Spec.Resources
		}
		out = append(out, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: ds.Name, Namespace: ds.Namespace, Labels: ds.Spec.Template.Labels}, Spec: spec})
	}
	return out
}

// FromView is the engine's view of a cluster that no provisioner runs in
// (one read from files, or generated): no pod is nominated anywhere, and every pool
// may launch the instance types typesOf gives it.
func FromView(view *state.View, typesOf func(*v1.NodePool) []*scheduling.InstanceType, costs scheduling.NodeCosts) *scheduling.Snapshot {
	s, _ := Build(context.Background(), view, func(_ context.Context, np *v1.NodePool) ([]*scheduling.InstanceType, error) {
		return typesOf(np), nil
	}, nil, time.Time{})
	return s.Engine(costs, nil)
}

func (s *Snapshot) Engine(costs scheduling.NodeCosts, commitments *commitment.Ledger) *scheduling.Snapshot {
	return &scheduling.Snapshot{Commitments: commitments, Pending: s.Pending, Nodes: s.Nodes, Pools: s.Pools, InstanceTypes: s.InstanceTypes, DaemonSetPods: s.DaemonSetPods, NodeCosts: costs, PoolUsage: s.Usage, Claims: s.Claims, VolumeRequirements: s.Volumes, VolumeAttachments: s.Attachments, Refused: s.Refused}
}

// IsProvisionable reports whether a pod is waiting for capacity Dovetail could add:
// unbound, alive, not a daemonset's, not gated, for the default scheduler, and either
// rejected by kube-scheduler or not yet looked at. Waiting for the rejection would
// cost seconds in a burst (kube-scheduler marks a few hundred pods a second), and is
// not needed for safety: the engine fills existing capacity before it launches any.
func IsProvisionable(pod *corev1.Pod) bool {
	if pod.Spec.NodeName != "" || pod.DeletionTimestamp != nil || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return false
	}
	if scheduling.OwnedByDaemonSet(pod) || len(pod.Spec.SchedulingGates) > 0 {
		return false
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled {
			// Whichever scheduler or profile the pod names has found no node for it,
			// as Karpenter reads it (another kube-scheduler profile is common: one
			// with default spread constraints, say).
			return c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable
		}
	}
	// Not looked at yet (or read from a file): plan it only for the default
	// scheduler, whose verdict the plan predicts; another scheduler may never take it.
	name := pod.Spec.SchedulerName
	return name == "" || name == corev1.DefaultSchedulerName
}

// ClaimOf is the NodeClaim the provisioner writes for a plan of the pool (named by
// the API server from its GenerateName): the pool's template, the plan's
// requirements and requests, the pool's hash, what the template's metadata was,
// the price planned and the commitment covering it, and Karpenter's marks of a
// NodeOverlay. Predictions put the same claim in flight between rounds.
func ClaimOf(np *v1.NodePool, plan *scheduling.NodeClaimPlan) *v1.NodeClaim {
	reqs := NodeClaimRequirements(plan)
	// The pool may come from the cache uncopied; the create's response is decoded
	// into the new claim, so it must not share the pool's slices and pointers.
	tmpl := np.Spec.Template.DeepCopy()
	labels := map[string]string{v1.LabelNodePool: np.Name}
	for k, v := range tmpl.Labels {
		labels[k] = v
	}
	annotations := map[string]string{v1.NodePoolHashAnnotationKey: np.Hash(), v1.NodePoolHashVersionAnnotationKey: v1.NodePoolHashVersion}
	for k, v := range tmpl.Annotations {
		annotations[k] = v
	}
	annotations[dovetailv1alpha1.TemplateLabelsAnnotationKey] = dovetailv1alpha1.JoinKeys(tmpl.Labels)
	annotations[dovetailv1alpha1.TemplateAnnotationsAnnotationKey] = dovetailv1alpha1.JoinKeys(tmpl.Annotations)
	for _, it := range plan.InstanceTypeOptions[:min(len(plan.InstanceTypeOptions), MaxInstanceTypes)] {
		// Karpenter's marks: a NodeOverlay changed what the claim was planned with.
		if it.PriceOverlaid {
			annotations[v1alpha1.PriceOverlayAppliedAnnotationKey] = "true"
		}
		if it.CapacityOverlaid {
			annotations[v1alpha1.CapacityOverlayAppliedAnnotationKey] = "true"
		}
	}
	annotations[dovetailv1alpha1.PlannedPriceAnnotationKey] = strconv.FormatFloat(plan.Offering.Price, 'f', 6, 64)
	if plan.CoveredBy != "" {
		annotations[dovetailv1alpha1.CoveredByAnnotationKey] = plan.CoveredBy
	}
	blockOwnerDeletion := true
	return &v1.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName: np.Name + "-",
			Labels:       labels,
			Annotations:  annotations,
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: v1.SchemeGroupVersion.String(), Kind: "NodePool", Name: np.Name, UID: np.UID,
				BlockOwnerDeletion: &blockOwnerDeletion,
			}},
			Finalizers: []string{v1.TerminationFinalizer},
		},
		Spec: v1.NodeClaimSpec{
			Taints: tmpl.Spec.Taints, StartupTaints: tmpl.Spec.StartupTaints,
			Requirements: reqs, NodeClassRef: tmpl.Spec.NodeClassRef,
			Resources:              v1.ResourceRequirements{Requests: plan.Requests.ToResourceList()},
			TerminationGracePeriod: tmpl.Spec.TerminationGracePeriod,
			ExpireAfter:            tmpl.Spec.ExpireAfter,
		},
	}
}

// NodeClaimRequirements are the requirements the NodeClaim of a plan is written
// with: what EC2 is asked for, the cheapest MaxInstanceTypes options among them.
// simulate shows these too.
func NodeClaimRequirements(plan *scheduling.NodeClaimPlan) []v1.NodeSelectorRequirementWithMinValues {
	reqs := plan.Requirements.ToNodeSelectorRequirements()
	for i := range reqs {
		if reqs[i].Key == v1.LabelInstanceType && len(reqs[i].Values) > MaxInstanceTypes {
			names := make([]string, 0, MaxInstanceTypes)
			for _, it := range plan.InstanceTypeOptions[:MaxInstanceTypes] {
				names = append(names, it.Name)
			}
			sort.Strings(names)
			reqs[i].Values = names
		}
	}
	return reqs
}

// exceeding are the resources whose reported amount is more than capacity has.
func exceeding(reported, capacity corev1.ResourceList) []corev1.ResourceName {
	var out []corev1.ResourceName
	for name, q := range reported {
		if c, ok := capacity[name]; ok && q.Cmp(c) > 0 {
			out = append(out, name)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// trustedAllocatable is reported with the resources in over replaced by the instance's.
func trustedAllocatable(reported, launched corev1.ResourceList, over []corev1.ResourceName) corev1.ResourceList {
	out := reported.DeepCopy()
	for _, name := range over {
		if q, ok := launched[name]; ok {
			out[name] = q
		} else {
			delete(out, name)
		}
	}
	return out
}
