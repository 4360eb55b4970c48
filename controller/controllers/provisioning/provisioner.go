// Package provisioning turns pending pods into NodeClaims: it batches pods that
// kube-scheduler cannot place, runs the scheduling engine on the cluster's state,
// creates the NodeClaims it plans, and nominates the pods to them.
package provisioning

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/controller/cloudprovider"
	"github.com/dovetail-sh/dovetail/controller/metrics"
	"github.com/dovetail-sh/dovetail/controller/scheduling"
)

// maxInstanceTypes caps the options written to a NodeClaim, as Karpenter does: the
// cheapest 60 leave the cloud plenty of choice and keep the object small.
const maxInstanceTypes = 60

// recheckInterval is how soon the provisioner looks again while nominated pods wait.
const recheckInterval = 2 * time.Second

// nominationTTL is how long a pod stays nominated to a node that is ready for it
// before the provisioner considers it pending again.
const nominationTTL = 30 * time.Second

type nomination struct {
	claim string
	at    time.Time
}

// Provisioner is the provisioning loop.
type Provisioner struct {
	kube     client.Client
	cloud    cloudprovider.CloudProvider
	clock    clock.Clock
	recorder record.EventRecorder
	batcher  *Batcher

	mu          sync.Mutex
	nominations map[types.UID]nomination
	// unschedulable holds the pods the last solve could not place. Their status keeps
	// changing as kube-scheduler retries them; only new pods, or a change to the
	// cluster, should open a new batch.
	unschedulable map[types.UID]bool
	// seen holds the pods that triggered the batch being gathered: their later
	// status updates must not keep extending it.
	seen map[types.UID]bool
}

// NewProvisioner wires a provisioner.
func NewProvisioner(kube client.Client, cloud cloudprovider.CloudProvider, clk clock.Clock, recorder record.EventRecorder, batcher *Batcher) *Provisioner {
	return &Provisioner{kube: kube, cloud: cloud, clock: clk, recorder: recorder, batcher: batcher,
		nominations: map[types.UID]nomination{}, unschedulable: map[types.UID]bool{}, seen: map[types.UID]bool{}}
}

// Start runs the loop until ctx ends; the manager calls it on the leader only.
func (p *Provisioner) Start(ctx context.Context) error {
	logger := log.FromContext(ctx).WithName("provisioner")
	ctx = log.IntoContext(ctx, logger)
	launchFull := func() {
		if _, err := p.schedule(ctx, true); err != nil {
			logger.Error(err, "provisioning the nodes a gathering batch fills")
		}
	}
	for p.batcher.Wait(ctx, launchFull) {
		waiting, err := p.Schedule(ctx)
		if err != nil {
			logger.Error(err, "provisioning")
			// Try again after the idle window rather than spin.
			p.batcher.Trigger()
		}
		if waiting {
			// Nominated pods are still pending: look again soon, so a nomination that
			// kube-scheduler did not honour is noticed without waiting for a new pod.
			go func() {
				select {
				case <-p.clock.After(recheckInterval):
					p.batcher.Recheck()
				case <-ctx.Done():
				}
			}()
		}
	}
	return nil
}

// NeedLeaderElection keeps followers from provisioning.
func (p *Provisioner) NeedLeaderElection() bool { return true }

// Trigger asks for a solve.
func (p *Provisioner) Trigger() { p.batcher.Trigger() }

// TriggerFor asks for a solve for a pod the provisioner has no answer for yet: not
// nominated, not found unschedulable by the last solve, and not already waiting in
// the batch being gathered. It reports whether it triggered.
func (p *Provisioner) TriggerFor(pod *corev1.Pod) bool {
	p.mu.Lock()
	_, nominated := p.nominations[pod.UID]
	known := nominated || p.unschedulable[pod.UID] || p.seen[pod.UID]
	if !known {
		p.seen[pod.UID] = true
	}
	p.mu.Unlock()
	if !known {
		p.batcher.Trigger()
	}
	return !known
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
	if isDaemonSetPod(pod) || len(pod.Spec.SchedulingGates) > 0 {
		return false
	}
	if name := pod.Spec.SchedulerName; name != "" && name != corev1.DefaultSchedulerName {
		return false
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled {
			return c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable
		}
	}
	return true
}

