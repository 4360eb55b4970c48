package scheduling

import (
	"math"
	"slices"

	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
)

// NodeCosts are what a node costs beyond its instance's list price, and how much the
// engine will pay to run fewer nodes. Each launched node carries its own root volume
// and (in public subnets) its own IPv4 address, and every node adds API-server load,
// IP addresses, image pulls and blast radius; a plan priced on list price alone
// launches a small node per pod, because the smallest types have the cheapest slot.
type NodeCosts struct {
	// RootVolumePerGiBHour is the root volume's price per GiB-hour; the volume's size
	// is the type's ephemeral-storage capacity (the node class's root volume).
	RootVolumePerGiBHour float64
	// PublicIPv4PerHour is the price of a node's public IPv4 address; 0 for nodes in
	// private subnets.
	PublicIPv4PerHour float64
	// PerNodeHour is the operational cost of one more node, whatever its size.
	PerNodeHour float64
	// FewerNodesTolerance is how much more, as a fraction of the best price per unit
	// of demand, the engine accepts to size a node larger and so launch fewer.
	FewerNodesTolerance float64
}

// DefaultNodeCosts are AWS's: gp3 at $0.08 per GiB-month (730 hours), a public IPv4
// address at $0.005 an hour, $0.005 an hour of operational cost per node, and up to
// 2% more per unit of demand for fewer, larger nodes.
func DefaultNodeCosts() NodeCosts {
	return NodeCosts{RootVolumePerGiBHour: 0.08 / 730, PublicIPv4PerHour: 0.005, PerNodeHour: 0.005, FewerNodesTolerance: 0.02}
}

// PerNode is what one node of the type costs on top of its offering's price.
func (c NodeCosts) PerNode(it *InstanceType) float64 {
	return float64(it.Capacity.EphemeralStorage)/(1<<30)*c.RootVolumePerGiBHour + c.PublicIPv4PerHour + c.PerNodeHour
}

// demandShape is the outstanding demand a new claim is sized for: every unplaced pod
// the claim's pool admits, with the workload that opened the claim singled out,
// because its replicas fill whole slots. Treating all demand as fluid would rate a
// 2-vCPU type by the cpu it has, not by the one 1-cpu pod it actually holds.
type demandShape struct {
	// total is the unplaced requests the pool admits, head included.
	total Resources
	// head is one replica of the opening workload; headCount of them are unplaced,
	// and topology lets at most headPerNode share a node (0: no such limit).
	head        Resources
	headCount   int64
	headPerNode int64
}

// chooseTarget picks the instance type a new claim is sized for. Each option is
// scored by its cost (offering price plus per-node costs) over the share of the
// outstanding demand it would hold: whole replicas of the opening workload, the rest
// of its capacity filled by the remaining demand in proportion. Among the options
// within FewerNodesTolerance of the best score, the one holding the largest share
// wins, so a burst gets few large nodes rather than many small ones at nearly the
// same price; near the end of a solve the cheapest type that holds what is left wins.
// used is what the node already carries (daemonset overhead, pods placed on it). It
// also reports whether some option holds the whole outstanding demand: then the
// choice was bounded by how many pods are left, and more of them could change it.
// cheapest prices an option's offerings (commitments applied).
func chooseTarget(options []*InstanceType, reqs Requirements, used Resources, shape demandShape, costs NodeCosts, cheapest func(*InstanceType, Requirements) (Offering, bool)) (*InstanceType, bool) {
	type scored struct {
		it           *InstanceType
		score, share float64
	}
	all := make([]scored, 0, len(options))
	best := math.Inf(1)
	holdsAll := false
	for _, it := range options {
		o, ok := cheapest(it, reqs)
		if !ok {
			continue
		}
		share := heldShare(it.Allocatable.Sub(used), shape)
		if share <= 0 {
			continue
		}
		holdsAll = holdsAll || share >= 1-1e-9
		score := (o.Price + costs.PerNode(it)) / share
		all = append(all, scored{it, score, share})
		best = min(best, score)
	}
	if len(all) == 0 {
		return options[0], false
	}
	var chosen *scored
	for i := range all {
		s := &all[i]
		if s.score > best*(1+costs.FewerNodesTolerance)+1e-12 {
			continue
		}
		if chosen == nil || s.share > chosen.share+1e-12 || (math.Abs(s.share-chosen.share) <= 1e-12 && s.score < chosen.score) {
			chosen = s
		}
	}
	return chosen.it, holdsAll
}

// target is the type a claim is sized for: chooseTarget's, or when planning
// first-fit decreasing, the largest option.
func (s *solver) target(options []*InstanceType, reqs Requirements, used Resources, shape demandShape) *InstanceType {
	if s.firstFit {
		return largest(options)
	}
	it, _ := chooseTarget(options, reqs, used, shape, s.costs, s.cheapest)
	return it
}

// largest is the option that holds the most: cpu first, then memory.
func largest(options []*InstanceType) *InstanceType {
	best := options[0]
	for _, it := range options[1:] {
		a, b := it.Allocatable, best.Allocatable
		if a.MilliCPU > b.MilliCPU || (a.MilliCPU == b.MilliCPU && a.Memory > b.Memory) {
			best = it
		}
	}
	return best
}

