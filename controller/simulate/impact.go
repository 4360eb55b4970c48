package simulate

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/sets"

	awsv1 "github.com/dovetail-sh/dovetail/controller/apis/aws/v1"
	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/controller/buffer"
	"github.com/dovetail-sh/dovetail/controller/capacitymix"
	"github.com/dovetail-sh/dovetail/controller/catalog"
	"github.com/dovetail-sh/dovetail/controller/consolidation"
	"github.com/dovetail-sh/dovetail/controller/operator/settings"
	"github.com/dovetail-sh/dovetail/controller/scheduling"
	"github.com/dovetail-sh/dovetail/controller/state"
	"github.com/dovetail-sh/dovetail/controller/staticpool"
)

// WavePace is what a plan impact assumes one wave of drift replacement takes:
// launching and initializing the replacements, then draining the drifted nodes.
// It is an estimate, and says so.
const WavePace = 3 * time.Minute

// Change is a NodePool or an EC2NodeClass as a plan would apply it.
type Change struct {
	NodePool     *v1.NodePool
	EC2NodeClass *awsv1.EC2NodeClass
	// RemovedAnnotations are the annotations the change takes off the object
	// (those it sets are on it); the others stay as they are.
	RemovedAnnotations []string
}

// Impact is what applying a change to a live cluster would do to its fleet, as
// the controller's own drift and planning code decides it.
type Impact struct {
	// Nodes are the claims the changed object governs.
	Nodes int `json:"nodes"`
	// Drifted are the claims the change drifts, with why; InPlace the ones whose
	// labels and annotations are updated in place.
	Drifted []DriftedClaim `json:"drifted"`
	InPlace []string       `json:"inPlace"`
	// Waves is how many rounds the disruption budgets pace the replacement in
	// (0: nothing is replaced; -1: the budgets allow none now), at most PerWave each.
	Waves   int `json:"waves"`
	PerWave int `json:"perWave"`
	// EstimatedDuration is Waves × WavePace.
	EstimatedDuration time.Duration `json:"estimatedDuration"`
	// PricePerHourBefore and After are what the nodes the change governs cost
	// now and once the drifted ones are replaced, commitments applied.
	PricePerHourBefore float64 `json:"pricePerHourBefore"`
	PricePerHourAfter  float64 `json:"pricePerHourAfter"`
	// Unplaced are the drifted nodes' pods the changed object leaves nowhere to go.
	Unplaced []Unschedulable `json:"unplaced"`
	// Replacements are the drifted claims' replacements as the waves launch them,
	// by instance type (the cheapest option), zone and capacity type.
	Replacements []PlannedNodeClaim `json:"replacements"`
	// CapacityMix is the changed pool's spot/on-demand mix before and after, when
	// it states one either way.
	CapacityMix *MixImpact `json:"capacityMix,omitempty"`
}

// DriftedClaim is a claim a change drifts.
type DriftedClaim struct {
	NodeClaim string `json:"nodeClaim"`
	Node      string `json:"node"`
	Reason    string `json:"reason"`
	// Waits says why the controller does not replace it (a pod or PDB blocks its
	// node, or its pool's drifted nodes' pods would have no place); "" when a wave
	// replaces it.
	Waits string `json:"waits,omitempty"`
}

