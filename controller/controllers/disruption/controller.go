// Package disruption removes and replaces capacity the cluster no longer needs in the
// form it has: drifted nodes are replaced, empty ones removed, and underutilized ones
// consolidated into fewer or cheaper nodes. Every decision is made by the scheduling
// engine planning the candidates' pods onto the rest of the cluster, is limited by the
// NodePools' budgets and by what the pods allow (PodDisruptionBudgets, do-not-disrupt,
// pods no controller would recreate), and launches replacements before anything
// drains.
package disruption

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/controller/cloudprovider"
	"github.com/dovetail-sh/dovetail/controller/controllers/periodic"
	"github.com/dovetail-sh/dovetail/controller/controllers/provisioning"
	"github.com/dovetail-sh/dovetail/controller/metrics"
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
}

// DefaultOptions are Karpenter's timings.
func DefaultOptions() Options {
	return Options{Period: 10 * time.Second, ValidationDelay: 15 * time.Second, ReplacementTimeout: 10 * time.Minute}
}

// MinSpotToSpotOptions is Karpenter's rule: a spot node is replaced by cheaper spot
// only when at least this many cheaper types are offered, so the replacement is not
// the one type most likely to be interrupted next.
const MinSpotToSpotOptions = 15

// maxMultiNodeCandidates bounds the candidates one multi-node consolidation weighs.
const maxMultiNodeCandidates = 100

// Consolidation types, as the metrics name them.
const (
	typeEmpty  = "empty"
	typeSingle = "single"
	typeMulti  = "multi"
	typeDrift  = ""
)

// Controller is the disruption controller.
type Controller struct {
	kube        client.Client
	cloud       cloudprovider.CloudProvider
	provisioner *provisioning.Provisioner
	clock       clock.Clock
	recorder    record.EventRecorder
	opts        Options

	podSets  map[string]string // claim → fingerprint of its node's pods
	proposed *command
	inflight []*command
	blocked  map[string]string // node → last blocking reason reported
}

// NewController wires the controller.
func NewController(kube client.Client, cloud cloudprovider.CloudProvider, provisioner *provisioning.Provisioner, clk clock.Clock, recorder record.EventRecorder, opts Options) *Controller {
	return &Controller{kube: kube, cloud: cloud, provisioner: provisioner, clock: clk, recorder: recorder, opts: opts,
		podSets: map[string]string{}, blocked: map[string]string{}}
}

func (c *Controller) Name() string { return "disruption" }

// Register runs a pass every Period on the elected leader.
func (c *Controller) Register(_ context.Context, mgr manager.Manager) error {
	return mgr.Add(periodic.Runnable(c.clock, c.opts.Period, c.Name(), c.Reconcile))
}

// candidate is a node disruption may act on.
type candidate struct {
	claim               *v1.NodeClaim
	node                *corev1.Node
	pool                *v1.NodePool
	pods                []*corev1.Pod // those that must be rescheduled
	instanceType        string
	capacityType        string
	price               float64 // NaN when unknown: then it may be removed, never replaced
	cost                float64 // disruption cost: what moving its pods costs
	consolidatableSince time.Time
	blockedBy           string
	drift               string
}

// command is a decision: candidates to remove and the claims that replace them.
type command struct {
	// id groups the candidates' disruption records (state.Disruption).
	id                string
	reason            v1.DisruptionReason
	consolidationType string
	candidates        []*candidate
	replacements      []*scheduling.NodeClaimPlan
	launched          []string
	decidedAt         time.Time
	startedAt         time.Time
}

func (cmd *command) String() string {
	names := make([]string, len(cmd.candidates))
	for i, c := range cmd.candidates {
		names[i] = c.claim.Name + "/" + c.instanceType
		if c.drift != "" {
			names[i] += " (" + c.drift + ")"
		}
	}
	action := "delete"
	if len(cmd.replacements) > 0 {
		var types []string
		for _, r := range cmd.replacements {
			types = append(types, r.InstanceType.Name)
		}
		action = "replace with " + strings.Join(types, ", ")
	}
	return fmt.Sprintf("%s: %s %s", cmd.reason, action, strings.Join(names, ", "))
}

