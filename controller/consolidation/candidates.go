// Package consolidation decides how a cluster shrinks: which nodes its pods can do
// without, what (if anything) replaces them, and which of those may go now under
// the NodePools' budgets. It does no I/O: it reads a state.View and plans with the
// scheduling engine, so the disruption controller, `dovetail simulate
// --consolidate` and the benchmarks make the same decision from the same cluster.
package consolidation

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/sets"

	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/controller/provreq"
	"github.com/dovetail-sh/dovetail/controller/scheduling"
	"github.com/dovetail-sh/dovetail/controller/state"
)

// Candidate is an initialized node of a NodePool that disruption may act on.
type Candidate struct {
	Claim        *v1.NodeClaim
	Node         *corev1.Node
	Pool         *v1.NodePool
	InstanceType string
	CapacityType string
	// Pods are those a drain must move: not daemonset, mirror or finished.
	Pods []*corev1.Pod
	// Price is what the node costs per hour; NaN when its offering is unknown: then
	// it may be removed, never replaced.
	Price float64
	// DisruptionCost weighs moving its pods (see disruptionCost).
	DisruptionCost float64
	// ConsolidatableSince is when consolidateAfter has passed; zero for "Never".
	ConsolidatableSince time.Time
	// BlockedBy says what forbids a graceful disruption, or "".
	BlockedBy string
	// Drift says why the node no longer matches its pool or class, or "". The
	// caller sets it: finding drift asks the cloud provider.
	Drift string
	// evictions counts, per PodDisruptionBudget (namespace/name), the pods a drain
	// of this node evicts under it.
	evictions map[string]int
}

// Consolidatable reports whether consolidateAfter has passed at now.
func (c *Candidate) Consolidatable(now time.Time) bool {
	return !c.ConsolidatableSince.IsZero() && !now.Before(c.ConsolidatableSince)
}

// Empty reports whether moving its pods costs nothing: no pod has to move, or
// every one that does has an eviction cost of 0 or less (a pod that declared
// itself free to disrupt does not make its node worth keeping, as Karpenter v1.15
// counts a node empty). The pods of such a node are still planned a place.
func (c *Candidate) Empty() bool {
	for _, p := range c.Pods {
		if EvictionCost(p) > 0 {
			return false
		}
	}
	return true
}

// Cluster is what disruption sees in one pass: the engine's snapshot, the
// candidates (cheapest to disrupt first), and per pool how many claims it has and
// how many are being disrupted already.
type Cluster struct {
	Snapshot   *scheduling.Snapshot
	Candidates []*Candidate
	// Moving are the pods of nodes being disrupted already: they need a place
	// before anything else may take it.
	Moving []*corev1.Pod
	// Launching maps the snapshot's nodes that are not initialized yet (claims in
	// flight, nodes still starting) to their claims: pods planned onto them wait.
	Launching map[string]string
	// Total counts each pool's nodes as Karpenter's budgets do: initialized (or
	// rebooting), their instance not yet terminating. Disrupting are those being
	// disrupted (deleting, tainted for it, rebooting); NotReady those whose Node is
	// not Ready, which every budget but Unhealthy's counts as disrupted (repair must
	// not be starved by the nodes it is there to repair).
	Total, Disrupting, NotReady map[string]int
	// Totals are each pool's $/h and disruption cost over all its nodes, what
	// Balanced pools score moves against.
	Totals map[string]PoolTotals
	// pdbAllowed is each PodDisruptionBudget's disruptionsAllowed, so a batch takes
	// no more of a budget's pods than it allows at once.
	pdbAllowed map[string]int
	// placeablePending caches PlaceablePending; -1 until computed.
	placeablePending int
	// committed are the nodes' prices with the snapshot's commitments charged,
	// by node name; nil without commitments.
	committed map[string]float64
}