// PlanImpact says what applying the change to the cluster in the snapshot would
// do: which claims drift and why (the pool hash, unless only the template's
// labels and annotations changed, which apply in place; the requirements; the
// node class hash), how the pools' budgets for Drifted pace their replacement,
// and the $/h of the affected nodes before and after, their pods planned under
// the change as the engine would.
func PlanImpact(in *Inputs, cat *catalog.File, ctl *settings.Options, now time.Time, change Change) (*Impact, error) {
	changed := *in
	changed.NodePools = slices.Clone(in.NodePools)
	var governs func(nc *v1.NodeClaim) bool
	var driftOf func(nc *v1.NodeClaim, node *corev1.Node) (reason string, inPlace bool)
	switch {
	case change.NodePool != nil:
		np := change.NodePool
		i := slices.IndexFunc(changed.NodePools, func(p *v1.NodePool) bool { return p.Name == np.Name })
		if i < 0 {
			return nil, fmt.Errorf("nodepool %s is not in the cluster", np.Name)
		}
		changed.NodePools[i] = withStatus(np, changed.NodePools[i], change.RemovedAnnotations)
		governs = func(nc *v1.NodeClaim) bool { return nc.Labels[v1.LabelNodePool] == np.Name }
		driftOf = func(nc *v1.NodeClaim, node *corev1.Node) (string, bool) {
			return consolidation.PoolDrift(np, nc, node, ctl.DriftOnMetadata)
		}
	case change.EC2NodeClass != nil:
		class := change.EC2NodeClass
		changed.NodeClasses = slices.Clone(in.NodeClasses)
		var live *awsv1.EC2NodeClass
		if i := slices.IndexFunc(changed.NodeClasses, func(c *awsv1.EC2NodeClass) bool { return c.Name == class.Name }); i >= 0 {
			live, changed.NodeClasses[i] = changed.NodeClasses[i], class
		}
		selectors := selectorChange(live, class)
		governs = func(nc *v1.NodeClaim) bool {
			return nc.Spec.NodeClassRef != nil && nc.Spec.NodeClassRef.Kind == "EC2NodeClass" && nc.Spec.NodeClassRef.Name == class.Name
		}
		driftOf = func(nc *v1.NodeClaim, _ *corev1.Node) (string, bool) {
			if h, ok := nc.Annotations[awsv1.AnnotationEC2NodeClassHash]; ok && nc.Annotations[awsv1.AnnotationEC2NodeClassHashVersion] == awsv1.EC2NodeClassHashVersion && h != class.Hash() {
				return "NodeClassDrift", false
			}
			return selectors, false
		}
	default:
		return nil, fmt.Errorf("no change to plan")
	}

	p, err := prepare(&changed, cat, ctl)
	if err != nil {
		return nil, err
	}
	view, snap := p.view, p.snap
	cl := consolidation.Observe(view, snap, sets.New[string](), now)
	// The pods of nodes already being disrupted move anyway; the buffers' pods keep
	// their room through every move.
	disrupted := slices.Clone(cl.Moving)
	cl.Moving = append(cl.Moving, p.virtual...)
	allowed, _ := cl.Allowed(now)
	prices := snap.NodePrices()

	impact := &Impact{Drifted: []DriftedClaim{}, InPlace: []string{}, Unplaced: []Unschedulable{}, Replacements: []PlannedNodeClaim{}}
	var drifting []driftingClaim
	for i := range view.Claims {
		nc := &view.Claims[i]
		if nc.DeletionTimestamp != nil || !governs(nc) {
			continue
		}
		impact.Nodes++
		node := view.NodeOf(nc)
		name := nc.Name
		if node != nil {
			name = node.Name
		}
		price, ok := prices[name]
		if !ok {
			price = consolidation.Price(snap.InstanceTypes[nc.Labels[v1.LabelNodePool]], nc.Labels[v1.LabelInstanceType], nc.Labels[v1.LabelTopologyZone], nc.Labels[v1.LabelCapacityType])
		}
		if !math.IsNaN(price) {
			impact.PricePerHourBefore += price
		}
		if state.Disrupting(nc, node) || (node != nil && node.DeletionTimestamp != nil) {
			// Already being replaced (or its Node deleted): it goes whatever the change,
			// and consolidation.Observe has its pods moving already.
			continue
		}
		reason, inPlace := driftOf(nc, node)
		switch {
		case inPlace:
			impact.InPlace = append(impact.InPlace, nc.Name)
		case reason != "":
			impact.Drifted = append(impact.Drifted, DriftedClaim{NodeClaim: nc.Name, Node: name, Reason: reason})
			d := driftingClaim{claim: nc.Name, node: name, pool: nc.Labels[v1.LabelNodePool], price: price}
			if node != nil {
				d.pods = consolidation.Reschedulable(view.PodsOn(node.Name))
			}
			drifting = append(drifting, d)
		}
	}
	impact.PricePerHourAfter = impact.PricePerHourBefore
	mixCounts := mixCountsWithout(view.Claims, nil)
	if len(drifting) > 0 {
		static := map[string]staticDrift{}
		for _, np := range changed.NodePools {
			if np.Spec.Replicas == nil {
				continue
			}
			st := staticDrift{np: np, types: p.typesOf(np), disrupting: cl.Disrupting[np.Name]}
			for i := range view.Claims {
				if view.Claims[i].Labels[v1.LabelNodePool] == np.Name {
					st.claims++
				}
			}
			static[np.Name] = st
		}
		done := replaceInWaves(snap, cl, slices.Clone(drifting), allowed, disrupted, p.virtual, static)
		perPool := map[string]int{}
		replaced := sets.New[string]()
		for i, d := range drifting {
			if why, waits := done.waits[d.claim]; waits {
				impact.Drifted[i].Waits = why
				continue
			}
			perPool[d.pool]++
			replaced.Insert(d.claim)
			if !math.IsNaN(d.price) {
				impact.PricePerHourAfter -= d.price
			}
		}
		mixCounts = mixCountsWithout(view.Claims, replaced)
		holdMixes(done.replacements, changed.NodePools, mixCounts)
		for _, nc := range done.replacements {
			impact.PricePerHourAfter += nc.Offering.Price
			impact.Replacements = append(impact.Replacements, plannedNodeClaim(nc))
		}
		for _, u := range done.unplaced {
			impact.Unplaced = append(impact.Unplaced, Unschedulable{Pod: u.Pod.Namespace + "/" + u.Pod.Name, Reason: u.Reason})
		}
		impact.Waves, impact.PerWave = waves(perPool, allowed)
		if impact.Waves > 0 {
			impact.EstimatedDuration = time.Duration(impact.Waves) * WavePace
		}
	}
	if change.NodePool != nil {
		impact.CapacityMix = mixImpact(in.NodePools, changed.NodePools, change.NodePool.Name, capacitymix.CountPool(view.Claims, change.NodePool.Name), mixCounts[change.NodePool.Name])
	}
	impact.PricePerHourBefore, impact.PricePerHourAfter = round(impact.PricePerHourBefore), round(impact.PricePerHourAfter)
	return impact, nil
}