// pass is one pass's view of the cluster.
type pass struct {
	snap       *provisioning.Snapshot
	claims     []v1.NodeClaim
	poolByName map[string]*v1.NodePool
	candidates []*candidate
	// perPool counts a pool's claims and those already being disrupted.
	total, disrupting map[string]int
	allowed           map[string]map[v1.DisruptionReason]int
	// placeablePending caches placeablePending's answer; -1 until computed.
	placeablePending int
}

// Reconcile makes one pass: finish what is in flight, then decide at most one new
// command.
func (c *Controller) Reconcile(ctx context.Context) error {
	s, err := c.observe(ctx)
	if err != nil {
		return err
	}
	if err := c.progress(ctx, s); err != nil {
		return err
	}
	if len(c.inflight) > 0 {
		return nil
	}
	if c.proposed != nil {
		cmd := c.proposed
		if c.clock.Since(cmd.decidedAt) < c.opts.ValidationDelay {
			return nil
		}
		c.proposed = nil
		// Decide again on today's cluster; act only when the same candidates still
		// make the same kind of decision.
		again := c.revalidate(s, cmd)
		if again == nil {
			metrics.VoluntaryDisruptionDecisions.WithLabelValues("abandoned", strings.ToLower(string(cmd.reason)), cmd.consolidationType).Inc()
			log.FromContext(ctx).Info("abandoned a disruption that no longer holds", "command", cmd.String())
			return nil
		}
		return c.execute(ctx, s, again)
	}
	cmd := c.decide(ctx, s)
	if cmd == nil {
		return nil
	}
	if cmd.reason == v1.DisruptionReasonDrifted {
		return c.execute(ctx, s, cmd)
	}
	cmd.decidedAt = c.clock.Now()
	c.proposed = cmd
	log.FromContext(ctx).Info("proposing disruption; validating before acting", "command", cmd.String(), "after", c.opts.ValidationDelay.String())
	return nil
}