// Observe builds the pass's cluster from a view and the engine's snapshot of it.
// disrupting names the claims commands in this process are disrupting; claims
// tainted for disruption or being deleted count as disrupting too.
func Observe(view *state.View, snap *scheduling.Snapshot, disrupting sets.Set[string], now time.Time) *Cluster {
	cl := &Cluster{Snapshot: snap, Launching: map[string]string{}, Total: map[string]int{}, Disrupting: map[string]int{}, NotReady: map[string]int{},
		Totals: map[string]PoolTotals{}, pdbAllowed: map[string]int{}, placeablePending: -1}
	for i := range view.PDBs {
		cl.pdbAllowed[view.PDBs[i].Namespace+"/"+view.PDBs[i].Name] = int(view.PDBs[i].Status.DisruptionsAllowed)
	}
	if !snap.Commitments.Empty() {
		cl.committed = snap.NodePrices()
	}
	nominated := nominatedTo(snap)
	booked := map[string][]string{}
	for _, n := range snap.Nodes {
		if keys := provreq.BookedOn(n); len(keys) > 0 {
			booked[n.Name] = keys
		}
	}
	pools := map[string]*v1.NodePool{}
	for _, np := range snap.Pools {
		pools[np.Name] = np
	}
	for i := range view.Claims {
		nc := &view.Claims[i]
		pool := nc.Labels[v1.LabelNodePool]
		initialized := meta.IsStatusConditionTrue(nc.Status.Conditions, v1.ConditionTypeInitialized)
		// A node not initialized yet serves no pods and takes no share of a budget,
		// so a percentage does not round up on replacements still starting.
		counted := (initialized || nc.Rebooting()) && !meta.IsStatusConditionTrue(nc.Status.Conditions, v1.ConditionTypeInstanceTerminating)
		if counted {
			cl.Total[pool]++
		}
		cl.addToTotals(view, snap, nc)
		if nc.DeletionTimestamp != nil {
			if counted {
				cl.Disrupting[pool]++
			}
			continue
		}
		if nc.Rebooting() {
			// Repair is rebooting it in place: it counts against every budget, as in
			// Karpenter, and nothing else disrupts it meanwhile.
			cl.Disrupting[pool]++
			continue
		}
		node := view.NodeOf(nc)
		if !initialized {
			cl.Launching[nc.Name] = nc.Name
			if node != nil {
				cl.Launching[node.Name] = nc.Name
			}
		}
		if node == nil {
			continue
		}
		if state.HasTaint(node, v1.DisruptedNoScheduleTaint) || disrupting.Has(nc.Name) || node.DeletionTimestamp != nil {
			cl.Disrupting[pool]++
			cl.Moving = append(cl.Moving, reschedulable(view.PodsOn(node.Name))...)
			continue
		}
		if counted && !nodeReady(node) {
			cl.NotReady[pool]++
		}
		np, ok := pools[pool]
		if !ok || !initialized {
			continue
		}
		onNode := view.PodsOn(node.Name)
		cand := &Candidate{Claim: nc, Node: node, Pool: np, InstanceType: nc.Labels[v1.LabelInstanceType], CapacityType: nc.Labels[v1.LabelCapacityType]}
		cand.Pods = reschedulable(onNode)
		cand.BlockedBy = blocker(node, onNode, view.PDBs, now)
		cand.evictions = evictionsUnder(cand.Pods, view.PDBs)
		if keys := booked[node.Name]; len(keys) > 0 && cand.BlockedBy == "" {
			// Its room is booked for a ProvisioningRequest's pods, which may not have
			// been created yet: the node only looks empty until they come.
			cand.BlockedBy = "it holds capacity booked for ProvisioningRequest " + strings.Join(keys, ", ")
		}
		if n := nominated[node.Name]; n > 0 && cand.BlockedBy == "" {
			// Pods the provisioner placed here are on their way: the node only looks
			// empty (or underused) until kube-scheduler binds them.
			cand.BlockedBy = fmt.Sprintf("%d pending pod(s) are nominated to it", n)
		}
		cand.Price = cl.price(snap, nc, node.Name)
		cand.DisruptionCost = disruptionCost(cand.Pods, nc, now)
		cand.ConsolidatableSince = consolidatableSince(nc, np)
		cl.Candidates = append(cl.Candidates, cand)
	}
	sort.SliceStable(cl.Candidates, func(i, j int) bool {
		a, b := cl.Candidates[i], cl.Candidates[j]
		if a.DisruptionCost != b.DisruptionCost {
			return a.DisruptionCost < b.DisruptionCost
		}
		return a.Claim.Name < b.Claim.Name
	})
	return cl
}