// driftingClaim is a claim a change drifts: its node's name (the claim's when it
// has none yet), its pool, its $/h, and the pods its drain moves.
type driftingClaim struct {
	claim, node, pool string
	price             float64
	pods              []*corev1.Pod
}

// replaced is what the waves do with the drifted claims: the replacements they
// launch, the pods a command could not place, and the claims the controller
// leaves waiting, with why.
type replaced struct {
	replacements []*scheduling.NodeClaimPlan
	unplaced     []scheduling.PodError
	waits        map[string]string
}

// staticDrift is what the controller replaces a static pool's drifted nodes by:
// its template (types are the pool's), its claims and those being disrupted.
type staticDrift struct {
	np                 *v1.NodePool
	types              []*scheduling.InstanceType
	claims, disrupting int
}

// replaceInWaves plans the drifted claims' replacements as the disruption
// controller makes them: a command at a time, one pool's next claims in the
// controller's candidate order as many as its budget for Drifted allows (one
// when it allows none now: the replacement is then only later), pools taking
// turns, each command's pods placed beside the nodes that stay and the earlier
// commands' replacements, after the pods of nodes already being disrupted, and
// each command's replacements charged to its pool's limits. A static pool's
// command replaces its nodes one for one from its template, within limits.nodes,
// as the controller's StaticDrift does. A claim whose node a pod or PDB blocks
// waits, as the controller skips it; a command whose pods would have no place is
// not taken, and is tried again after other pools' commands (their replacements
// may give the pods room), as the controller tries it every pass; its claims wait
// once no pool's command can be taken.
func replaceInWaves(snap *scheduling.Snapshot, cl *consolidation.Cluster, drifting []driftingClaim, allowed map[string]map[v1.DisruptionReason]int, disrupted, virtual []*corev1.Pod, static map[string]staticDrift) replaced {
	out := replaced{waits: map[string]string{}}
	rank := map[string]int{}
	for i, c := range cl.Candidates {
		rank[c.Claim.Name] = i
		if c.BlockedBy != "" {
			out.waits[c.Claim.Name] = c.BlockedBy
		}
	}
	order := func(d driftingClaim) int {
		if r, ok := rank[d.claim]; ok {
			return r
		}
		return len(rank)
	}
	slices.SortStableFunc(drifting, func(a, b driftingClaim) int { return order(a) - order(b) })
	queue := map[string][]driftingClaim{}
	var pools []string
	for _, d := range drifting {
		if _, blocked := out.waits[d.claim]; blocked {
			continue
		}
		if _, ok := queue[d.pool]; !ok {
			pools = append(pools, d.pool)
		}
		queue[d.pool] = append(queue[d.pool], d)
	}
	nodes := slices.Clone(snap.Nodes)
	gone := sets.New[string]()
	// The pools' usage as each command leaves it: the claims replaced are taken out
	// by the plan (they are in gone), their replacements are added here.
	onward := *snap
	onward.PoolUsage = maps.Clone(snap.PoolUsage)
	movedOnto := map[string][]*corev1.Pod{}
	// try places pods, with the buffers' (planned every time, as the controller
	// keeps their room, and bound nowhere), as if the claims were gone and the
	// static replacements launched.
	try := func(claims []driftingClaim, pods []*corev1.Pod, launched []*scheduling.ExistingNode) (*scheduling.Results, sets.Set[string]) {
		without := gone.Clone()
		for _, d := range claims {
			without.Insert(d.claim, d.node)
		}
		on := slices.DeleteFunc(slices.Clone(nodes), func(n *scheduling.ExistingNode) bool { return without.Has(n.Name) })
		return onward.PlanOn(append(on, launched...), without, append(pods, virtual...), true), without
	}
	charge := func(nc *scheduling.NodeClaimPlan) {
		if onward.PoolUsage != nil {
			u := onward.PoolUsage[nc.NodePool]
			u.Resources, u.Nodes = u.Resources.Add(nc.InstanceType.Capacity), u.Nodes+1
			onward.PoolUsage[nc.NodePool] = u
		}
	}
	// take makes a plan what happened: the static replacements launched, the pods
	// bound where they went, for the commands after, and the plan's claims launched.
	take := func(name string, r *scheduling.Results, without sets.Set[string], launched []*scheduling.ExistingNode) {
		gone = without
		nodes = append(slices.DeleteFunc(nodes, func(n *scheduling.ExistingNode) bool { return gone.Has(n.Name) }), launched...)
		for _, e := range r.Existing {
			bound := unbuffered(e.Pods)
			movedOnto[e.Node.Name] = append(movedOnto[e.Node.Name], bound...)
			if i := slices.IndexFunc(nodes, func(n *scheduling.ExistingNode) bool { return n.Name == e.Node.Name }); i >= 0 {
				placed := *nodes[i]
				placed.Pods = append(slices.Clone(placed.Pods), bound...)
				nodes[i] = &placed
			}
		}
		for i, nc := range r.NodeClaims {
			launched := nc.Launched(fmt.Sprintf("%s-%d", name, i+1))
			launched.Pods = unbuffered(launched.Pods)
			nodes = append(nodes, launched)
			charge(nc)
		}
	}
	// The pods of nodes already being disrupted go first, as the controller places
	// them before anything else; what that takes is not the change's.
	if len(disrupted) > 0 {
		r, without := try(nil, slices.Clone(disrupted), nil)
		take("moved", r, without, nil)
	}
	// stranded is each pool's last refused command's pods without a place.
	stranded := map[string][]scheduling.PodError{}
	for wave := 1; ; wave++ {
		took := false
		for _, pool := range pools {
			if len(queue[pool]) == 0 {
				continue
			}
			n := min(max(allowed[pool][v1.DisruptionReasonDrifted], 1), len(queue[pool]))
			var templates []*scheduling.NodeClaimPlan
			var launched []*scheduling.ExistingNode
			if st, ok := static[pool]; ok {
				room, wait := staticpool.DriftRoom(st.np, st.claims, st.disrupting, n)
				var plan *scheduling.NodeClaimPlan
				if wait == "" {
					var err error
					if plan, err = scheduling.TemplatePlan(st.np, st.types); err != nil {
						wait = err.Error()
					}
				}
				if wait != "" {
					for _, d := range queue[pool] {
						out.waits[d.claim] = "its static pool's drifted nodes wait: " + wait
					}
					queue[pool] = nil
					continue
				}
				n = room
				for i := range n {
					p := *plan
					templates = append(templates, &p)
					launched = append(launched, p.Launched(fmt.Sprintf("replacement-%d-%s-static-%d", wave, pool, i+1)))
				}
			}
			command := queue[pool][:n]
			var pods []*corev1.Pod
			for _, d := range command {
				// Its own pods, and those an earlier command moved onto it.
				pods = append(append(pods, d.pods...), movedOnto[d.node]...)
			}
			r, without := try(command, pods, launched)
			var unplaced []scheduling.PodError
			for _, u := range r.Unschedulable {
				if !buffer.IsVirtual(u.Pod) {
					unplaced = append(unplaced, u)
				}
			}
			if _, ok := static[pool]; ok {
				// The static controller replaces without asking where the pods go:
				// those with no place are pending after the drain.
				out.unplaced = append(out.unplaced, unplaced...)
			} else if len(unplaced) > 0 {
				stranded[pool] = unplaced
				continue
			}
			delete(stranded, pool)
			for _, t := range templates {
				charge(t)
			}
			take(fmt.Sprintf("replacement-%d-%s", wave, pool), r, without, launched)
			out.replacements = append(append(out.replacements, templates...), r.NodeClaims...)
			queue[pool] = queue[pool][n:]
			took = true
		}
		if !took {
			// Nothing moves any more: what is left waits, its pods named.
			for _, pool := range pools {
				if len(queue[pool]) == 0 {
					continue
				}
				out.unplaced = append(out.unplaced, stranded[pool]...)
				for _, d := range queue[pool] {
					out.waits[d.claim] = "its pool's drifted nodes wait: their pods would have no place (" + stranded[pool][0].Reason + ")"
				}
			}
			return out
		}
	}
}

