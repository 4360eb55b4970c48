package simulate

import (
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"

	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/controller/catalog"
	"github.com/dovetail-sh/dovetail/controller/consolidation"
	"github.com/dovetail-sh/dovetail/controller/operator/settings"
	"github.com/dovetail-sh/dovetail/controller/scheduling"
	"github.com/dovetail-sh/dovetail/controller/scheduling/defaultspread"
	"github.com/dovetail-sh/dovetail/controller/state"
)

// ConsolidationReport is what `dovetail simulate --consolidate` prints: the
// target fleet consolidation computes now, the part of it the budgets let start
// now, and why every other node stays. `-o json` prints it as is.
type ConsolidationReport struct {
	// Overlays are the snapshot's NodeOverlays and whether each applies.
	Overlays   []OverlayVerdict `json:"overlays,omitempty"`
	Now        time.Time        `json:"now"`
	SpotToSpot bool             `json:"spotToSpot"`
	// DriftEvaluated is always false: finding drift asks the cloud provider.
	DriftEvaluated bool                 `json:"driftEvaluated"`
	Summary        ConsolidationSummary `json:"summary"`
	Remove         []RemovedNode        `json:"remove"`
	Launch         []Replacement        `json:"launch"`
	PodsMoved      []PodMove            `json:"podsMoved"`
	// Scores are the moves of Balanced pools, as consolidationPolicy Balanced
	// scores them: approved ones are in the target, rejected ones not.
	Scores []MoveScore `json:"scores"`
	// Kept are the nodes that stay now, with why; a node of the target that its
	// budget holds back is both in Remove and here.
	Kept     []KeptNode `json:"kept"`
	Warnings []string   `json:"warnings"`
}

// MoveScore is a Balanced pool's score of one move: the share of the pool's $/h
// it saves over the share of the pool's disruption cost it evicts, approved at
// 1/k and above.
type MoveScore struct {
	NodePool          string   `json:"nodePool"`
	Nodes             []string `json:"nodes"`
	Score             float64  `json:"score"`
	Threshold         float64  `json:"threshold"`
	SavingsPercent    float64  `json:"savingsPercent"`
	DisruptionPercent float64  `json:"disruptionPercent"`
	Approved          bool     `json:"approved"`
}

// ConsolidationSummary counts nodes as NodeClaims (launched or in flight) plus the
// Nodes no NodePool manages; prices are those of the NodeClaims.
type ConsolidationSummary struct {
	NodesBefore        int     `json:"nodesBefore"`
	NodesAfter         int     `json:"nodesAfter"`
	UnmanagedNodes     int     `json:"unmanagedNodes"`
	PricePerHourBefore float64 `json:"pricePerHourBefore"`
	PricePerHourAfter  float64 `json:"pricePerHourAfter"`
	SavingsPerHour     float64 `json:"savingsPerHour"`
	// UnknownPrice counts the NodeClaims whose offering the catalog lacks: they are
	// left out of the prices.
	UnknownPrice int `json:"unknownPrice"`
	// PodsNotRecreated counts the moved pods no controller owns: evicted, they
	// are gone.
	PodsNotRecreated int `json:"podsNotRecreated"`
	// StartingNow and HeldByBudget split Remove.
	StartingNow  int `json:"startingNow"`
	HeldByBudget int `json:"heldByBudget"`
	// PlaceablePending counts the pending pods the cluster or its pools can place.
	// The controller places them before it consolidates anything, so while there
	// are any, StartingNow is 0 and the batches wait.
	PlaceablePending int `json:"placeablePending"`
}

// RemovedNode is a node the target does without.
type RemovedNode struct {
	Node         string `json:"node"`
	NodeClaim    string `json:"nodeClaim"`
	NodePool     string `json:"nodePool"`
	InstanceType string `json:"instanceType"`
	Zone         string `json:"zone"`
	CapacityType string `json:"capacityType"`
	// PricePerHour is null when the catalog does not know the offering.
	PricePerHour *float64 `json:"pricePerHour"`
	Pods         []string `json:"pods"`
	// Batch is the batch the budgets let it start in ("Empty",
	// "Underutilized/single"...): now, or once summary.placeablePending are placed;
	// "" when HeldBy says what holds the node back.
	Batch  string `json:"batch"`
	HeldBy string `json:"heldBy,omitempty"`
}