// addToTotals counts a claim in its pool's totals: every node counts, being
// disrupted, starting or not a candidate, as in Karpenter (a node's price unknown
// adds nothing to the cost).
func (cl *Cluster) addToTotals(view *state.View, snap *scheduling.Snapshot, nc *v1.NodeClaim) {
	pool := nc.Labels[v1.LabelNodePool]
	t := cl.Totals[pool]
	var pods []*corev1.Pod
	name := nc.Name
	if node := view.NodeOf(nc); node != nil {
		pods = reschedulable(view.PodsOn(node.Name))
		name = node.Name
	}
	if p := cl.price(snap, nc, name); !math.IsNaN(p) {
		t.Cost += p
	}
	t.Disruption += rescheduleCost(pods)
	cl.Totals[pool] = t
}

// PlaceablePending counts the pending pods the cluster as it is, plus what its
// pools may launch, can place: the provisioner's work in progress, which
// consolidation waits for (capacity those pods may need is not taken away
// underneath them). A pod no pool and no node can take (a request larger than any
// type, a selector nothing matches) stays pending whatever consolidation does, and
// must not keep the cluster from shrinking. A backlog is planned a bounded round
// at a time, as the provisioner plans it, and counting stops at the first round
// with a placeable pod: the answer consolidation needs is whether there is any.
func (cl *Cluster) PlaceablePending() int {
	if cl.placeablePending >= 0 {
		return cl.placeablePending
	}
	cl.placeablePending = 0
	pending := cl.Snapshot.Pending
	for len(pending) > 0 && cl.placeablePending == 0 {
		round := pending[:min(len(pending), scheduling.MaxPodsPerSolve)]
		pending = pending[len(round):]
		cl.placeablePending = len(round) - len(cl.Snapshot.PlanWithout(nil, round).Unschedulable)
	}
	return cl.placeablePending
}

// Allowed is how many more of each pool's nodes may be disrupted now, per reason.
// A budget that does not parse allows nothing for its pool; its error is returned.
func (cl *Cluster) Allowed(now time.Time) (map[string]map[v1.DisruptionReason]int, []error) {
	out := map[string]map[v1.DisruptionReason]int{}
	var errs []error
	for _, np := range cl.Snapshot.Pools {
		out[np.Name] = map[v1.DisruptionReason]int{}
		for _, r := range Reasons {
			n, err := Allowed(np, r, cl.Total[np.Name], cl.Consuming(np.Name, r), now)
			if err != nil {
				errs = append(errs, err)
			}
			out[np.Name][r] = n
		}
	}
	return out, errs
}

// Consuming is how many of the pool's nodes count against its budget for the
// reason: those being disrupted, and for every reason but Unhealthy those not Ready.
func (cl *Cluster) Consuming(pool string, reason v1.DisruptionReason) int {
	if reason == v1.DisruptionReasonUnhealthy {
		return cl.Disrupting[pool]
	}
	return cl.Disrupting[pool] + cl.NotReady[pool]
}

// nodeReady is false when the kubelet (or the node controller) says the node is not
// Ready. A Node that reports no Ready condition at all (a snapshot's, an object made
// by hand) is taken as Ready.
func nodeReady(node *corev1.Node) bool {
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return true
}

