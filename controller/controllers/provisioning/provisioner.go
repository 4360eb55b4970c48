// Package provisioning turns pending pods into NodeClaims: it batches pods that
// kube-scheduler cannot place, runs the scheduling engine on the cluster's state,
// creates the NodeClaims it plans, and nominates the pods to them.
package provisioning

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	autoscalingv1 "github.com/dovetail-sh/dovetail/controller/apis/autoscaling/v1"
	"github.com/dovetail-sh/dovetail/controller/apis/autoscaling/v1beta1"
	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/controller/buffer"
	"github.com/dovetail-sh/dovetail/controller/cloudprovider"
	"github.com/dovetail-sh/dovetail/controller/commitment"
	"github.com/dovetail-sh/dovetail/controller/engineinput"
	"github.com/dovetail-sh/dovetail/controller/metrics"
	"github.com/dovetail-sh/dovetail/controller/provreq"
	"github.com/dovetail-sh/dovetail/controller/scheduling"
	"github.com/dovetail-sh/dovetail/controller/state"
)

// recheckInterval is how soon the provisioner looks again while nominated pods wait.
const recheckInterval = 2 * time.Second

// Provisioner is the provisioning loop.
type Provisioner struct {
	kube     client.Client
	cloud    cloudprovider.CloudProvider
	clock    clock.Clock
	recorder record.EventRecorder
	batcher  *Batcher
	// costs price what a node costs beyond its instance, for every plan made here.
	costs scheduling.NodeCosts

	mu sync.Mutex
	// mixMu makes the launches of pools with a capacity mix one at a time, so
	// each counts the one before.
	mixMu       sync.Mutex
	nominations map[types.UID]engineinput.Nomination
	// unschedulable holds the pods the last solve could not place. Their status keeps
	// changing as kube-scheduler retries them; only new pods, or a change to the
	// cluster, should open a new batch.
	unschedulable map[types.UID]bool
	// seen holds the pods that triggered the batch being gathered: their later
	// status updates must not keep extending it.
	seen map[types.UID]bool
	// oversized are the nodes already flagged for reporting more than their instance.
	oversized map[types.UID]bool
	// cluster is the state every loop reads; it also counts the claims created here
	// before the cache lists them.
	cluster *state.Cluster
	// buffers are the CapacityBuffers' virtual pods (gate CapacityBuffer), planned
	// with the pending pods and never bound; nil without the gate.
	buffers *buffer.Cache
	// buffersResolved is set once every buffer there was at start has been
	// resolved: the wait for them is start-up work, not a list on every solve.
	buffersResolved atomic.Bool
	// requestsResolved is the same for the ProvisioningRequests that book capacity.
	requestsResolved atomic.Bool
	// bookings are the capacity held for ProvisioningRequests: their virtual pods
	// sit on the nodes they booked in every snapshot (nil: none).
	bookings *provreq.Cache
	// commitments price every plan (nil: list prices).
	commitments *commitment.Store
	// maxPodsPerSolve bounds a solve; the rest of a backlog waits for the next
	// round (scheduling.MaxPodsPerSolve unless a test sets it).
	maxPodsPerSolve int
}

// WithBuffers plans the buffers' virtual pods with every full solve.
func (p *Provisioner) WithBuffers(c *buffer.Cache) { p.buffers = c }

// WithBookings holds the ProvisioningRequests' bookings in every snapshot.
func (p *Provisioner) WithBookings(c *provreq.Cache) { p.bookings = c }

// WithCommitments prices every plan with the accepted Commitments.
func (p *Provisioner) WithCommitments(s *commitment.Store) { p.commitments = s }

// Buffers are the virtual pods the provisioner plans with, or nil.
func (p *Provisioner) Buffers() *buffer.Cache { return p.buffers }