// unbuffered are the pods that are not a buffer's.
func unbuffered(pods []*corev1.Pod) []*corev1.Pod {
	return slices.DeleteFunc(slices.Clone(pods), buffer.IsVirtual)
}

// selectorChange names the drift a class's changed selector terms would cause:
// what they select is resolved after apply (a new AMI, other subnets or security
// groups), and the controller drifts every node that no longer matches. "" when
// they are unchanged, or the live class is unknown.
func selectorChange(live, planned *awsv1.EC2NodeClass) string {
	if live == nil {
		return ""
	}
	switch {
	case !equality.Semantic.DeepEqual(live.Spec.AMISelectorTerms, planned.Spec.AMISelectorTerms):
		return "AMIDrift (new amiSelectorTerms, resolved after apply)"
	case !equality.Semantic.DeepEqual(live.Spec.SubnetSelectorTerms, planned.Spec.SubnetSelectorTerms):
		return "SubnetDrift (new subnetSelectorTerms, if the nodes' subnets are no longer selected)"
	case !equality.Semantic.DeepEqual(live.Spec.SecurityGroupSelectorTerms, planned.Spec.SecurityGroupSelectorTerms):
		return "SecurityGroupDrift (new securityGroupSelectorTerms, resolved after apply)"
	}
	return ""
}