// Replacement is a node the target launches.
type Replacement struct {
	// Name is how PodsMoved refers to it.
	Name string `json:"name"`
	PlannedNodeClaim
	// Batch launches it now; "" when the nodes its pods come from are held back.
	Batch string `json:"batch"`
}

// PodMove is where the target puts a pod of a removed node.
type PodMove struct {
	Pod  string `json:"pod"`
	From string `json:"from"`
	To   string `json:"to"`
	// NotRecreated is set for a pod no controller owns: it is evicted like any
	// other, as Karpenter does, and then it is gone; To is only where it would fit.
	NotRecreated bool `json:"notRecreated,omitempty"`
}

// KeptNode is a node that stays, and why.
type KeptNode struct {
	Node      string `json:"node"`
	NodeClaim string `json:"nodeClaim,omitempty"`
	NodePool  string `json:"nodePool,omitempty"`
	Reason    string `json:"reason"`
}

// Consolidate runs consolidation's decision on a cluster snapshot, as the
// disruption controller would at now. Offline no command of this process is under
// way: only the nodes the snapshot shows tainted karpenter.sh/disrupted or being
// deleted count as being disrupted. Every NodePool may launch every catalog type
// its requirements allow, as in Run.
func Consolidate(in *Inputs, cat *catalog.File, ctl *settings.Options, now time.Time) (*ConsolidationReport, error) {
	d, err := decide(in, cat, ctl, now)
	if err != nil {
		return nil, err
	}
	return d.report(), nil
}

// decision is consolidation's decision on a snapshot, and what it was made from.
type decision struct {
	// catalog is the types of a pool whose class the input lacks.
	catalog    []*scheduling.InstanceType
	view       *state.View
	snap       *scheduling.Snapshot
	cl         *consolidation.Cluster
	plan       *consolidation.Plan
	overlays   []OverlayVerdict
	warnings   []string
	now        time.Time
	spotToSpot bool
}

// decide observes the snapshot as the disruption controller would and decides.
func decide(in *Inputs, cat *catalog.File, ctl *settings.Options, now time.Time) (*decision, error) {
	if len(in.NodePools) == 0 {
		return nil, errors.New("the snapshot has no NodePools, and consolidation acts only on their nodes: include nodepools in `kubectl get " + SnapshotKinds + " -A -o yaml`")
	}
	if len(in.Nodes) == 0 {
		return nil, errors.New("the snapshot has no Nodes: include nodes in `kubectl get " + SnapshotKinds + " -A -o yaml`")
	}
	p, err := prepare(in, cat, ctl)
	if err != nil {
		return nil, err
	}
	view, snap, overlays := p.view, p.snap, p.overlays
	warnings := viewWarnings(view)
	if len(in.Pods) > 0 {
		warnings = append(warnings, fmt.Sprintf("%d pod(s) have no spec.nodeName: consolidation moves only the pods bound to nodes; plan where pending pods go with `dovetail simulate` without --consolidate", len(in.Pods)))
	}
	cl := consolidation.Observe(view, snap, sets.New[string](), now)
	// The buffers' room is kept as the disruption controller keeps it: a removal
	// must leave a place for their pods.
	cl.Moving = append(cl.Moving, p.virtual...)
	allowed, errs := cl.Allowed(now)
	if len(errs) > 0 {
		return nil, fmt.Errorf("reading the disruption budgets, %w", errors.Join(errs...))
	}
	spotToSpot := ctl.FeatureGates.SpotToSpotConsolidation
	plan := consolidation.Decide(cl, allowed, consolidation.Options{Now: now, SpotToSpot: spotToSpot})
	return &decision{catalog: p.catalog, view: view, snap: snap, cl: cl, plan: plan, overlays: overlays, warnings: warnings, now: now, spotToSpot: spotToSpot}, nil
}

