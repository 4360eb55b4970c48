// Package disruption removes and replaces capacity the cluster no longer needs in the
// form it has: drifted nodes are replaced, empty ones removed, and underutilized ones
// consolidated into fewer or cheaper nodes. Every decision is made by the scheduling
// engine planning the candidates' pods onto the rest of the cluster, is limited by the
// NodePools' budgets and by what the pods allow (PodDisruptionBudgets,
// do-not-disrupt), and launches replacements before anything
// drains. What to remove and replace is decided by controller/consolidation, which
// is pure; this package reads the cluster for it and carries its batches out.
package disruption

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/controller/cloudprovider"
	"github.com/dovetail-sh/dovetail/controller/consolidation"
	"github.com/dovetail-sh/dovetail/controller/controllers/periodic"
	"github.com/dovetail-sh/dovetail/controller/controllers/provisioning"
	"github.com/dovetail-sh/dovetail/controller/metrics"
	"github.com/dovetail-sh/dovetail/controller/repair"
	"github.com/dovetail-sh/dovetail/controller/scheduling"
	"github.com/dovetail-sh/dovetail/controller/state"
)

// Options tune the controller.
type Options struct {
	// Period is how often the cluster is looked at.
	Period time.Duration
	// ValidationDelay is how long a consolidation decision must hold before it is
	// carried out: pods that were about to land would otherwise be moved at once.
	ValidationDelay time.Duration
	// ReplacementTimeout gives up on replacements that never initialize, and leaves
	// the candidates as they were.
	ReplacementTimeout time.Duration
	// SpotToSpotConsolidation allows replacing spot nodes with cheaper spot nodes.
	SpotToSpotConsolidation bool
	// DriftOnMetadata drifts nodes whose pool's template labels or annotations
	// changed, as Karpenter does; off, they are updated in place.
	DriftOnMetadata bool
	// Repair, when set, repairs unhealthy nodes as Karpenter v1.15's disruption
	// method (see repair.go); nil leaves repair to the standalone controller, or off.
	Repair *repair.Matcher
	// TerminateFirstDrift and TerminateFirstRepair let a drifted or unhealthy node
	// that cannot be replaced while it runs go before its replacement launches (see
	// terminatefirst.go).
	TerminateFirstDrift, TerminateFirstRepair bool
}

// DefaultOptions are Karpenter's timings.
func DefaultOptions() Options {
	return Options{Period: 10 * time.Second, ValidationDelay: 15 * time.Second, ReplacementTimeout: 10 * time.Minute}
}

// typeDrift is drift's consolidation type in metrics and records: none.
const typeDrift = ""

// Controller is the disruption controller.
type Controller struct {
	kube        client.Client
	cloud       cloudprovider.CloudProvider
	provisioner *provisioning.Provisioner
	clock       clock.Clock
	recorder    record.EventRecorder
	opts        Options

	podSets  map[string]string // claim → fingerprint of its node's pods
	proposed *proposal
	inflight []*command
	blocked  map[string]string // node → last blocking reason reported
	// unconsolidatable is, per node, the last Unconsolidatable reason reported on it.
	unconsolidatable map[string]string
	// blockedRepairs is, per node, the last reason its repair waits reported.
	blockedRepairs map[string]string
	// reboots are the reboots repair committed, for replacing a node whose fault
	// keeps coming back.
	reboots *repair.RebootHistory
}

// proposal is what the last decision would have started: a candidate is acted on
// only once every decision for the validation delay has held it.
type proposal struct {
	// since is when each candidate was first proposed, in decisions unbroken since.
	since map[string]time.Time
	// types are the candidates' consolidation types, for failed validations.
	types map[string]string
}

// NewController wires the controller.
func NewController(kube client.Client, cloud cloudprovider.CloudProvider, provisioner *provisioning.Provisioner, clk clock.Clock, recorder record.EventRecorder, opts Options) *Controller {
	return &Controller{kube: kube, cloud: cloud, provisioner: provisioner, clock: clk, recorder: recorder, opts: opts,
		podSets: map[string]string{}, blocked: map[string]string{}, unconsolidatable: map[string]string{}, blockedRepairs: map[string]string{}, reboots: repair.NewRebootHistory()}
}

func (c *Controller) Name() string { return "disruption" }

// Register runs a pass every Period on the elected leader.
func (c *Controller) Register(_ context.Context, mgr manager.Manager) error {
	return mgr.Add(periodic.Runnable(c.clock, c.opts.Period, c.Name(), c.Reconcile))
}