// withStatus is the planned pool with the live one's status and metadata: the
// controller plans with a pool once it is Ready, and a spec change does not reset
// that. Of the annotations, the planned ones are set and the removed ones go,
// as an apply does; the others stay.
func withStatus(planned, live *v1.NodePool, removed []string) *v1.NodePool {
	out := planned.DeepCopy()
	out.Status = *live.Status.DeepCopy()
	out.ObjectMeta = *live.ObjectMeta.DeepCopy()
	for _, k := range removed {
		delete(out.Annotations, k)
	}
	for k, v := range planned.Annotations {
		if out.Annotations == nil {
			out.Annotations = map[string]string{}
		}
		out.Annotations[k] = v
	}
	return out
}

// waves is how many rounds the budgets for Drifted replace the drifted claims
// in: each pool replaces at most what its budget allows at once, pools side by
// side. -1 when some pool's budget allows none now.
func waves(perPool map[string]int, allowed map[string]map[v1.DisruptionReason]int) (rounds, perWave int) {
	for pool, n := range perPool {
		a := allowed[pool][v1.DisruptionReasonDrifted]
		if a <= 0 {
			return -1, 0
		}
		rounds = max(rounds, (n+a-1)/a)
		perWave += min(a, n)
	}
	return rounds, perWave
}