// report is the decision as `dovetail simulate --consolidate` prints it.
func (d *decision) report() *ConsolidationReport {
	view, snap, cl, plan, overlays, warnings, now, spotToSpot := d.view, d.snap, d.cl, d.plan, d.overlays, d.warnings, d.now, d.spotToSpot
	// The disruption controller's gate: pending pods the provisioner can place come
	// first, and nothing is disrupted meanwhile.
	placeable := cl.PlaceablePending()

	r := &ConsolidationReport{Overlays: overlays, Now: now, SpotToSpot: spotToSpot, Remove: []RemovedNode{}, Launch: []Replacement{}, PodsMoved: []PodMove{}, Scores: []MoveScore{}, Kept: []KeptNode{}, Warnings: warnings}
	for _, s := range append(append([]consolidation.Score(nil), plan.Scores...), plan.Rejected...) {
		nodes := make([]string, len(s.Candidates))
		for i, c := range s.Candidates {
			nodes[i] = c.Node.Name
		}
		r.Scores = append(r.Scores, MoveScore{NodePool: s.Pool, Nodes: nodes, Score: math.Round(s.Value()*100) / 100, Threshold: s.Threshold(),
			SavingsPercent: math.Round(s.SavingsFraction*1000) / 10, DisruptionPercent: math.Round(s.DisruptionFraction*1000) / 10, Approved: s.Approved()})
	}
	for i := range view.Claims {
		nc := &view.Claims[i]
		price := consolidation.Price(snap.InstanceTypes[nc.Labels[v1.LabelNodePool]], nc.Labels[v1.LabelInstanceType], nc.Labels[v1.LabelTopologyZone], nc.Labels[v1.LabelCapacityType])
		if math.IsNaN(price) {
			r.Summary.UnknownPrice++
			continue
		}
		r.Summary.PricePerHourBefore += price
	}
	if r.Summary.UnknownPrice > 0 {
		hint := "--catalog with their offerings"
		if missing := zonesNotOffered(view.Claims, d.catalog); len(missing) > 0 {
			hint = fmt.Sprintf("the catalog offers nothing in %s: --zones %s offers it there", strings.Join(missing, ", "), strings.Join(missing, ","))
		}
		r.Warnings = append(r.Warnings, fmt.Sprintf("%d NodeClaim(s) have an instance type, zone or capacity type the catalog does not offer: their price is unknown and left out of $/h, and such a node is removed only when empty (%s)", r.Summary.UnknownPrice, hint))
	}

	batchOf := map[*consolidation.Candidate]string{}
	replacementBatch := map[*scheduling.NodeClaimPlan]string{}
	for _, b := range plan.Batches {
		label := batchLabel(b)
		for _, c := range b.Candidates {
			batchOf[c] = label
		}
		for _, nc := range b.Replacements {
			replacementBatch[nc] = label
		}
	}
	heldBy := map[*consolidation.Candidate]string{}
	for _, b := range plan.Blocked {
		heldBy[b.Candidate] = b.Reason
	}
	removed := sets.New[string]()
	for _, c := range plan.Remove {
		rn := RemovedNode{Node: c.Node.Name, NodeClaim: c.Claim.Name, NodePool: c.Pool.Name, InstanceType: c.InstanceType,
			Zone: c.Claim.Labels[v1.LabelTopologyZone], CapacityType: c.CapacityType, Pods: podNames(c.Pods), Batch: batchOf[c]}
		if !math.IsNaN(c.Price) {
			p := round(c.Price)
			rn.PricePerHour = &p
		}
		if rn.Batch == "" {
			rn.HeldBy = heldBy[c]
			r.Summary.HeldByBudget++
		} else if placeable > 0 {
			heldBy[c] = fmt.Sprintf("in the target (%s), waiting for %d pending pod(s) to be placed first", rn.Batch, placeable)
		} else {
			r.Summary.StartingNow++
			removed.Insert(c.Node.Name)
		}
		r.Remove = append(r.Remove, rn)
	}
	for _, nc := range plan.Replacements {
		r.Launch = append(r.Launch, Replacement{Name: nc.Name, PlannedNodeClaim: plannedNodeClaim(nc), Batch: replacementBatch[nc]})
	}
	for _, m := range plan.Moves {
		r.PodsMoved = append(r.PodsMoved, PodMove{Pod: m.Pod.Namespace + "/" + m.Pod.Name, From: m.From, To: m.To, NotRecreated: m.NotRecreated})
		if m.NotRecreated {
			r.Summary.PodsNotRecreated++
		}
	}
	if n := r.Summary.PodsNotRecreated; n > 0 {
		r.Warnings = append(r.Warnings, fmt.Sprintf("%d pod(s) on removed nodes have no controller (no ownerReference with controller: true): they are evicted like any other pod, as Karpenter does, and not recreated; listed under NOT RECREATED. Give them a controller, or annotate them %s=true to keep their node", n, v1.DoNotDisruptAnnotationKey))
	}
	r.Kept = kept(view, cl, heldBy, removed)
	unmanaged := 0
	for _, k := range r.Kept {
		if k.NodeClaim == "" {
			unmanaged++
		}
	}
	s := &r.Summary
	s.UnmanagedNodes = unmanaged
	s.PlaceablePending = placeable
	if placeable > 0 {
		r.Warnings = append(r.Warnings, fmt.Sprintf("%d pending pod(s) can be placed: the controller places them before it consolidates, so nothing starts until they are (offline, a pod already nominated to a launching NodeClaim looks pending too)", placeable))
	}
	s.NodesBefore = len(view.Claims) + unmanaged
	s.NodesAfter = s.NodesBefore - len(plan.Remove) + len(plan.Replacements)
	s.SavingsPerHour = round(plan.Savings())
	s.PricePerHourAfter = round(s.PricePerHourBefore - plan.Savings())
	s.PricePerHourBefore = round(s.PricePerHourBefore)
	return r
}