func isDaemonSetPod(pod *corev1.Pod) bool {
	for _, o := range pod.OwnerReferences {
		if o.Kind == "DaemonSet" {
			return true
		}
	}
	return false
}

// Schedule solves once over the current cluster state. It reports whether pods are
// still waiting on nominations, which calls for another look soon.
func (p *Provisioner) Schedule(ctx context.Context) (bool, error) { return p.schedule(ctx, false) }

// schedule solves; with fullOnly it launches only the NodeClaims the plan fills (no
// pending pod would fit in what is left), nominates only their pods and existing
// placements, and leaves everything else to the batch being gathered.
func (p *Provisioner) schedule(ctx context.Context, fullOnly bool) (bool, error) {
	logger := log.FromContext(ctx)
	state, err := p.snapshot(ctx)
	if err != nil {
		return false, err
	}
	metrics.PodsPending.Set(float64(len(state.pending)))
	if !fullOnly {
		p.mu.Lock()
		p.seen = map[types.UID]bool{}
		p.mu.Unlock()
	}
	if len(state.pending) == 0 {
		logger.V(1).Info("nothing to provision", "nominatedPods", state.nominated)
		return state.nominated > 0, nil
	}
	start := p.clock.Now()
	results := scheduling.Solve(scheduling.Input{
		Pods: state.pending, Nodes: state.nodes, NodePools: state.pools,
		InstanceTypes: state.instanceTypes, DaemonSetPods: state.daemonSetPods,
	})
	solveDuration := p.clock.Since(start)
	metrics.SchedulingDuration.Observe(solveDuration.Seconds())
	if fullOnly {
		results.NodeClaims = filledClaims(results.NodeClaims, state.pending)
		if len(results.NodeClaims) == 0 {
			return false, nil
		}
		results.Unschedulable = nil
	}
	metrics.PodsUnschedulable.Set(float64(len(results.Unschedulable)))
	// Creates run in parallel: each one is a round trip through the CRD's validation,
	// and a burst can plan dozens of nodes.
	claims := make([]*v1.NodeClaim, len(results.NodeClaims))
	errs := make([]error, len(results.NodeClaims))
	workqueue.ParallelizeUntil(ctx, 16, len(results.NodeClaims), func(i int) {
		plan := results.NodeClaims[i]
		claims[i], errs[i] = p.create(ctx, state.poolByName[plan.NodePool], plan, "provisioning")
	})
	created := 0
	for i, plan := range results.NodeClaims {
		if errs[i] != nil {
			logger.Error(errs[i], "creating nodeclaim", "nodepool", plan.NodePool)
			for _, pod := range plan.Pods {
				p.recorder.Eventf(pod, corev1.EventTypeWarning, "FailedScheduling", "Failed to create a NodeClaim for the pod: %v", errs[i])
			}
			continue
		}
		created++
		p.nominate(plan.Pods, claims[i].Name, fmt.Sprintf("Pod should schedule on: nodeclaim/%s", claims[i].Name))
	}
	for _, placement := range results.Existing {
		target := placement.Node.Name
		p.nominate(placement.Pods, target, fmt.Sprintf("Pod should schedule on: node/%s", target))
	}
	if !fullOnly {
		unschedulable := make(map[types.UID]bool, len(results.Unschedulable))
		for _, u := range results.Unschedulable {
			unschedulable[u.Pod.UID] = true
			p.recorder.Eventf(u.Pod, corev1.EventTypeWarning, "FailedScheduling", "Failed to schedule pod, %s", u.Reason)
		}
		p.mu.Lock()
		p.unschedulable = unschedulable
		p.mu.Unlock()
	}
	logger.Info("solved", "fullNodesOnly", fullOnly, "pods", len(state.pending), "nodeclaims", created, "existing", len(results.Existing),
		"unschedulable", len(results.Unschedulable), "pricePerHour", fmt.Sprintf("%.4f", results.PricePerHour()), "solveDuration", solveDuration.String(), "totalDuration", p.clock.Since(start).String())
	return true, nil
}

func (p *Provisioner) nominate(pods []*corev1.Pod, target, message string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.clock.Now()
	for _, pod := range pods {
		p.nominations[pod.UID] = nomination{claim: target, at: now}
		p.recorder.Event(pod, corev1.EventTypeNormal, "Nominated", message)
	}
}