// NewProvisioner wires a provisioner.
func NewProvisioner(kube client.Client, cluster *state.Cluster, cloud cloudprovider.CloudProvider, clk clock.Clock, recorder record.EventRecorder, batcher *Batcher, costs scheduling.NodeCosts) *Provisioner {
	return &Provisioner{kube: kube, cluster: cluster, cloud: cloud, clock: clk, recorder: recorder, batcher: batcher, costs: costs,
		nominations: map[types.UID]engineinput.Nomination{}, unschedulable: map[types.UID]bool{}, seen: map[types.UID]bool{}, oversized: map[types.UID]bool{},
		maxPodsPerSolve: scheduling.MaxPodsPerSolve}
}

// WithMaxPodsPerSolve bounds each solve to n pods, the oldest pending first.
func (p *Provisioner) WithMaxPodsPerSolve(n int) { p.maxPodsPerSolve = n }

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

// Cluster is the state the provisioner reads, for the loops that launch through it.
func (p *Provisioner) Cluster() *state.Cluster { return p.cluster }

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
	metrics.PodSeen(pod.UID, p.clock.Now())
	if !known {
		p.batcher.Trigger()
	}
	return !known
}

// Schedule solves once over the current cluster state. It reports whether pods are
// still waiting on nominations, which calls for another look soon.
func (p *Provisioner) Schedule(ctx context.Context) (bool, error) { return p.schedule(ctx, false) }