// viewOf turns the inputs into the view the controller would read, refusing what
// no cluster could hold (two objects of one name) and noting what consolidation
// will not act on.
func viewOf(in *Inputs) (*state.View, error) {
	nodes := make([]corev1.Node, 0, len(in.Nodes))
	seen := sets.New[string]()
	for _, n := range in.Nodes {
		if seen.Has(n.Name) {
			return nil, fmt.Errorf("two Nodes are named %s; Node names must be unique", n.Name)
		}
		seen.Insert(n.Name)
		nodes = append(nodes, *n)
	}
	// Consolidation follows pods by UID; pods written by hand may lack one.
	pods := make([]corev1.Pod, 0, len(in.BoundPods)+len(in.Pods))
	seen = sets.New[string]()
	uids := sets.New[types.UID]()
	for _, p := range append(append([]*corev1.Pod(nil), in.BoundPods...), in.Pods...) {
		name := p.Namespace + "/" + p.Name
		if seen.Has(name) {
			return nil, fmt.Errorf("two Pods are named %s; pod names must be unique in their namespace", name)
		}
		seen.Insert(name)
		pod := *p
		if pod.UID == "" {
			pod.UID = types.UID("simulate:" + name)
		}
		if uids.Has(pod.UID) {
			return nil, fmt.Errorf("pod %s has metadata.uid %s, which another pod has too; remove the uid or make it unique", name, pod.UID)
		}
		uids.Insert(pod.UID)
		pods = append(pods, pod)
	}
	claims := make([]v1.NodeClaim, len(in.NodeClaims))
	for i, nc := range in.NodeClaims {
		claims[i] = *nc
	}
	pools := make([]v1.NodePool, len(in.NodePools))
	for i, np := range in.NodePools {
		pools[i] = *np
	}
	pdbs := make([]policyv1.PodDisruptionBudget, len(in.PDBs))
	for i, pdb := range in.PDBs {
		pdbs[i] = *pdb
	}
	ds := make([]appsv1.DaemonSet, len(in.DaemonSets))
	for i, d := range in.DaemonSets {
		ds[i] = *d
	}
	view := state.NewView(pods, nodes, claims, pools, pdbs, ds)
	// Pods stay with their volumes, as in the cluster.
	view.PVCs, view.PVs, view.StorageClasses, view.CSINodes = in.Claims, in.Volumes, in.StorageClasses, in.CSINodes
	view.ApplyDefaultSpread(in.DefaultSpread, defaultspread.Workloads{Services: in.Services, ReplicaSets: in.ReplicaSets, StatefulSets: in.StatefulSets, ReplicationControllers: in.ReplicationControllers})
	return view, nil
}