// observe reads the cluster, records pod changes on claims, and finds candidates.
// It also puts what a restart or a leader change left half done right: disruptions
// recorded in the API and not running here are resumed, and nodes tainted for a
// disruption nothing carries on are put back in service.
func (c *Controller) observe(ctx context.Context) (*pass, error) {
	view, err := c.provisioner.Cluster().Read(ctx, state.Writable)
	if err != nil {
		return nil, err
	}
	snap, err := c.provisioner.SnapshotOf(ctx, view)
	if err != nil {
		return nil, err
	}
	c.resume(ctx, view)
	c.removeStaleTaints(ctx, view)
	nominated := nominatedTo(snap)
	claims, nodes, pdbs := view.Claims, view.Nodes, view.PDBs
	s := &pass{snap: snap, claims: claims, placeablePending: -1, poolByName: map[string]*v1.NodePool{}, total: map[string]int{}, disrupting: map[string]int{},
		allowed: map[string]map[v1.DisruptionReason]int{}}
	for _, np := range snap.Pools {
		s.poolByName[np.Name] = np
	}
	inflight := sets.New[string]()
	for _, cmd := range c.inflight {
		for _, cand := range cmd.candidates {
			inflight.Insert(cand.claim.Name)
		}
	}
	now := c.clock.Now()
	for i := range s.claims {
		nc := &s.claims[i]
		pool := nc.Labels[v1.LabelNodePool]
		if nc.DeletionTimestamp != nil {
			s.total[pool]++
			s.disrupting[pool]++
			continue
		}
		s.total[pool]++
		node := view.NodeOf(nc)
		if node == nil {
			continue
		}
		if state.HasTaint(node, v1.DisruptedNoScheduleTaint) || inflight.Has(nc.Name) {
			s.disrupting[pool]++
			continue
		}
		c.recordPodEvents(ctx, nc, view.PodsOn(node.Name), now)
		np, ok := s.poolByName[pool]
		if !ok || !meta.IsStatusConditionTrue(nc.Status.Conditions, v1.ConditionTypeInitialized) {
			continue
		}
		cand := &candidate{claim: nc, node: node, pool: np, instanceType: nc.Labels[v1.LabelInstanceType], capacityType: nc.Labels[v1.LabelCapacityType]}
		cand.pods = reschedulable(view.PodsOn(node.Name))
		cand.blockedBy = blocker(node, view.PodsOn(node.Name), pdbs)
		if n := nominated[node.Name]; n > 0 && cand.blockedBy == "" {
			// Pods the provisioner placed here are on their way: the node only looks
			// empty (or underused) until kube-scheduler binds them.
			cand.blockedBy = fmt.Sprintf("%d pending pod(s) are nominated to it", n)
		}
		cand.price = price(snap.InstanceTypes[pool], cand.instanceType, nc.Labels[v1.LabelTopologyZone], cand.capacityType)
		cand.cost = disruptionCost(cand.pods, nc, now)
		cand.consolidatableSince = consolidatableSince(nc, np)
		cand.drift = c.driftReason(ctx, nc, node, np)
		c.writeConditions(ctx, cand, now)
		s.candidates = append(s.candidates, cand)
	}
	// Forget claims and nodes that are gone, so the bookkeeping does not grow.
	seenClaims, seenNodes := sets.New[string](), sets.New[string]()
	for i := range s.claims {
		seenClaims.Insert(s.claims[i].Name)
	}
	for i := range nodes {
		seenNodes.Insert(nodes[i].Name)
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
	for name, np := range s.poolByName {
		s.allowed[name] = map[v1.DisruptionReason]int{}
		var status []v1.AllowedDisruption
		for _, r := range Reasons {
			n, err := Allowed(np, r, s.total[name], s.disrupting[name], now)
			if err != nil {
				log.FromContext(ctx).Error(err, "invalid disruption budget; no disruption for this pool", "nodepool", name)
			}
			s.allowed[name][r] = n
			status = append(status, v1.AllowedDisruption{Reason: r, Nodes: int32(n)})
			metrics.NodePoolAllowedDisruptions.WithLabelValues(name, strings.ToLower(string(r))).Set(float64(n))
		}
		c.writeAllowed(ctx, np, status)
	}
	sort.SliceStable(s.candidates, func(i, j int) bool { return s.candidates[i].cost < s.candidates[j].cost })
	return s, nil
}

// nominatedTo counts, per node, the pods the provisioner nominated to it that are
// not bound yet.
func nominatedTo(snap *provisioning.Snapshot) map[string]int {
	out := map[string]int{}
	for _, n := range snap.Nodes {
		for _, p := range n.Pods {
			if p.Spec.NodeName == "" {
				out[n.Name]++
			}
		}
	}
	return out
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
	nc := cand.claim
	before := nc.DeepCopy()
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
	set(v1.ConditionTypeDrifted, cand.drift != "", cand.drift, "the node no longer matches its NodePool or node class")
	set(v1.ConditionTypeConsolidatable, cand.consolidatable(now), "Consolidatable", "consolidateAfter has passed since the last pod change")
	if equality.Semantic.DeepEqual(before.Status.Conditions, nc.Status.Conditions) {
		return
	}
	if err := c.kube.Status().Patch(ctx, nc, client.MergeFrom(before)); err != nil {
		log.FromContext(ctx).V(1).Info("writing disruption conditions", "nodeclaim", nc.Name, "error", err.Error())
	}
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
	patch := client.MergeFrom(nc.DeepCopy())
	nc.Status.LastPodEventTime = metav1.NewTime(now)
	if err := c.kube.Status().Patch(ctx, nc, patch); err != nil {
		log.FromContext(ctx).V(1).Info("recording a pod event on a nodeclaim", "nodeclaim", nc.Name, "error", err.Error())
	}
}

// consolidatableSince is when the claim may first be consolidated: consolidateAfter
// after its last pod event (or its initialization); zero for "Never".
func consolidatableSince(nc *v1.NodeClaim, np *v1.NodePool) time.Time {
	after := np.Spec.Disruption.ConsolidateAfter
	if after.Duration == nil {
		return time.Time{}
	}
	last := nc.Status.LastPodEventTime.Time
	if init := meta.FindStatusCondition(nc.Status.Conditions, v1.ConditionTypeInitialized); init != nil && init.LastTransitionTime.After(last) {
		last = init.LastTransitionTime.Time
	}
	return last.Add(*after.Duration)
}

func (cand *candidate) consolidatable(now time.Time) bool {
	return !cand.consolidatableSince.IsZero() && !now.Before(cand.consolidatableSince)
}

// driftReason says why a node no longer matches its pool or class, or "".
func (c *Controller) driftReason(ctx context.Context, nc *v1.NodeClaim, node *corev1.Node, np *v1.NodePool) string {
	if nc.Annotations[v1.NodePoolHashVersionAnnotationKey] == v1.NodePoolHashVersion {
		if h, ok := nc.Annotations[v1.NodePoolHashAnnotationKey]; ok && h != np.Hash() {
			return "NodePoolDrift"
		}
	}
	if reqs, err := scheduling.FromNodePoolRequirements(np.Spec.Template.Spec.Requirements); err == nil {
		for key, req := range reqs {
			if v, ok := node.Labels[key]; ok && !req.Has(v) {
				return "RequirementsDrift"
			}
		}
	}
	reason, err := c.cloud.IsDrifted(ctx, nc)
	if err != nil {
		log.FromContext(ctx).V(1).Info("checking drift", "nodeclaim", nc.Name, "error", err.Error())
		return ""
	}
	return string(reason)
}

// reschedulable keeps the pods a drain must move: not daemonset, mirror or finished.
func reschedulable(pods []*corev1.Pod) []*corev1.Pod {
	var out []*corev1.Pod
	for _, p := range pods {
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed || p.DeletionTimestamp != nil {
			continue
		}
		if _, mirror := p.Annotations[corev1.MirrorPodAnnotationKey]; mirror {
			continue
		}
		if owner := metav1.GetControllerOf(p); owner != nil && owner.Kind == "DaemonSet" {
			continue
		}
		out = append(out, p)
	}
	return out
}

// blocker says what forbids a graceful disruption of the node, or "".
func blocker(node *corev1.Node, pods []*corev1.Pod, pdbs []policyv1.PodDisruptionBudget) string {
	if node.Annotations[v1.DoNotDisruptAnnotationKey] == "true" {
		return fmt.Sprintf("node has the %s annotation", v1.DoNotDisruptAnnotationKey)
	}
	for _, p := range reschedulable(pods) {
		if p.Annotations[v1.DoNotDisruptAnnotationKey] == "true" {
			return fmt.Sprintf("pod %s/%s has the %s annotation", p.Namespace, p.Name, v1.DoNotDisruptAnnotationKey)
		}
		if metav1.GetControllerOf(p) == nil {
			return fmt.Sprintf("pod %s/%s has no controller to recreate it", p.Namespace, p.Name)
		}
		for i := range pdbs {
			pdb := &pdbs[i]
			if pdb.Namespace != p.Namespace || pdb.Spec.Selector == nil {
				continue
			}
			sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
			if err != nil || !sel.Matches(labels.Set(p.Labels)) {
				continue
			}
			if pdb.Status.DisruptionsAllowed < 1 {
				return fmt.Sprintf("pdb %s/%s prevents evicting pod %s", pdb.Namespace, pdb.Name, p.Name)
			}
		}
	}
	return ""
}

// price is what the node costs per hour, NaN when its offering is unknown.
func price(types []*scheduling.InstanceType, name, zone, capacityType string) float64 {
	for _, it := range types {
		if it.Name != name {
			continue
		}
		for _, o := range it.Offerings {
			if o.Zone == zone && o.CapacityType == capacityType {
				return o.Price
			}
		}
	}
	return math.NaN()
}

// disruptionCost weighs moving a node's pods, as Karpenter does: each pod counts one,
// more with a higher pod-deletion-cost or priority, and the sum is scaled by how much
// of the node's life remains (an expiring node is cheap to disrupt).
func disruptionCost(pods []*corev1.Pod, nc *v1.NodeClaim, now time.Time) float64 {
	cost := 0.0
	for _, p := range pods {
		c := 1.0
		if v, ok := p.Annotations["controller.kubernetes.io/pod-deletion-cost"]; ok {
			var n float64
			if _, err := fmt.Sscan(v, &n); err == nil {
				c += n / math.Pow(2, 27)
			}
		}
		if p.Spec.Priority != nil {
			c += float64(*p.Spec.Priority) / math.Pow(2, 25)
		}
		cost += math.Max(c, 0)
	}
	if exp := nc.Spec.ExpireAfter; exp.Duration != nil && *exp.Duration > 0 {
		remaining := 1 - float64(now.Sub(nc.CreationTimestamp.Time))/float64(*exp.Duration)
		cost *= math.Max(remaining, 0)
	}
	return cost
}
