package provisioning

import (
	"context"
	"maps"
	"math"
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
	"github.com/dovetail-sh/dovetail/controller/cloudprovider"
	"github.com/dovetail-sh/dovetail/controller/commitment"
	"github.com/dovetail-sh/dovetail/controller/scheduling"
	"github.com/dovetail-sh/dovetail/controller/state"
)

type snapshot struct {
	pending       []*corev1.Pod
	nominated     int
	nodes         []*scheduling.ExistingNode
	pools         []*v1.NodePool
	poolByName    map[string]*v1.NodePool
	instanceTypes map[string][]*scheduling.InstanceType
	daemonSetPods []*corev1.Pod
	// usage is what each pool holds toward its limits: every claim, including
	// those of nodes that are no place for pods (deleting, cordoned, disrupted).
	usage map[string]scheduling.PoolUsage
	// claims by name, for taking what a claim holds out of its pool's usage.
	claims map[string]*v1.NodeClaim
	// volumes are what pods' volumes require of their nodes; attachments the
	// volumes they attach, by CSI driver.
	volumes     map[types.UID]scheduling.VolumeTopology
	attachments map[types.UID]scheduling.AttachedVolumes
	// refused are the pending pods no node can take until their volumes change,
	// with why: they are not planned, and their events say so.
	refused []scheduling.PodError
}

// snapshot reads the cluster: pending pods, nodes with their pods, in-flight
// NodeClaims (with the pods already nominated to them, so a launch in progress is
// not planned twice), ready NodePools and their instance types, and daemonsets. It
// reads without copying the cache, since it runs every few hundred milliseconds in a
// burst and copies of every pod were most of the controller's memory: nothing here
// or in the engine writes to what it reads.
func (p *Provisioner) snapshot(ctx context.Context) (*snapshot, error) {
	view, err := p.cluster.Read(ctx, state.ReadOnly)
	if err != nil {
		return nil, err
	}
	return p.snapshotOf(ctx, view, p.cloud.GetInstanceTypes)
}

// instanceTypesOf lists the instance types a pool may launch.
type instanceTypesOf func(context.Context, *v1.NodePool) ([]*scheduling.InstanceType, error)

// snapshotOf builds the snapshot with the provisioner's nominations, then keeps
// the provisioner's books: nominations that expired or no longer fit are
// forgotten, nodes reporting more than their instance are flagged.
func (p *Provisioner) snapshotOf(ctx context.Context, view *state.View, typesOf instanceTypesOf) (*snapshot, error) {
	p.mu.Lock()
	nominations := maps.Clone(p.nominations)
	now := p.clock.Now()
	p.mu.Unlock()
	s, notes := buildSnapshot(ctx, view, typesOf, nominations, now)
	p.mu.Lock()
	// A pod nominated again since the copy keeps its new nomination.
	for _, uid := range notes.expired {
		if p.nominations[uid] == nominations[uid] {
			delete(p.nominations, uid)
		}
	}
	for _, pod := range notes.void {
		if p.nominations[pod.UID] == nominations[pod.UID] {
			delete(p.nominations, pod.UID)
		}
	}
	p.mu.Unlock()
	for _, o := range notes.oversized {
		p.flagOversized(o.node, o.claim, o.over)
	}
	p.forgetOversized(view.Nodes)
	return s, nil
}

// snapshotNotes are what building a snapshot found for the provisioner's books.
type snapshotNotes struct {
	// expired are the nominations whose target is gone or long ready.
	expired []types.UID
	// void are nominated pods that no longer fit their node: pending again.
	void []*corev1.Pod
	// oversized are nodes that report more allocatable than their instance has.
	oversized []oversizedNode
}

type oversizedNode struct {
	node  *corev1.Node
	claim *v1.NodeClaim
	over  []corev1.ResourceName
}