// viewWarnings notes the objects consolidation reads differently than a user may
// expect: claims not launched yet, nodes no NodePool manages.
func viewWarnings(view *state.View) []string {
	var warnings []string
	for i := range view.Claims {
		nc := &view.Claims[i]
		if view.NodeOf(nc) == nil && nc.DeletionTimestamp == nil {
			warnings = append(warnings, fmt.Sprintf("NodeClaim %s: not launched yet (no status.providerID, or no Node with that spec.providerID); counted as capacity in flight", nc.Name))
		}
	}
	for i := range view.Nodes {
		if view.ClaimOf(view.Nodes[i].Name) == nil {
			warnings = append(warnings, fmt.Sprintf("Node %s: not managed by a NodePool (no NodeClaim has its spec.providerID); kept, its free room is used", view.Nodes[i].Name))
		}
	}
	return warnings
}

// kept says why each node that is not removed now stays: the plan's reason for a
// candidate, and for the rest what keeps them from being candidates at all.
func kept(view *state.View, cl *consolidation.Cluster, heldBy map[*consolidation.Candidate]string, removed sets.Set[string]) []KeptNode {
	candidate := map[string]*consolidation.Candidate{}
	for _, c := range cl.Candidates {
		candidate[c.Node.Name] = c
	}
	pools := map[string]*v1.NodePool{}
	for i := range view.Pools {
		pools[view.Pools[i].Name] = &view.Pools[i]
	}
	ready := sets.New[string]()
	for _, np := range cl.Snapshot.Pools {
		ready.Insert(np.Name)
	}
	out := []KeptNode{}
	for i := range view.Nodes {
		n := &view.Nodes[i]
		if removed.Has(n.Name) {
			continue
		}
		k := KeptNode{Node: n.Name}
		nc := view.ClaimOf(n.Name)
		if nc == nil {
			k.Reason = "not managed by a NodePool; kept, its free room is used"
			out = append(out, k)
			continue
		}
		k.NodeClaim, k.NodePool = nc.Name, nc.Labels[v1.LabelNodePool]
		if c, ok := candidate[n.Name]; ok {
			k.Reason = heldBy[c]
			if k.Reason == "" {
				k.Reason = "kept by the plan"
			}
			out = append(out, k)
			continue
		}
		switch {
		case nc.DeletionTimestamp != nil || n.DeletionTimestamp != nil:
			k.Reason = "being deleted already"
		case state.HasTaint(n, v1.DisruptedNoScheduleTaint):
			k.Reason = fmt.Sprintf("being disrupted already (%s taint); its pods are placed before anything else", v1.DisruptedNoScheduleTaint.Key)
		case pools[k.NodePool] == nil:
			k.Reason = fmt.Sprintf("its nodepool %q is not in the snapshot; add the NodePool to the file", k.NodePool)
		case !ready.Has(k.NodePool):
			k.Reason = fmt.Sprintf("nodepool %s is not ready (status.conditions Ready is False) or is being deleted", k.NodePool)
		case !meta.IsStatusConditionTrue(nc.Status.Conditions, v1.ConditionTypeInitialized):
			k.Reason = fmt.Sprintf("NodeClaim %s has not initialized yet (no Initialized condition with status True)", nc.Name)
		default:
			k.Reason = "not a consolidation candidate"
		}
		out = append(out, k)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Node < out[j].Node })
	return out
}