// candidate is a node disruption may act on.
type candidate = consolidation.Candidate

// command is a decision: candidates to remove and the claims that replace them.
type command struct {
	// id groups the candidates' disruption records (state.Disruption).
	id                string
	reason            v1.DisruptionReason
	consolidationType string
	candidates        []*candidate
	replacements      []*scheduling.NodeClaimPlan
	// launched names the claims the command waits for before draining: the
	// replacements it launched, and claims still starting that its pods are
	// planned onto (launched by an earlier batch of the same plan).
	launched  []string
	startedAt time.Time
	// explanation says which plan the command belongs to and what it saves, for
	// the events on its nodes.
	explanation string
	// scores are the Balanced scores of the moves the command's candidates are in.
	scores []consolidation.Score
	// drainBound bounds a repair's drain (nil: the claim's own
	// terminationGracePeriod); condition is the node condition repaired.
	drainBound *time.Duration
	condition  string
	// terminateFirst says why the command deletes its candidates before anything
	// replaces them, as Karpenter's terminate_first_reason does ("": it does not).
	terminateFirst string
	// reboot: repair reboots the candidate in place (see reboot.go).
	reboot bool
}

func (cmd *command) String() string {
	return consolidation.Describe(cmd.reason, cmd.candidates, cmd.replacements)
}

// pass is one pass's view of the cluster.
type pass struct {
	view *state.View
	// inflight are the claims the commands carried on here are disrupting.
	inflight   sets.Set[string]
	snap       *scheduling.Snapshot
	claims     []v1.NodeClaim
	poolByName map[string]*v1.NodePool
	cluster    *consolidation.Cluster
	allowed    map[string]map[v1.DisruptionReason]int
}