// schedule solves; with fullOnly it launches only the NodeClaims the plan fills (no
// pending pod would fit in what is left), nominates only their pods and existing
// placements, and leaves everything else to the batch being gathered.
func (p *Provisioner) schedule(ctx context.Context, fullOnly bool) (bool, error) {
	logger := log.FromContext(ctx)
	if p.buffers != nil && !fullOnly {
		// At start the first solve may come before the buffers are resolved: it
		// would plan the pending pods without their room and launch for it later,
		// unlike the plan a steady controller (or `dovetail simulate`) makes.
		unresolved, err := p.UnresolvedBuffers(ctx)
		if err != nil {
			return false, err
		}
		if len(unresolved) > 0 {
			logger.V(1).Info("waiting for capacity buffers to be resolved", "buffers", unresolved)
			return true, nil
		}
	}
	if !fullOnly {
		// Nor before the bookings there were at start are held again: it would
		// plan pods into a gang's room.
		unresolved, err := p.UnresolvedRequests(ctx)
		if err != nil {
			return false, err
		}
		if len(unresolved) > 0 {
			logger.V(1).Info("waiting for provisioning requests to be looked at", "provisioningRequests", unresolved)
			return true, nil
		}
	}
	state, err := p.snapshot(ctx)
	if err != nil {
		return false, err
	}
	for _, pod := range state.Pending {
		metrics.PodSeen(pod.UID, p.clock.Now())
	}
	if !fullOnly {
		metrics.SchedulerIgnoredPods.Set(float64(len(state.Refused)))
		for _, u := range state.Refused {
			metrics.PodSeen(u.Pod.UID, p.clock.Now())
			metrics.PodDecided(u.Pod.UID, p.clock.Now())
			p.recorder.Eventf(u.Pod, corev1.EventTypeWarning, "FailedScheduling", "Failed to schedule pod, %s", u.Reason)
		}
		p.mu.Lock()
		p.seen = map[types.UID]bool{}
		p.mu.Unlock()
	}
	p.mu.Lock()
	tried := p.unschedulable
	p.mu.Unlock()
	pending, deferred := scheduling.OldestFirst(state.Pending, p.maxPodsPerSolve, func(pod *corev1.Pod) bool { return tried[pod.UID] })
	var virtual int
	if p.buffers != nil && !fullOnly {
		// Planned last among equals and never bound: the room they take is spare
		// capacity a real pod may have at any time.
		v := p.buffers.Pods()
		virtual = len(v)
		pending = append(pending[:len(pending):len(pending)], v...)
	}
	if len(pending) == 0 {
		logger.V(1).Info("nothing to provision", "nominatedPods", state.Nominated)
		return state.Nominated > 0, nil
	}
	start := p.clock.Now()
	simulation := metrics.StartSimulation(p.clock, "provisioner", len(pending))
	// The engine's input is the snapshot's, as `dovetail simulate` plans it.
	results := state.Engine(p.costs, p.commitments.Ledger()).PlanOn(state.Nodes, nil, pending, true)
	solveDuration := simulation.Done()
	if p.buffers != nil && !fullOnly {
		p.buffers.Record(results)
		results = withoutVirtual(results)
	}
	if fullOnly {
		results.NodeClaims = filledClaims(results.NodeClaims, state.Pending)
		if len(results.NodeClaims) == 0 {
			return false, nil
		}
		results.Unschedulable = nil
	}
	recordDecisions(results, p.clock.Now(), !fullOnly)
	for pool, spend := range results.SpendLimited {
		if np := state.PoolByName[pool]; np != nil {
			limit, _ := scheduling.SpendLimit(np)
			p.recorder.Eventf(np, corev1.EventTypeWarning, "SpendLimitReached", "NodePool %s spends %s of its %s limit of %s: pods that need more capacity stay pending",
				pool, scheduling.FormatDollars(spend), scheduling.ResourceSpendPerHour, scheduling.FormatDollars(limit))
		}
	}
	// Creates run in parallel: each one is a round trip through the CRD's validation,
	// and a burst can plan dozens of nodes.
	claims := make([]*v1.NodeClaim, len(results.NodeClaims))
	errs := make([]error, len(results.NodeClaims))
	workqueue.ParallelizeUntil(ctx, 16, len(results.NodeClaims), func(i int) {
		plan := results.NodeClaims[i]
		claims[i], errs[i] = p.create(ctx, state.PoolByName[plan.NodePool], plan, "provisioning", launchOptions{})
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
			// While part of a backlog waits, a pod may be unplaceable only for want
			// of a peer (pod affinity) left to the next round: it is told once the
			// backlog fits one solve.
			if deferred == 0 {
				p.recorder.Eventf(u.Pod, corev1.EventTypeWarning, "FailedScheduling", "Failed to schedule pod, %s", u.Reason)
			}
		}
		// Pods left out of this round keep their mark from an earlier one, so
		// that rounds keep turning to the pods not tried yet.
		if deferred > 0 {
			inRound := make(map[types.UID]bool, len(pending))
			for _, pod := range pending {
				inRound[pod.UID] = true
			}
			for uid := range tried {
				if !inRound[uid] {
					unschedulable[uid] = true
				}
			}
		}
		p.mu.Lock()
		p.unschedulable = unschedulable
		p.mu.Unlock()
	}
	if len(state.Pending) == 0 && created == 0 {
		// Only buffers, all in place: nothing to log each time the buffers ask.
		logger.V(1).Info("capacity buffers in place", "virtualPods", virtual)
		return state.Nominated > 0, nil
	}
	logger.Info("solved", "fullNodesOnly", fullOnly, "pods", len(state.Pending)-deferred, "deferredPods", deferred, "virtualPods", virtual, "nodeclaims", created, "existing", len(results.Existing),
		"unschedulable", len(results.Unschedulable), "pricePerHour", fmt.Sprintf("%.4f", results.PricePerHour()), "solveDuration", solveDuration.String(), "totalDuration", p.clock.Since(start).String())
	return len(state.Pending) > 0 || state.Nominated > 0, nil
}

// withoutVirtual is the plan as far as real pods go: its claims launch for the
// virtual pods too, but no virtual pod is nominated, reported or counted.
func withoutVirtual(r *scheduling.Results) *scheduling.Results {
	out := &scheduling.Results{}
	for _, nc := range r.NodeClaims {
		c := *nc
		c.Pods = slices.DeleteFunc(slices.Clone(nc.Pods), buffer.IsVirtual)
		out.NodeClaims = append(out.NodeClaims, &c)
	}
	for _, e := range r.Existing {
		pods := slices.DeleteFunc(slices.Clone(e.Pods), buffer.IsVirtual)
		if len(pods) > 0 {
			out.Existing = append(out.Existing, &scheduling.ExistingPlacement{Node: e.Node, Pods: pods})
		}
	}
	for _, u := range r.Unschedulable {
		if !buffer.IsVirtual(u.Pod) {
			out.Unschedulable = append(out.Unschedulable, u)
		}
	}
	return out
}