// zonesNotOffered are the claims' zones that no catalog offering is in, sorted.
func zonesNotOffered(claims []v1.NodeClaim, instanceTypes []*scheduling.InstanceType) []string {
	offered := sets.New[string]()
	for _, it := range instanceTypes {
		for _, o := range it.Offerings {
			offered.Insert(o.Zone)
		}
	}
	missing := sets.New[string]()
	for i := range claims {
		if z := claims[i].Labels[v1.LabelTopologyZone]; z != "" && !offered.Has(z) {
			missing.Insert(z)
		}
	}
	return sets.List(missing)
}

// batchLabel names a batch by its reason and, for consolidation, its type.
func batchLabel(b *consolidation.Batch) string {
	label := string(b.Reason)
	if b.Type != consolidation.TypeEmpty {
		label += "/" + b.Type
	}
	if len(b.Awaits) > 0 {
		label += " after " + strings.Join(b.Awaits, ", ") + " initialize"
	}
	return label
}

// WriteJSON prints the report as JSON.
func (r *ConsolidationReport) WriteJSON(w io.Writer) error { return writeJSON(w, r) }

// WriteTable prints the report for people: each section its own table, so that
// long node names in one do not widen the others.
func (r *ConsolidationReport) WriteTable(w io.Writer) error {
	spot := "off"
	if r.SpotToSpot {
		spot = "on"
	}
	fmt.Fprintf(w, "Consolidation at %s (drift is not evaluated offline; spot-to-spot %s)\n\n", r.Now.UTC().Format(time.RFC3339), spot)
	if err := writeOverlays(w, r.Overlays); err != nil {
		return err
	}
	s := r.Summary
	nodes := fmt.Sprintf("%d -> %d (remove %d, launch %d)", s.NodesBefore, s.NodesAfter, len(r.Remove), len(r.Launch))
	if s.UnmanagedNodes > 0 {
		nodes += fmt.Sprintf("; %d not managed by a NodePool", s.UnmanagedNodes)
	}
	price := fmt.Sprintf("$%.4f -> $%.4f, saves $%.4f", s.PricePerHourBefore, s.PricePerHourAfter, s.SavingsPerHour)
	if s.UnknownPrice > 0 {
		price += fmt.Sprintf(" (%d node(s) of unknown price left out)", s.UnknownPrice)
	}
	starting := fmt.Sprintf("%d of %d removal(s); %d held by budget", s.StartingNow, len(r.Remove), s.HeldByBudget)
	if s.PlaceablePending > 0 {
		starting += fmt.Sprintf("; the rest wait for %d pending pod(s) to be placed first", s.PlaceablePending)
	}
	rows := [][]string{
		{"nodes", nodes},
		{"$/hour", price},
		{"starting now", starting},
	}
	if s.PodsNotRecreated > 0 {
		rows = append(rows, []string{"not recreated", fmt.Sprintf("%d evicted pod(s) have no controller and will not come back", s.PodsNotRecreated)})
	}
	if err := writeSection(w, "SUMMARY", nil, rows); err != nil {
		return err
	}
	if len(r.Remove) > 0 {
		rows = rows[:0]
		for _, n := range r.Remove {
			price := "unknown"
			if n.PricePerHour != nil {
				price = fmt.Sprintf("%.4f", *n.PricePerHour)
			}
			starts := r.starts(n.Batch)
			rows = append(rows, []string{n.Node, n.NodeClaim, n.NodePool, n.InstanceType, price, fmt.Sprint(len(n.Pods)), starts})
		}
		if err := writeSection(w, "REMOVE", []string{"NODE", "NODECLAIM", "NODEPOOL", "INSTANCE TYPE", "$/HOUR", "PODS", "STARTS"}, rows); err != nil {
			return err
		}
	}
	if len(r.Launch) > 0 {
		rows = rows[:0]
		for _, nc := range r.Launch {
			starts := r.starts(nc.Batch)
			rows = append(rows, []string{nc.Name, nc.NodePool, nc.InstanceType, nc.Zone, nc.CapacityType, fmt.Sprintf("%.4f", nc.PricePerHour),
				fmt.Sprint(nc.InstanceTypeOptions), fmt.Sprint(len(nc.Pods)), starts})
		}
		if err := writeSection(w, "LAUNCH", []string{"NAME", "NODEPOOL", "INSTANCE TYPE", "ZONE", "CAPACITY", "$/HOUR", "OPTIONS", "PODS", "STARTS"}, rows); err != nil {
			return err
		}
	}
	if len(r.PodsMoved) > 0 {
		rows = rows[:0]
		for _, g := range groupMoves(r.PodsMoved) {
			rows = append(rows, []string{g.from, g.to, summarize(g.pods)})
		}
		if err := writeSection(w, "PODS MOVED", []string{"FROM", "TO", "PODS"}, rows); err != nil {
			return err
		}
	}
	if r.Summary.PodsNotRecreated > 0 {
		rows = rows[:0]
		batchOf := map[string]string{}
		for _, n := range r.Remove {
			batchOf[n.Node] = n.Batch
		}
		for _, m := range r.PodsMoved {
			if m.NotRecreated {
				rows = append(rows, []string{m.Pod, m.From, r.starts(batchOf[m.From])})
			}
		}
		if err := writeSection(w, "NOT RECREATED (evicted, no controller)", []string{"POD", "NODE", "STARTS"}, rows); err != nil {
			return err
		}
	}
	if len(r.Scores) > 0 {
		rows = rows[:0]
		for _, m := range r.Scores {
			decision := "approved"
			if !m.Approved {
				decision = "rejected"
			}
			rows = append(rows, []string{m.NodePool, summarize(m.Nodes), fmt.Sprintf("%.2f", m.Score), fmt.Sprintf("%.1f%%", m.SavingsPercent), fmt.Sprintf("%.1f%%", m.DisruptionPercent), decision})
		}
		if err := writeSection(w, fmt.Sprintf("BALANCED SCORES (approved at %.2f and above)", 1.0/consolidation.BalancedK), []string{"NODEPOOL", "NODES", "SCORE", "SAVINGS", "DISRUPTION", "DECISION"}, rows); err != nil {
			return err
		}
	}
	if len(r.Kept) > 0 {
		fmt.Fprintln(w, "KEPT")
		for _, k := range r.Kept {
			fmt.Fprintf(w, "  %s: %s\n", k.Node, k.Reason)
		}
	}
	return nil
}