// nominatedTo counts, per node, the pods the provisioner nominated to it that are
// not bound yet.
func nominatedTo(snap *scheduling.Snapshot) map[string]int {
	out := map[string]int{}
	for _, n := range snap.Nodes {
		for _, p := range n.Pods {
			if p.Spec.NodeName == "" && !provreq.IsVirtual(p) {
				out[n.Name]++
			}
		}
	}
	return out
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

// Reschedulable keeps the pods a drain must move (see reschedulable).
func Reschedulable(pods []*corev1.Pod) []*corev1.Pod { return reschedulable(pods) }

// reschedulable keeps the pods a drain must move: not daemonset, mirror or
// finished, and not terminating unless a StatefulSet owns them: a StatefulSet
// recreates a pod under the same name only once the old one is gone, so the
// successor needs room as the pod does and may come back to the same node
// (Karpenter counts these pods the same way).
func reschedulable(pods []*corev1.Pod) []*corev1.Pod {
	var out []*corev1.Pod
	for _, p := range pods {
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		if _, mirror := p.Annotations[corev1.MirrorPodAnnotationKey]; mirror {
			continue
		}
		owner := metav1.GetControllerOf(p)
		if owner != nil && owner.Kind == "DaemonSet" {
			continue
		}
		if p.DeletionTimestamp != nil && (owner == nil || owner.Kind != "StatefulSet") {
			continue
		}
		out = append(out, p)
	}
	return out
}

// Recreated reports whether a controller will recreate the pod once it is
// evicted: a pod no controller owns is evicted like any other (as Karpenter does)
// and is then gone.
func Recreated(p *corev1.Pod) bool { return metav1.GetControllerOf(p) != nil }

// evictionsUnder counts the pods under each PodDisruptionBudget that evicting them
// takes from its budget.
func evictionsUnder(pods []*corev1.Pod, pdbs []policyv1.PodDisruptionBudget) map[string]int {
	var out map[string]int
	for i := range pdbs {
		pdb := &pdbs[i]
		for _, p := range pods {
			if p.DeletionTimestamp == nil && guards(pdb, p) && !evictableWhateverTheBudget(pdb, p) {
				if out == nil {
					out = map[string]int{}
				}
				out[pdb.Namespace+"/"+pdb.Name]++
			}
		}
	}
	return out
}

// guards reports whether the PodDisruptionBudget selects the pod.
func guards(pdb *policyv1.PodDisruptionBudget, p *corev1.Pod) bool {
	if pdb.Namespace != p.Namespace || pdb.Spec.Selector == nil {
		return false
	}
	sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
	return err == nil && sel.Matches(labels.Set(p.Labels))
}

// evictableWhateverTheBudget reports whether the eviction API lets the pod go
// whatever the budget's disruptionsAllowed says: under unhealthyPodEvictionPolicy
// AlwaysAllow, a running pod that is not Ready. Under IfHealthyBudget (the
// default) such a pod still waits for the budget.
func evictableWhateverTheBudget(pdb *policyv1.PodDisruptionBudget, p *corev1.Pod) bool {
	policy := pdb.Spec.UnhealthyPodEvictionPolicy
	return policy != nil && *policy == policyv1.AlwaysAllow && !ready(p)
}

// ready reports whether the pod's Ready condition is True, as the eviction API
// judges a pod healthy.
func ready(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// blocker says what forbids a graceful disruption of the node, or "". As in
// Karpenter, every pod that runs counts, DaemonSet and mirror pods too (the
// node's end ends them, though the drain leaves them be), except that a mirror
// pod's budgets do not hold it: the eviction API cannot evict a mirror pod. A pod
// finished or terminating already holds nothing.
func blocker(node *corev1.Node, pods []*corev1.Pod, pdbs []policyv1.PodDisruptionBudget, now time.Time) string {
	if node.Annotations[v1.DoNotDisruptAnnotationKey] == "true" {
		return fmt.Sprintf("node has the %s annotation", v1.DoNotDisruptAnnotationKey)
	}
	return podBlocker(pods, pdbs, now)
}

// podBlocker says which of the pods cannot be evicted now, and why, or "".
func podBlocker(pods []*corev1.Pod, pdbs []policyv1.PodDisruptionBudget, now time.Time) string {
	for _, p := range pods {
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed || p.DeletionTimestamp != nil {
			continue
		}
		if protected, until := v1.PodDoNotDisrupt(p, now); protected {
			if !until.IsZero() {
				return fmt.Sprintf("pod %s/%s has the %s annotation, until %s", p.Namespace, p.Name, v1.DoNotDisruptAnnotationKey, until.UTC().Format(time.RFC3339))
			}
			return fmt.Sprintf("pod %s/%s has the %s annotation", p.Namespace, p.Name, v1.DoNotDisruptAnnotationKey)
		}
		if _, mirror := p.Annotations[corev1.MirrorPodAnnotationKey]; mirror {
			continue
		}
		var guarding []string
		for i := range pdbs {
			pdb := &pdbs[i]
			if !guards(pdb, p) {
				continue
			}
			guarding = append(guarding, pdb.Name)
			if pdb.Status.DisruptionsAllowed < 1 && !evictableWhateverTheBudget(pdb, p) {
				return fmt.Sprintf("pdb %s/%s prevents evicting pod %s", pdb.Namespace, pdb.Name, p.Name)
			}
		}
		if len(guarding) > 1 {
			// The eviction API refuses such a pod outright (500: more than one PDB).
			return fmt.Sprintf("pod %s/%s is selected by %d PodDisruptionBudgets (%s), and the eviction API evicts no pod that more than one selects", p.Namespace, p.Name, len(guarding), strings.Join(guarding, ", "))
		}
	}
	return ""
}

// RepairCandidate is a registered node as repair sees it: initialized or not (a
// node that never became Ready is the commonest repair), with its pods, the price
// of its node and what moving them costs. BlockedBy names only what its pods
// block: a node's do-not-disrupt annotation does not hold repair, as in Karpenter.
func (cl *Cluster) RepairCandidate(view *state.View, nc *v1.NodeClaim, node *corev1.Node, np *v1.NodePool, now time.Time) *Candidate {
	onNode := view.PodsOn(node.Name)
	cand := &Candidate{Claim: nc, Node: node, Pool: np, InstanceType: nc.Labels[v1.LabelInstanceType], CapacityType: nc.Labels[v1.LabelCapacityType]}
	cand.Pods = reschedulable(onNode)
	cand.BlockedBy = podBlocker(onNode, view.PDBs, now)
	cand.Price = cl.price(cl.Snapshot, nc, node.Name)
	cand.DisruptionCost = disruptionCost(cand.Pods, nc, now)
	return cand
}

// price is what the claim's node costs per hour: what it adds to the bill when
// commitments pay for some of the fleet (removing a reserved node saves nothing),
// its list price otherwise.
func (cl *Cluster) price(snap *scheduling.Snapshot, nc *v1.NodeClaim, node string) float64 {
	if p, ok := cl.committed[node]; ok {
		return p
	}
	return Price(snap.InstanceTypes[nc.Labels[v1.LabelNodePool]], nc.Labels[v1.LabelInstanceType], nc.Labels[v1.LabelTopologyZone], nc.Labels[v1.LabelCapacityType])
}

// Price is what a node costs per hour, NaN when its offering is unknown.
func Price(types []*scheduling.InstanceType, name, zone, capacityType string) float64 {
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

// disruptionCost weighs moving a node's pods, as Karpenter orders candidates: the
// pods' eviction costs, a negative one counting nothing, scaled by how much of the
// node's life remains (an expiring node is cheap to disrupt).
func disruptionCost(pods []*corev1.Pod, nc *v1.NodeClaim, now time.Time) float64 {
	cost := 0.0
	for _, p := range pods {
		cost += math.Max(EvictionCost(p), 0)
	}
	if exp := nc.Spec.ExpireAfter; exp.Duration != nil && *exp.Duration > 0 {
		remaining := 1 - float64(now.Sub(nc.CreationTimestamp.Time))/float64(*exp.Duration)
		cost *= math.Max(remaining, 0)
	}
	return cost
}

// EvictionCost is what evicting the pod costs, as Karpenter weighs it: 1, plus its
// controller.kubernetes.io/pod-deletion-cost over 2^27 and its priority over 2^25,
// clamped to [-10, 10]. A pod that set a low enough deletion cost or priority
// costs nothing to move.
func EvictionCost(p *corev1.Pod) float64 {
	c := 1.0
	if v, ok := p.Annotations[corev1.PodDeletionCost]; ok {
		if n, err := strconv.ParseFloat(v, 64); err == nil {
			c += n / math.Pow(2, 27)
		}
	}
	if p.Spec.Priority != nil {
		c += float64(*p.Spec.Priority) / math.Pow(2, 25)
	}
	return min(max(c, -10), 10)
}