type snapshot struct {
	pending       []*corev1.Pod
	nominated     int
	nodes         []*scheduling.ExistingNode
	pools         []*v1.NodePool
	poolByName    map[string]*v1.NodePool
	instanceTypes map[string][]*scheduling.InstanceType
	daemonSetPods []*corev1.Pod
}

// snapshot reads the cluster: pending pods, nodes with their pods, in-flight
// NodeClaims (with the pods already nominated to them, so a launch in progress is
// not planned twice), ready NodePools and their instance types, and daemonsets. It
// lists without copying the cache, since it runs every few hundred milliseconds in a
// burst and copies of every pod were most of the controller's memory: nothing here
// or in the engine writes to what it reads.
func (p *Provisioner) snapshot(ctx context.Context) (*snapshot, error) {
	var pods corev1.PodList
	if err := p.kube.List(ctx, &pods, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("listing pods, %w", err)
	}
	var nodes corev1.NodeList
	if err := p.kube.List(ctx, &nodes, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("listing nodes, %w", err)
	}
	var claims v1.NodeClaimList
	if err := p.kube.List(ctx, &claims, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("listing nodeclaims, %w", err)
	}
	var pools v1.NodePoolList
	if err := p.kube.List(ctx, &pools, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("listing nodepools, %w", err)
	}
	s := &snapshot{poolByName: map[string]*v1.NodePool{}, instanceTypes: map[string][]*scheduling.InstanceType{}}
	for i := range pools.Items {
		np := &pools.Items[i]
		// A pool whose node class is missing or invalid would only launch failures.
		if np.DeletionTimestamp != nil || meta.IsStatusConditionFalse(np.Status.Conditions, v1.ConditionTypeReady) {
			continue
		}
		types, err := p.cloud.GetInstanceTypes(ctx, np)
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
	for i := range pods.Items {
		pod := &pods.Items[i]
		switch {
		case pod.Spec.NodeName != "" && pod.Status.Phase != corev1.PodSucceeded && pod.Status.Phase != corev1.PodFailed:
			bound[pod.Spec.NodeName] = append(bound[pod.Spec.NodeName], pod)
		case IsProvisionable(pod):
			provisionable = append(provisionable, pod)
		}
	}
	nodeByProviderID := map[string]*corev1.Node{}
	for i := range nodes.Items {
		n := &nodes.Items[i]
		nodeByProviderID[n.Spec.ProviderID] = n
	}
	// Nominations hold while their target exists and is not yet ready for the pod
	// (or became ready only recently: kube-scheduler needs a moment to bind).
	live := map[string]time.Time{} // target -> when it became ready (zero: not yet)
	claimOfNode := map[string]string{}
	launchedAllocatable := map[string]corev1.ResourceList{}
	startupTaints := map[string][]corev1.Taint{}
	for i := range claims.Items {
		nc := &claims.Items[i]
		if nc.DeletionTimestamp != nil {
			continue
		}
		live[nc.Name] = initializedAt(nc)
		if n, ok := nodeByProviderID[nc.Status.ProviderID]; ok && nc.Status.ProviderID != "" {
			claimOfNode[n.Name] = nc.Name
			launchedAllocatable[n.Name] = nc.Status.Allocatable
			if initializedAt(nc).IsZero() {
				startupTaints[n.Name] = nc.Spec.StartupTaints
			}
		}
	}
	for i := range nodes.Items {
		if _, ok := claimOfNode[nodes.Items[i].Name]; !ok {
			live[nodes.Items[i].Name] = nodes.Items[i].CreationTimestamp.Time
		}
	}
	nominated := map[string][]*corev1.Pod{}
	p.mu.Lock()
	now := p.clock.Now()
	for uid, nom := range p.nominations {
		ready, ok := live[nom.claim]
		if !ok || (!ready.IsZero() && now.Sub(maxTime(ready, nom.at)) > nominationTTL) {
			delete(p.nominations, uid)
		}
	}
	for _, pod := range provisionable {
		if nom, ok := p.nominations[pod.UID]; ok {
			nominated[nom.claim] = append(nominated[nom.claim], pod)
			s.nominated++
			continue
		}
		s.pending = append(s.pending, pod)
	}
	p.mu.Unlock()

	for i := range nodes.Items {
		n := &nodes.Items[i]
		if n.DeletionTimestamp != nil || n.Spec.Unschedulable || hasTaint(n, v1.DisruptedNoScheduleTaint.Key) {
			continue
		}
		allocatable := n.Status.Allocatable
		if allocatable.Cpu().IsZero() && len(launchedAllocatable[n.Name]) > 0 {
			// A node that has registered but not yet reported its resources has what
			// its instance was launched with; reading it as empty would void every
			// nomination to it and launch again.
			allocatable = launchedAllocatable[n.Name]
		}
		en := &scheduling.ExistingNode{
			Name: n.Name, Labels: n.Labels, Taints: withoutStartupTaints(n.Spec.Taints, startupTaints[n.Name]),
			Capacity: scheduling.FromResourceList(n.Status.Capacity), Allocatable: scheduling.FromResourceList(allocatable),
			Pods: bound[n.Name], NodePool: n.Labels[v1.LabelNodePool],
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
		p.forget(void)
		s.nodes = append(s.nodes, en)
	}
	for i := range claims.Items {
		nc := &claims.Items[i]
		if nc.DeletionTimestamp != nil {
			continue
		}
		if _, registered := nodeByProviderID[nc.Status.ProviderID]; registered && nc.Status.ProviderID != "" {
			continue
		}
		s.nodes = append(s.nodes, inFlight(nc, nominated[nc.Name]))
	}
	daemonSets, err := p.daemonSetPods(ctx)
	if err != nil {
		return nil, err
	}
	s.daemonSetPods = daemonSets
	return s, nil
}

// filledClaims keeps the planned claims that no pending pod would fit into any more.
func filledClaims(plans []*scheduling.NodeClaimPlan, pending []*corev1.Pod) []*scheduling.NodeClaimPlan {
	if len(pending) == 0 {
		return nil
	}
	smallest := scheduling.PodRequests(pending[0])
	for _, pod := range pending[1:] {
		r := scheduling.PodRequests(pod)
		smallest.MilliCPU = min(smallest.MilliCPU, r.MilliCPU)
		smallest.Memory = min(smallest.Memory, r.Memory)
	}
	smallest.Extended = nil
	var out []*scheduling.NodeClaimPlan
	for _, plan := range plans {
		if !smallest.Add(plan.Requests).Fits(plan.InstanceType.Allocatable) {
			out = append(out, plan)
		}
	}
	return out
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

func (p *Provisioner) forget(pods []*corev1.Pod) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, pod := range pods {
		delete(p.nominations, pod.UID)
	}
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
// taint, node conditions' taints, and the NodePool's startup taints until the node
// initializes) so capacity being born is still usable: pods need not tolerate them.
func withoutStartupTaints(taints, startup []corev1.Taint) []corev1.Taint {
	out := make([]corev1.Taint, 0, len(taints))
	for _, t := range taints {
		if t.Key == v1.UnregisteredNoExecuteTaint.Key || strings.HasPrefix(t.Key, "node.kubernetes.io/") || strings.HasPrefix(t.Key, "node.cloudprovider.kubernetes.io/") {
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
	return &scheduling.ExistingNode{
		Name: nc.Name, Labels: labels, Taints: nc.Spec.Taints, Capacity: capacity, Allocatable: allocatable,
		Pods: pods, NodePool: nc.Labels[v1.LabelNodePool],
	}
}

func (p *Provisioner) daemonSetPods(ctx context.Context) ([]*corev1.Pod, error) {
	var list appsv1.DaemonSetList
	if err := p.kube.List(ctx, &list); err != nil {
		return nil, fmt.Errorf("listing daemonsets, %w", err)
	}
	out := make([]*corev1.Pod, 0, len(list.Items))
	for i := range list.Items {
		ds := &list.Items[i]
		out = append(out, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: ds.Name, Namespace: ds.Namespace, Labels: ds.Spec.Template.Labels}, Spec: ds.Spec.Template.Spec})
	}
	return out, nil
}

// create writes one planned NodeClaim.
func (p *Provisioner) create(ctx context.Context, np *v1.NodePool, plan *scheduling.NodeClaimPlan, reason string) (*v1.NodeClaim, error) {
	if np == nil {
		return nil, fmt.Errorf("nodepool %s disappeared", plan.NodePool)
	}
	reqs := plan.Requirements.ToNodeSelectorRequirements()
	for i := range reqs {
		if reqs[i].Key == v1.LabelInstanceType && len(reqs[i].Values) > maxInstanceTypes {
			names := make([]string, 0, maxInstanceTypes)
			for _, it := range plan.InstanceTypeOptions[:maxInstanceTypes] {
				names = append(names, it.Name)
			}
			sort.Strings(names)
			reqs[i].Values = names
		}
	}
	// The pool comes from the cache uncopied; the create's response is decoded into
	// the new claim, so it must not share the pool's slices and pointers.
	tmpl := np.Spec.Template.DeepCopy()
	labels := map[string]string{v1.LabelNodePool: np.Name}
	for k, v := range tmpl.Labels {
		labels[k] = v
	}
	annotations := map[string]string{v1.NodePoolHashAnnotationKey: np.Hash(), v1.NodePoolHashVersionAnnotationKey: v1.NodePoolHashVersion}
	for k, v := range tmpl.Annotations {
		annotations[k] = v
	}
	nc := &v1.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName: np.Name + "-",
			Labels:       labels,
			Annotations:  annotations,
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: v1.SchemeGroupVersion.String(), Kind: "NodePool", Name: np.Name, UID: np.UID,
				BlockOwnerDeletion: ptrTo(true),
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
	if err := p.kube.Create(ctx, nc); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("creating nodeclaim, the NodeClaim CRD is not installed: %w", err)
		}
		return nil, fmt.Errorf("creating nodeclaim, %w", err)
	}
	metrics.NodeClaimsCreated.WithLabelValues(reason, np.Name).Inc()
	return nc, nil
}

func ptrTo[T any](v T) *T { return &v }

// Snapshot is the cluster as the engine sees it, for other controllers that plan
// with it (disruption): pending pods, schedulable nodes and in-flight claims with
// their pods, ready pools with their instance types, and daemonset pods.
type Snapshot struct {
	Pending       []*corev1.Pod
	Nodes         []*scheduling.ExistingNode
	Pools         []*v1.NodePool
	InstanceTypes map[string][]*scheduling.InstanceType
	DaemonSetPods []*corev1.Pod
}

// Snapshot reads the cluster. Objects in it come from the cache uncopied: read only.
func (p *Provisioner) Snapshot(ctx context.Context) (*Snapshot, error) {
	s, err := p.snapshot(ctx)
	if err != nil {
		return nil, err
	}
	return &Snapshot{Pending: s.pending, Nodes: s.nodes, Pools: s.pools, InstanceTypes: s.instanceTypes, DaemonSetPods: s.daemonSetPods}, nil
}

// Launch creates the NodeClaim a plan describes, as a replacement for disrupted
// capacity; reason ("drifted", "underutilized", ...) labels the created metric.
func (p *Provisioner) Launch(ctx context.Context, np *v1.NodePool, plan *scheduling.NodeClaimPlan, reason string) (*v1.NodeClaim, error) {
	return p.create(ctx, np, plan, reason)
}

// PlanWithout plans pods onto the cluster as if the named nodes (or claims) were
// gone: how disruption and interruption find what replaces capacity.
func (s *Snapshot) PlanWithout(gone sets.Set[string], pods []*corev1.Pod) *scheduling.Results {
	nodes := make([]*scheduling.ExistingNode, 0, len(s.Nodes))
	for _, n := range s.Nodes {
		if !gone.Has(n.Name) {
			nodes = append(nodes, n)
		}
	}
	return scheduling.Solve(scheduling.Input{Pods: pods, Nodes: nodes, NodePools: s.Pools, InstanceTypes: s.InstanceTypes, DaemonSetPods: s.DaemonSetPods})
}

// Pool returns the ready pool of that name, or nil.
func (s *Snapshot) Pool(name string) *v1.NodePool {
	for _, np := range s.Pools {
		if np.Name == name {
			return np
		}
	}
	return nil
}