// starts says when a removal or launch of the batch starts.
func (r *ConsolidationReport) starts(batch string) string {
	switch {
	case batch == "":
		return "held by budget"
	case r.Summary.PlaceablePending > 0:
		return "after pending pods: " + batch
	}
	return "now: " + batch
}

// writeSection prints a title, then the rows aligned under the header (if any),
// then a blank line.
func writeSection(w io.Writer, title string, header []string, rows [][]string) error {
	fmt.Fprintln(w, title)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	if header != nil {
		fmt.Fprintln(tw, strings.Join(header, "\t"))
	}
	for _, row := range rows {
		fmt.Fprintln(tw, strings.Join(row, "\t"))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintln(w)
	return err
}

type moveGroup struct {
	from, to string
	pods     []string
}

// groupMoves gathers the moves by source and destination, in the plan's order,
// so that a node's pods going to one place take one line.
func groupMoves(moves []PodMove) []*moveGroup {
	var out []*moveGroup
	index := map[[2]string]*moveGroup{}
	for _, m := range moves {
		key := [2]string{m.From, m.To}
		g, ok := index[key]
		if !ok {
			g = &moveGroup{from: m.From, to: m.To}
			index[key] = g
			out = append(out, g)
		}
		g.pods = append(g.pods, m.Pod)
	}
	for _, g := range out {
		sort.Strings(g.pods)
	}
	return out
}