// Reconcile makes one pass: finish what is in flight, replace drifted nodes, and
// move the cluster toward the cheapest fleet for its pods in budget-sized batches.
// Batches run side by side: each one's nodes are tainted and counted against the
// budgets, and its pods are planned before anything else on later passes.
func (c *Controller) Reconcile(ctx context.Context) error {
	s, err := c.observe(ctx)
	if err != nil {
		return err
	}
	if err := c.progress(ctx, s); err != nil {
		return err
	}
	// Repair goes first, and does not wait for pending pods: an unhealthy node
	// helps none of them.
	if cmd := c.repairCommand(ctx, s); cmd != nil {
		return c.execute(ctx, s, cmd)
	}
	if cmd := c.driftCommand(ctx, s); cmd != nil {
		return c.execute(ctx, s, cmd)
	}
	// Pending pods the provisioner can place are its to place first (they are
	// nominated within a batch, and then count as capacity in use); capacity they may
	// need is not taken away underneath them. Pods nothing can place never block.
	if n := s.cluster.PlaceablePending(); n > 0 {
		c.proposed = nil
		log.FromContext(ctx).V(1).Info("waiting for pending pods to be placed before consolidating", "pods", n)
		return nil
	}
	// Until every buffer is resolved, a decision would not keep its room; nor
	// until the bookings of ProvisioningRequests are held again after a start.
	if unresolved, err := c.provisioner.UnresolvedBuffers(ctx); err != nil || len(unresolved) > 0 {
		log.FromContext(ctx).V(1).Info("waiting for capacity buffers to be resolved before consolidating", "buffers", unresolved)
		return err
	}
	if unresolved, err := c.provisioner.UnresolvedRequests(ctx); err != nil || len(unresolved) > 0 {
		log.FromContext(ctx).V(1).Info("waiting for provisioning requests to be looked at before consolidating", "provisioningRequests", unresolved)
		return err
	}
	now := c.clock.Now()
	plan := consolidation.Decide(s.cluster, s.allowed, consolidation.Options{Now: now, SpotToSpot: c.opts.SpotToSpotConsolidation})
	// One decision weighs every candidate at once, the work Karpenter's
	// multi-node consolidation does; dashboards read it under that type.
	metrics.DecisionEvaluationDuration.WithLabelValues("underutilized", "multi").Observe(c.clock.Since(now).Seconds())
	c.reportPlan(ctx, s, plan)
	if len(plan.Batches) == 0 {
		// Whatever was proposed no longer holds.
		if c.proposed != nil {
			c.proposed.failed(sets.New[string]())
		}
		c.proposed = nil
		return nil
	}
	// Each candidate is validated by its own time in the decision: one that has
	// been in every decision for the validation delay has held, whatever else
	// came and went. A fleet-wide decision on hundreds of nodes changes somewhere
	// at nearly every pass, and one clock for the whole decision would never run
	// out.
	prev := c.proposed
	c.proposed = c.propose(ctx, plan, prev, now)
	if prev != nil {
		prev.failed(c.proposed.candidates())
	}
	validated := c.proposed.validated(now.Add(-c.opts.ValidationDelay), now)
	var errs []error
	// The emptiness batch goes in this pass too (what of it has held), so a
	// replanned part puts no pod on its nodes.
	var emptying []*candidate
	for _, b := range plan.Batches {
		if b.Reason == v1.DisruptionReasonEmpty {
			emptying = b.Candidates
		}
	}
	replan := func(held []*candidate) *consolidation.Batch {
		return consolidation.Replan(s.cluster, held, emptying, consolidation.Options{Now: now, SpotToSpot: c.opts.SpotToSpotConsolidation})
	}
	for _, b := range plan.Batches {
		if b = heldPart(b, validated, replan); b == nil {
			continue
		}
		for _, cand := range b.Candidates {
			delete(c.proposed.since, cand.Claim.Name)
		}
		if err := c.execute(ctx, s, c.commandOf(plan, b)); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// failed counts the proposed candidates the current decision no longer holds as
// failed validations, as Karpenter counts them.
func (p *proposal) failed(stillHeld sets.Set[string]) {
	for name := range p.since {
		if !stillHeld.Has(name) {
			metrics.VoluntaryDisruptionFailedValidations.WithLabelValues(p.types[name]).Inc()
		}
	}
}

func (p *proposal) candidates() sets.Set[string] {
	out := sets.New[string]()
	for name := range p.since {
		out.Insert(name)
	}
	return out
}

// validated are the candidates proposed at or before the time, and in an earlier
// decision than now's: even without a validation delay, a candidate is acted on
// only once a second decision holds it.
func (p *proposal) validated(before, now time.Time) sets.Set[string] {
	out := sets.New[string]()
	for name, since := range p.since {
		if !since.After(before) && since.Before(now) {
			out.Insert(name)
		}
	}
	return out
}

// propose records the decision's candidates, each since it was first proposed in
// an unbroken run of decisions, and logs the batches with candidates new to it.
func (c *Controller) propose(ctx context.Context, plan *consolidation.Plan, prev *proposal, now time.Time) *proposal {
	p := &proposal{since: map[string]time.Time{}, types: map[string]string{}}
	for _, b := range plan.Batches {
		fresh := false
		for _, cand := range b.Candidates {
			name := cand.Claim.Name
			p.since[name], p.types[name] = now, b.Type
			if prev != nil {
				if since, ok := prev.since[name]; ok {
					p.since[name] = since
					continue
				}
			}
			fresh = true
		}
		if fresh {
			log.FromContext(ctx).Info("proposing disruption; validating before acting", "batch", b.String(), "after", c.opts.ValidationDelay.String(),
				"planRemoves", len(plan.Remove), "planLaunches", len(plan.Replacements), "planSavesPerHour", fmt.Sprintf("%.4f", plan.Savings()))
		}
	}
	return p
}

// heldPart is the part of a batch the decision of a validation delay ago already
// held, or nil. A batch that launches nothing is valid for any part of its
// candidates (their pods fit on the nodes kept), so the part proposed before may
// go. A batch whose replacements are sized for all its candidates goes whole, or
// its held part goes with replacements planned for that part alone (replan),
// when that still saves: a fleet-wide decision on hundreds of nodes gains or
// loses a candidate at nearly every pass, and the rest would wait for a decision
// that holds still for the whole delay.
func heldPart(b *consolidation.Batch, proposed sets.Set[string], replan func([]*candidate) *consolidation.Batch) *consolidation.Batch {
	var kept []*candidate
	for _, cand := range b.Candidates {
		if proposed.Has(cand.Claim.Name) {
			kept = append(kept, cand)
		}
	}
	switch {
	case len(kept) == len(b.Candidates):
		return b
	case len(kept) == 0:
		return nil
	case len(b.Replacements) > 0:
		return replan(kept)
	}
	part := *b
	part.Candidates = kept
	if part.Type == consolidation.TypeMulti && len(kept) == 1 {
		part.Type = consolidation.TypeSingle
	}
	return &part
}

// commandOf turns a batch into a command, with the plan it belongs to spelled out.
func (c *Controller) commandOf(plan *consolidation.Plan, b *consolidation.Batch) *command {
	cmd := &command{reason: b.Reason, consolidationType: b.Type, candidates: b.Candidates, replacements: b.Replacements, launched: append([]string(nil), b.Awaits...)}
	in := sets.New(b.Candidates...)
	for _, s := range plan.Scores {
		if slices.ContainsFunc(s.Candidates, in.Has) {
			cmd.scores = append(cmd.scores, s)
		}
	}
	cmd.explanation = fmt.Sprintf("the batch saves $%.4f/h (removes $%.4f/h, launches $%.4f/h); it is part of a plan that removes %d node(s) and launches %d, saving $%.4f/h",
		b.Price()-scheduling.PriceOf(b.Replacements), b.Price(), scheduling.PriceOf(b.Replacements), len(plan.Remove), len(plan.Replacements), plan.Savings())
	return cmd
}

// observe reads the cluster, records pod changes on claims, and finds candidates.
// It also puts what a restart or a leader change left half done right: disruptions
// recorded in the API and not running here are resumed, and nodes tainted for a
// disruption nothing carries on are put back in service.
func (c *Controller) observe(ctx context.Context) (*pass, error) {
	// Claims are shallow copies sharing the cache's maps and slices: each write
	// below changes a deep copy and puts it in the view's place.
	view, err := c.provisioner.Cluster().Read(ctx, state.ReadOnly)
	if err != nil {
		return nil, err
	}
	snap, err := c.provisioner.SnapshotOf(ctx, view)
	if err != nil {
		return nil, err
	}
	c.resume(ctx, view)
	c.removeStaleTaints(ctx, view)
	inflight := sets.New[string]()
	for _, cmd := range c.inflight {
		for _, cand := range cmd.candidates {
			inflight.Insert(cand.Claim.Name)
		}
	}
	now := c.clock.Now()
	s := &pass{view: view, inflight: inflight, snap: snap, claims: view.Claims, poolByName: map[string]*v1.NodePool{}}
	for _, np := range snap.Pools {
		s.poolByName[np.Name] = np
	}
	for i := range s.claims {
		nc := &s.claims[i]
		if node := view.NodeOf(nc); node != nil && nc.DeletionTimestamp == nil && !inflight.Has(nc.Name) && !state.HasTaint(node, v1.DisruptedNoScheduleTaint) {
			c.recordPodEvents(ctx, nc, view.PodsOn(node.Name), now)
		}
	}
	s.cluster = consolidation.Observe(view, snap, inflight, now)
	if b := c.provisioner.Buffers(); b != nil {
		// The buffers' room is kept as the pods of disrupted nodes' is: a removal must
		// leave a place for them (those with none anyway hold nothing).
		s.cluster.Moving = append(s.cluster.Moving, b.Pods()...)
	}
	for _, cand := range s.cluster.Candidates {
		cand.Drift = c.driftReason(ctx, cand.Claim, cand.Node, cand.Pool)
		c.writeConditions(ctx, cand, now)
	}
	// Forget claims and nodes that are gone, so the bookkeeping does not grow.
	seenClaims, seenNodes := sets.New[string](), sets.New[string]()
	for i := range s.claims {
		seenClaims.Insert(s.claims[i].Name)
	}
	for i := range view.Nodes {
		seenNodes.Insert(view.Nodes[i].Name)
	}
	for name := range c.podSets {
		if !seenClaims.Has(name) {
			delete(c.podSets, name)
		}
	}
	for name := range c.blocked {
		if !seenNodes.Has(name) {
			delete(c.blocked, name)
		}
	}
	for name := range c.unconsolidatable {
		if !seenNodes.Has(name) {
			delete(c.unconsolidatable, name)
		}
	}
	uids := sets.New[types.UID]()
	for i := range s.claims {
		uids.Insert(s.claims[i].UID)
	}
	c.reboots.Forget(uids.Has)
	for name := range c.blockedRepairs {
		if !seenNodes.Has(name) {
			delete(c.blockedRepairs, name)
		}
	}
	allowed, errs := s.cluster.Allowed(now)
	for _, err := range errs {
		log.FromContext(ctx).Error(err, "invalid disruption budget; no disruption for this pool")
	}
	s.allowed = allowed
	for name, np := range s.poolByName {
		var status []v1.AllowedDisruption
		for _, r := range consolidation.Reasons {
			n := allowed[name][r]
			status = append(status, v1.AllowedDisruption{Reason: r, Nodes: int32(n)})
			metrics.NodePoolAllowedDisruptions.WithLabelValues(name, strings.ToLower(string(r))).Set(float64(n))
			// Every node being disrupted counts against each reason's budget, and a
			// NotReady one against every reason's but Unhealthy's.
			metrics.NodePoolNodesConsumingBudgets.WithLabelValues(name, strings.ToLower(string(r))).Set(float64(s.cluster.Consuming(name, r)))
		}
		c.writeAllowed(ctx, np, status)
	}
	return s, nil
}

// writeAllowed shows the budgets' room in the pool's status when it changed.
func (c *Controller) writeAllowed(ctx context.Context, np *v1.NodePool, allowed []v1.AllowedDisruption) {
	if equality.Semantic.DeepEqual(np.Status.AllowedDisruptions, allowed) {
		return
	}
	updated := np.DeepCopy()
	patch := client.MergeFrom(updated.DeepCopy())
	updated.Status.AllowedDisruptions = allowed
	if err := c.kube.Status().Patch(ctx, updated, patch); err != nil {
		log.FromContext(ctx).V(1).Info("writing allowed disruptions to nodepool status", "nodepool", np.Name, "error", err.Error())
	}
}

// writeConditions shows on the claim what disruption sees: Drifted with the reason,
// and Consolidatable once consolidateAfter has passed.
func (c *Controller) writeConditions(ctx context.Context, cand *candidate, now time.Time) {
	nc := cand.Claim.DeepCopy()
	set := func(t string, on bool, reason, message string) {
		if !on {
			meta.RemoveStatusCondition(&nc.Status.Conditions, t)
			return
		}
		if existing := meta.FindStatusCondition(nc.Status.Conditions, t); existing != nil && existing.Status == metav1.ConditionTrue && existing.Reason == reason {
			return
		}
		meta.SetStatusCondition(&nc.Status.Conditions, metav1.Condition{Type: t, Status: metav1.ConditionTrue, Reason: reason, Message: message,
			ObservedGeneration: nc.Generation, LastTransitionTime: metav1.NewTime(now)})
	}
	set(v1.ConditionTypeDrifted, cand.Drift != "", cand.Drift, "the node no longer matches its NodePool or node class")
	set(v1.ConditionTypeConsolidatable, cand.Consolidatable(now), "Consolidatable", "consolidateAfter has passed since the last pod change")
	if equality.Semantic.DeepEqual(cand.Claim.Status.Conditions, nc.Status.Conditions) {
		return
	}
	if err := c.kube.Status().Patch(ctx, nc, client.MergeFrom(cand.Claim)); err != nil {
		log.FromContext(ctx).V(1).Info("writing disruption conditions", "nodeclaim", nc.Name, "error", err.Error())
	}
	*cand.Claim = *nc
}

// recordPodEvents keeps status.lastPodEventTime: consolidateAfter counts from the
// last time a pod came to or left the node.
func (c *Controller) recordPodEvents(ctx context.Context, nc *v1.NodeClaim, pods []*corev1.Pod, now time.Time) {
	uids := make([]string, 0, len(pods))
	for _, p := range pods {
		if p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
			uids = append(uids, string(p.UID))
		}
	}
	sort.Strings(uids)
	fingerprint := strings.Join(uids, ",")
	previous, seen := c.podSets[nc.Name]
	c.podSets[nc.Name] = fingerprint
	if !seen || previous == fingerprint {
		return
	}
	updated := nc.DeepCopy()
	updated.Status.LastPodEventTime = metav1.NewTime(now)
	if err := c.kube.Status().Patch(ctx, updated, client.MergeFrom(nc)); err != nil {
		log.FromContext(ctx).V(1).Info("recording a pod event on a nodeclaim", "nodeclaim", nc.Name, "error", err.Error())
	}
	*nc = *updated
}

// driftReason says why a node no longer matches its pool or class, or "".
func (c *Controller) driftReason(ctx context.Context, nc *v1.NodeClaim, node *corev1.Node, np *v1.NodePool) string {
	// A change applied in place is nodeclaim.metadata's to carry out.
	if reason, _ := consolidation.PoolDrift(np, nc, node, c.opts.DriftOnMetadata); reason != "" {
		return reason
	}
	reason, err := c.cloud.IsDrifted(ctx, nc)
	if err != nil {
		log.FromContext(ctx).V(1).Info("checking drift", "nodeclaim", nc.Name, "error", err.Error())
		return ""
	}
	return string(reason)
}