// recordDecisions records the solve's decisions in the scheduler and pod metrics;
// complete is false for a solve that decided only about the pods of full nodes.
func recordDecisions(results *scheduling.Results, now time.Time, complete bool) {
	zones := map[string]int{}
	for _, plan := range results.NodeClaims {
		zones[plan.Offering.Zone] += len(plan.Pods)
		for _, pod := range plan.Pods {
			metrics.PodDecided(pod.UID, now)
		}
	}
	for _, placement := range results.Existing {
		zones[placement.Node.Labels[v1.LabelTopologyZone]] += len(placement.Pods)
		for _, pod := range placement.Pods {
			metrics.PodDecided(pod.UID, now)
		}
	}
	if !complete {
		return
	}
	for _, u := range results.Unschedulable {
		zones[""]++
		metrics.PodDecided(u.Pod.UID, now)
	}
	metrics.PodsUnschedulable.WithLabelValues("provisioner").Set(float64(len(results.Unschedulable)))
	metrics.PendingPodsByEffectiveZone.Reset()
	for zone, n := range zones {
		metrics.PendingPodsByEffectiveZone.WithLabelValues("provisioner", zone).Set(float64(n))
	}
}

func (p *Provisioner) nominate(pods []*corev1.Pod, target, message string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.clock.Now()
	for _, pod := range pods {
		p.nominations[pod.UID] = engineinput.Nomination{Target: target, At: now}
		p.recorder.Event(pod, corev1.EventTypeNormal, "Nominated", message)
	}
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
		// A node whose type was chosen knowing how few pods were gathered is full
		// only because of that: the pods still arriving would pick a larger type
		// (a burst's first 30 pods fill two 16-vCPU nodes that one 64-vCPU node of
		// the whole burst would replace), so it waits for the batch's close.
		if plan.SizedByDemand {
			continue
		}
		if !smallest.Add(plan.Requests).Fits(plan.InstanceType.Allocatable) {
			out = append(out, plan)
		}
	}
	return out
}

// UnresolvedBuffers are the CapacityBuffers in the cluster the buffer cache has
// not resolved yet, until all have been once (none without the CapacityBuffer
// gate); a buffer created later is planned once it is resolved, as any change.
func (p *Provisioner) UnresolvedBuffers(ctx context.Context) ([]string, error) {
	if p.buffers == nil || p.buffersResolved.Load() {
		return nil, nil
	}
	var list v1beta1.CapacityBufferList
	if err := p.kube.List(ctx, &list); err != nil {
		return nil, fmt.Errorf("listing capacity buffers, %w", err)
	}
	keys := make([]string, 0, len(list.Items))
	for _, cb := range list.Items {
		keys = append(keys, buffer.Key(cb.Namespace, cb.Name))
	}
	unresolved := p.buffers.Unresolved(keys)
	if len(unresolved) == 0 {
		p.buffersResolved.Store(true)
	}
	return unresolved, nil
}

// UnresolvedRequests are the ProvisioningRequests that book capacity (provisioned,
// or launching a gang) which the provisioningrequest controller has not looked at
// since the process started, until all have been once: until then their bookings
// are not held. None without the CRD.
func (p *Provisioner) UnresolvedRequests(ctx context.Context) ([]string, error) {
	if p.bookings == nil || p.requestsResolved.Load() {
		return nil, nil
	}
	var list autoscalingv1.ProvisioningRequestList
	if err := p.kube.List(ctx, &list); err != nil {
		if meta.IsNoMatchError(err) {
			p.requestsResolved.Store(true)
			return nil, nil
		}
		return nil, fmt.Errorf("listing provisioning requests, %w", err)
	}
	var keys []string
	for i := range list.Items {
		if provreq.HoldsCapacity(&list.Items[i]) {
			keys = append(keys, provreq.Key(list.Items[i].Namespace, list.Items[i].Name))
		}
	}
	unresolved := p.bookings.Unresolved(keys)
	if len(unresolved) == 0 {
		p.requestsResolved.Store(true)
	}
	return unresolved, nil
}