// heldShare estimates the fraction of the demand a node with free capacity holds:
// as many whole head replicas as fit, then the rest of the demand poured into what
// is left, weighing cpu and memory by their share of the total.
func heldShare(free Resources, shape demandShape) float64 {
	value := func(r Resources) float64 {
		v := 0.0
		if shape.total.MilliCPU > 0 {
			v += float64(r.MilliCPU) / float64(shape.total.MilliCPU)
		}
		if shape.total.Memory > 0 {
			v += float64(r.Memory) / float64(shape.total.Memory)
		}
		return v
	}
	whole := value(shape.total)
	if whole <= 0 {
		// Demand of pod slots or extended resources only: any node that holds the
		// pod holds all of it as far as cpu and memory tell.
		if free.Pods > 0 {
			return 1
		}
		return 0
	}
	replicas := int64(0)
	if shape.headCount > 0 {
		most := min(shape.headCount, slots(free, shape.head))
		if shape.headPerNode > 0 {
			most = min(most, shape.headPerNode)
		}
		if most == 0 {
			return 0
		}
		// The node's proportional slice of the demand, with its head replicas
		// rounded down to whole pods: fill takes workloads in the mix that balances
		// the node, not the head's replicas first.
		slice := fraction(free, shape.total)
		replicas = min(most, max(1, int64(math.Floor(slice*float64(shape.headCount)+1e-9))))
	}
	left := free.Sub(shape.head.Times(replicas))
	rest := shape.total.Sub(shape.head.Times(shape.headCount)).atLeastZero()
	fill := fraction(left, rest)
	return (value(shape.head.Times(replicas)) + fill*value(rest)) / whole
}

// fraction is the largest share of want that have holds, at most 1.
func fraction(have, want Resources) float64 {
	f := 1.0
	for _, d := range []struct{ have, want int64 }{
		{have.MilliCPU, want.MilliCPU}, {have.Memory, want.Memory}, {have.Pods, want.Pods},
	} {
		if d.want > 0 {
			f = min(f, max(0, float64(d.have)/float64(d.want)))
		}
	}
	for k, w := range want.Extended {
		if w > 0 {
			f = min(f, max(0, float64(have.Extended[k])/float64(w)))
		}
	}
	return f
}

// slots is how many copies of r fit in free.
func slots(free, r Resources) int64 {
	n := int64(math.MaxInt64)
	for _, d := range []struct{ have, want int64 }{
		{free.MilliCPU, r.MilliCPU}, {free.Memory, r.Memory}, {free.Pods, r.Pods}, {free.EphemeralStorage, r.EphemeralStorage},
	} {
		if d.want > 0 {
			n = min(n, max(0, d.have/d.want))
		}
	}
	for k, want := range r.Extended {
		if want > 0 {
			n = min(n, max(0, free.Extended[k]/want))
		}
	}
	return n
}

// maxPerNode is how many replicas of p's workload one node may take under the
// topology constraints p owns: one for hostname anti-affinity to itself, maxSkew
// for a hostname spread, and a zone's share for a spread over zones.
func maxPerNode(p *podInfo, count int64) int64 {
	limit := count
	for _, g := range p.topology {
		if !g.matches(p.pod.Namespace, p.pod.Labels) {
			continue
		}
		switch {
		case g.kind == topologyAntiAffinity && g.key == v1.LabelHostname:
			limit = 1
		case g.kind == topologySpread && g.key == v1.LabelHostname:
			limit = min(limit, int64(max(g.maxSkew, 1)))
		case g.kind == topologySpread && g.universe.Len() > 1:
			domains := int64(g.universe.Len())
			limit = min(limit, (count+domains-1)/domains+int64(g.maxSkew))
		}
	}
	return max(limit, 1)
}

// Burstable instance types (the t families) earn CPU credits at a fraction of their
// vCPUs (20-40% on the small sizes) and are throttled to that baseline once the
// credits run out, or billed for surplus credits in unlimited mode. A pod's cpu
// request is what it may use all the time, so list price makes them look like the
// cheapest capacity when they are not: the engine leaves them out unless a
// requirement names them (instance type, family or category) or they are the only
// types the requirements allow.
func (it *InstanceType) burstable() bool {
	r, ok := it.Requirements[v1.LabelInstanceCategory]
	return ok && !r.complement && r.Len() == 1 && r.Has("t")
}

var burstableNamingKeys = []string{v1.LabelInstanceType, v1.LabelInstanceFamily, v1.LabelInstanceCategory}

// namesBurstable reports whether reqs ask for this burstable type by name: an In on
// its type, family or category that lists it.
func namesBurstable(reqs Requirements, it *InstanceType) bool {
	for _, key := range burstableNamingKeys {
		r, ok := reqs[key]
		if !ok || r.complement {
			continue
		}
		if mine, ok := it.Requirements[key]; ok {
			if v, ok := mine.Any(); ok && r.Has(v) {
				return true
			}
		}
	}
	return false
}

// withoutUnnamedBurstables drops the burstable types reqs do not name, unless
// nothing else would be left.
func withoutUnnamedBurstables(types []*InstanceType, reqs Requirements) []*InstanceType {
	if !slices.ContainsFunc(types, func(it *InstanceType) bool { return !it.burstable() }) {
		return types
	}
	return slices.DeleteFunc(slices.Clone(types), func(it *InstanceType) bool {
		return it.burstable() && !namesBurstable(reqs, it)
	})
}

// shapeFor is the demand a claim of pool ps opened for p is sized for.
func (s *solver) shapeFor(ps *poolState, p *podInfo) demandShape {
	count := int64(1)
	if p.bucket != nil {
		count = max(p.bucket.unplaced, 1)
	}
	heads := p.requests.Times(count)
	// A pod admitted only after relaxing its preferences is not in the pool's
	// demand: the rest is what the pool's demand holds beyond the head's replicas
	// and what the existing nodes will take.
	rest := ps.demand.Sub(ps.absorbed).Sub(heads).atLeastZero()
	return demandShape{total: rest.Add(heads), head: p.requests, headCount: count, headPerNode: maxPerNode(p, count)}
}