// buildSnapshot is the engine's input from a view of the cluster and the
// nominations in force at now: the one place it is built, for the controller and
// for every prediction. It changes nothing it reads and keeps no books of its own.
func buildSnapshot(ctx context.Context, view *state.View, typesOf instanceTypesOf, nominations map[types.UID]nomination, now time.Time) (*snapshot, snapshotNotes) {
	var notes snapshotNotes
	pods, nodes, claims, pools := view.Pods, view.Nodes, view.Claims, view.Pools
	s := &snapshot{poolByName: map[string]*v1.NodePool{}, instanceTypes: map[string][]*scheduling.InstanceType{}}
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
		s.pools = append(s.pools, np)
		s.poolByName[np.Name] = np
		s.instanceTypes[np.Name] = types
	}
	bound := map[string][]*corev1.Pod{}
	var provisionable []*corev1.Pod
	volumes := scheduling.NewVolumes(view.PVCs, view.PVs, view.StorageClasses)
	s.volumes = map[types.UID]scheduling.VolumeTopology{}
	s.attachments = map[types.UID]scheduling.AttachedVolumes{}
	volumesOf := volumes.Requirements
	if view.VolumesUnknown {
		volumesOf = func(*corev1.Pod) (scheduling.VolumeTopology, error) { return nil, nil }
	}
	attach := func(pod *corev1.Pod) {
		if a := volumes.Attachments(pod); len(a) > 0 {
			s.attachments[pod.UID] = a
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
				s.volumes[pod.UID] = reqs
			}
		case IsProvisionable(pod):
			reqs, err := volumesOf(pod)
			if err != nil {
				// kube-scheduler places it on no node until its volume is sorted out:
				// a node launched for it would stay empty.
				s.refused = append(s.refused, scheduling.PodError{Pod: pod, Reason: err.Error()})
				continue
			}
			if len(reqs) > 0 {
				s.volumes[pod.UID] = reqs
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
		ready, ok := live[nom.claim]
		if !ok || (!ready.IsZero() && now.Sub(maxTime(ready, nom.at)) > nominationTTL) {
			notes.expired = append(notes.expired, uid)
		}
	}
	expired := sets.New(notes.expired...)
	for _, pod := range provisionable {
		if nom, ok := nominations[pod.UID]; ok && !expired.Has(pod.UID) {
			nominated[nom.claim] = append(nominated[nom.claim], pod)
			s.nominated++
			continue
		}
		s.pending = append(s.pending, pod)
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
			// nomination to it and launch again.
			allocatable = launchedAllocatable[n.Name]
		}
		if nc := launchedClaim[n.Name]; nc != nil {
			if over := exceeding(allocatable, nc.Status.Capacity); len(over) > 0 {
				allocatable = trustedAllocatable(allocatable, nc.Status.Allocatable, over)
				notes.oversized = append(notes.oversized, oversizedNode{node: n, claim: nc, over: over})
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
		// nomination that no longer fits is void and its pod is pending again.
		kept, void := fitNominations(en, candidates)
		if len(void) > 0 {
			log.FromContext(ctx).V(1).Info("nominations no longer fit", "node", n.Name, "bound", len(en.Pods), "kept", len(kept), "void", len(void))
		}
		en.Pods = append(append([]*corev1.Pod{}, en.Pods...), kept...)
		s.pending = append(s.pending, void...)
		s.nominated -= len(void)
		notes.void = append(notes.void, void...)
		s.nodes = append(s.nodes, en)
	}
	for i := range claims {
		nc := &claims[i]
		if nc.DeletionTimestamp != nil {
			continue
		}
		if _, registered := nodeByProviderID[nc.Status.ProviderID]; registered && nc.Status.ProviderID != "" {
			continue
		}
		s.nodes = append(s.nodes, inFlight(nc, nominated[nc.Name]))
	}
	s.daemonSetPods = daemonSetPods(view.DaemonSets, daemonPods)
	s.usage = scheduling.UsageOfClaimsAndNodes(claims, nodes)
	s.claims = make(map[string]*v1.NodeClaim, len(claims))
	for i := range claims {
		s.claims[claims[i].Name] = &claims[i]
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

// SnapshotOf is the view as the engine sees it. Objects in it come from the view:
// read only.
func (p *Provisioner) SnapshotOf(ctx context.Context, view *state.View) (*scheduling.Snapshot, error) {
	s, err := p.snapshotOf(ctx, view, p.cloud.GetInstanceTypes)
	if err != nil {
		return nil, err
	}
	return s.public(p.costs, p.commitments.Ledger()), nil
}

// SnapshotFromView is the engine's view of a cluster that no provisioner runs in
// (one read from files, or generated): no pod is nominated anywhere, and every pool
// may launch the instance types typesOf gives it.
func SnapshotFromView(view *state.View, typesOf func(*v1.NodePool) []*scheduling.InstanceType, costs scheduling.NodeCosts) *scheduling.Snapshot {
	s, _ := buildSnapshot(context.Background(), view, func(_ context.Context, np *v1.NodePool) ([]*scheduling.InstanceType, error) {
		return typesOf(np), nil
	}, nil, time.Time{})
	return s.public(costs, nil)
}

func (s *snapshot) public(costs scheduling.NodeCosts, commitments *commitment.Ledger) *scheduling.Snapshot {
	return &scheduling.Snapshot{Commitments: commitments, Pending: s.pending, Nodes: s.nodes, Pools: s.pools, InstanceTypes: s.instanceTypes, DaemonSetPods: s.daemonSetPods, NodeCosts: costs, PoolUsage: s.usage, Claims: s.claims, VolumeRequirements: s.volumes, VolumeAttachments: s.attachments, Refused: s.refused}
}