// String is the impact as the plan's warning says it.
func (i *Impact) String() string {
	var b strings.Builder
	var waiting []DriftedClaim
	for _, d := range i.Drifted {
		if d.Waits != "" {
			waiting = append(waiting, d)
		}
	}
	switch {
	case len(i.Drifted) == 0 && len(i.InPlace) == 0:
		fmt.Fprintf(&b, "No node of the %d it governs drifts or changes.", i.Nodes)
	case len(waiting) > 0:
		fmt.Fprintf(&b, "Of %d node(s): %d drift, of which %d are replaced and %d wait; %d are updated in place (labels and annotations).", i.Nodes, len(i.Drifted), len(i.Drifted)-len(waiting), len(waiting), len(i.InPlace))
		more := ""
		if len(waiting) > 1 {
			more = fmt.Sprintf(" (and %d more)", len(waiting)-1)
		}
		fmt.Fprintf(&b, "\nWaiting: the controller does not replace %s now: %s%s.", waiting[0].Node, waiting[0].Waits, more)
	default:
		fmt.Fprintf(&b, "Of %d node(s): %d drift and are replaced, %d are updated in place (labels and annotations).", i.Nodes, len(i.Drifted), len(i.InPlace))
	}
	if len(i.Drifted) > 0 {
		reasons := map[string]int{}
		for _, d := range i.Drifted {
			reasons[d.Reason]++
		}
		var parts []string
		for _, r := range slices.Sorted(maps.Keys(reasons)) {
			parts = append(parts, fmt.Sprintf("%d %s", reasons[r], r))
		}
		fmt.Fprintf(&b, "\nDrift: %s.", strings.Join(parts, ", "))
		switch {
		case len(waiting) == len(i.Drifted):
		case i.Waves < 0:
			b.WriteString("\nPacing: the NodePool's disruption budgets allow no drift replacement now; it waits for a budget window.")
		default:
			fmt.Fprintf(&b, "\nPacing: %d wave(s) of up to %d node(s) under the disruption budgets, about %s (estimated at %s per wave).", i.Waves, i.PerWave, i.EstimatedDuration, WavePace)
		}
	}
	if len(i.Replacements) > 0 {
		counts := map[string]int{}
		for _, r := range i.Replacements {
			counts[fmt.Sprintf("%s (%s, %s)", r.InstanceType, r.CapacityType, r.Zone)]++
		}
		var parts []string
		for _, k := range slices.Sorted(maps.Keys(counts)) {
			parts = append(parts, fmt.Sprintf("%d %s", counts[k], k))
		}
		fmt.Fprintf(&b, "\nReplacements: %s.", strings.Join(parts, ", "))
	}
	fmt.Fprintf(&b, "\nCost: $%.4f/h before, $%.4f/h after (%+.4f).", i.PricePerHourBefore, i.PricePerHourAfter, i.PricePerHourAfter-i.PricePerHourBefore)
	if i.CapacityMix != nil {
		b.WriteString("\n" + i.CapacityMix.String())
	}
	if n := len(i.Unplaced); n > 0 {
		fmt.Fprintf(&b, "\nWarning: %d pod(s) of drifted nodes would have nowhere to go, e.g. %s: %s", n, i.Unplaced[0].Pod, i.Unplaced[0].Reason)
	}
	return b.String()
}
