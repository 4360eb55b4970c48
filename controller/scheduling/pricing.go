package scheduling

import (
	"math"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/controller/commitment"
)

// ResourceSpendPerHour is the NodePool limit, in dollars per hour, on what the
// pool's nodes cost at the prices the engine plans with (commitments applied).
// Karpenter's CRD accepts any resource name under limits and ignores this one.
const ResourceSpendPerHour corev1.ResourceName = "dovetail.sh/usd-per-hour"

// SpendLimit is the pool's limit in dollars per hour, if it sets one.
func SpendLimit(np *v1.NodePool) (float64, bool) {
	q, ok := np.Spec.Limits[ResourceSpendPerHour]
	if !ok {
		return 0, false
	}
	return q.AsApproximateFloat64(), true
}

// FormatDollars prints a $/h figure as limits and events show it.
func FormatDollars(v float64) string { return "$" + strconv.FormatFloat(v, 'f', 4, 64) + "/h" }

// Family is the instance family a type belongs to, as Savings Plans name it.
func Family(it *InstanceType) string {
	if r, ok := it.Requirements[v1.LabelInstanceFamily]; ok && r.Len() == 1 {
		return r.Values()[0]
	}
	f, _, _ := strings.Cut(it.Name, ".")
	return f
}

func instanceOf(it *InstanceType, o Offering) commitment.Instance {
	return commitment.Instance{Type: it.Name, Family: Family(it), Zone: o.Zone, ListPrice: o.Price}
}

// pricing reports whether the solve tracks prices as it plans: commitments to
// charge, or a pool with a spend limit.
func (s *solver) pricing() bool { return s.ledger != nil || s.spendLimited }

// cheapest is the offering of it that reqs allow at the lowest price the engine
// plans with: an on-demand offering commitments pay for is priced at what it adds
// to the bill. The returned offering carries that price.
func (s *solver) cheapest(it *InstanceType, reqs Requirements) (Offering, bool) {
	if s.ledger == nil {
		return it.cheapestOffering(reqs)
	}
	zone, ct := reqs[v1.LabelTopologyZone], reqs[v1.LabelCapacityType]
	best, found := Offering{}, false
	for _, o := range it.Offerings {
		if !o.Available || (zone != nil && !zone.Has(o.Zone)) || (ct != nil && !ct.Has(o.CapacityType)) {
			continue
		}
		if o.CapacityType == v1.CapacityTypeOnDemand {
			o.Price = s.ledger.Price(instanceOf(it, o))
		}
		if !found || o.Price < best.Price || (o.Price == best.Price && o.Zone < best.Zone) {
			best, found = o, true
		}
	}
	return best, found
}

// charge prices a claim at its target's cheapest offering, takes from the ledger
// what pays for it, and keeps its pool's spend.
func (s *solver) charge(c *claim) {
	if !s.pricing() {
		return
	}
	if s.ledger != nil {
		s.ledger.Release(c.use)
		c.use = commitment.Use{}
	}
	o, _ := s.cheapest(c.target, c.reqs)
	price := o.Price
	if s.ledger != nil && o.CapacityType == v1.CapacityTypeOnDemand {
		list, _ := listPrice(c.target, o)
		c.use = s.ledger.Take(instanceOf(c.target, Offering{Zone: o.Zone, CapacityType: o.CapacityType, Price: list}))
		price = c.use.Price
	}
	c.pool.spend += price - c.price
	c.price = price
}

// withinSpend reports whether the pool can spend price more per hour.
func (s *solver) withinSpend(ps *poolState, price float64) bool {
	return !ps.spendLimited || ps.spend+price <= ps.spendLimit+1e-9
}

// listPrice is the catalog's price of the offering o stands for.
func listPrice(it *InstanceType, o Offering) (float64, bool) {
	for _, lo := range it.Offerings {
		if lo.Zone == o.Zone && lo.CapacityType == o.CapacityType && lo.ReservationID == o.ReservationID {
			return lo.Price, true
		}
	}
	return 0, false
}

// buildSpend charges the existing nodes: to the commitments (as AWS bills them),
// and to their pools' spend at the prices that leaves.
func (s *solver) buildSpend(in Input) {
	for _, ps := range s.pools {
		if limit, ok := SpendLimit(ps.np); ok {
			ps.spendLimit, ps.spendLimited, s.spendLimited = limit, true, true
		}
		if in.PoolUsage != nil {
			ps.spend = in.PoolUsage[ps.np.Name].carriedSpend
		}
	}
	switch {
	case in.charged != nil:
		s.ledger = in.charged
	case !in.Commitments.Empty():
		s.ledger = in.Commitments.Clone()
	}
	if !s.pricing() || in.charged != nil {
		return
	}
	prices, _ := ChargeNodes(in.Nodes, in.InstanceTypes, s.ledger)
	for i, n := range in.Nodes {
		for _, ps := range s.pools {
			if ps.np.Name == n.NodePool && !math.IsNaN(prices[i]) {
				ps.spend += prices[i]
			}
		}
	}
}

// ChargeNodes prices existing nodes by their instance-type, zone and
// capacity-type labels, charging the on-demand ones to the ledger (nil: list
// prices), and returns each node's price (NaN when no catalog knows its
// offering) and what it took from the ledger.
func ChargeNodes(nodes []*ExistingNode, catalogs map[string][]*InstanceType, ledger *commitment.Ledger) ([]float64, []commitment.Use) {
	// A node is priced from its own pool's catalog (overlays may price pools
	// differently), else from any pool's, in a fixed order.
	byName := map[string]*InstanceType{}
	pools := make([]string, 0, len(catalogs))
	for pool := range catalogs {
		pools = append(pools, pool)
	}
	sort.Strings(pools)
	for _, pool := range pools {
		for _, it := range catalogs[pool] {
			if _, ok := byName[it.Name]; !ok {
				byName[it.Name] = it
			}
		}
	}
	byPool := map[string]map[string]*InstanceType{}
	typeOf := func(n *ExistingNode) *InstanceType {
		name := n.Labels[v1.LabelInstanceType]
		own, ok := byPool[n.NodePool]
		if !ok {
			own = make(map[string]*InstanceType, len(catalogs[n.NodePool]))
			for _, it := range catalogs[n.NodePool] {
				own[it.Name] = it
			}
			byPool[n.NodePool] = own
		}
		if it, ok := own[name]; ok {
			return it
		}
		return byName[name]
	}
	prices := make([]float64, len(nodes))
	var onDemand []commitment.Instance
	var at []int
	for i, n := range nodes {
		prices[i] = math.NaN()
		it := typeOf(n)
		if it == nil {
			if n.PlannedPrice > 0 {
				prices[i] = n.PlannedPrice
			}
			continue
		}
		o := Offering{Zone: n.Labels[v1.LabelTopologyZone], CapacityType: n.Labels[v1.LabelCapacityType]}
		list, ok := listPrice(it, o)
		if !ok {
			if n.PlannedPrice > 0 {
				prices[i] = n.PlannedPrice
			}
			continue
		}
		prices[i] = list
		if o.CapacityType == v1.CapacityTypeOnDemand {
			o.Price = list
			onDemand, at = append(onDemand, instanceOf(it, o)), append(at, i)
		}
	}
	uses := make([]commitment.Use, len(nodes))
	for j, u := range ledger.Charge(onDemand) {
		prices[at[j]], uses[at[j]] = u.Price, u
	}
	return prices, uses
}

// NodePrices are what the snapshot's nodes cost per hour, by name, with the
// commitments charged to them as AWS bills them; nodes whose offering is unknown
// are left out.
func (s *Snapshot) NodePrices() map[string]float64 {
	prices, _ := ChargeNodes(s.Nodes, s.InstanceTypes, s.Commitments.Clone())
	out := make(map[string]float64, len(prices))
	for i, n := range s.Nodes {
		if !math.IsNaN(prices[i]) {
			out[n.Name] = prices[i]
		}
	}
	return out
}

// pinToCommitment narrows a claim a commitment pays for to what it pays for:
// on-demand, and the reserved type (in the reservation's zone) or the Savings
// Plan's family. Launch picks among a claim's options by list price, which knows
// nothing of commitments. reqs is the plan's copy; the narrowed options keep
// their order.
func (s *solver) pinToCommitment(c *claim, reqs Requirements, options []*InstanceType) []*InstanceType {
	reqs.Add(MustRequirement(v1.LabelCapacityType, v1.OpIn, v1.CapacityTypeOnDemand))
	keep := func(it *InstanceType) bool { return true }
	if zone, ok := c.use.Reserved(); ok {
		if zone != "" {
			reqs.Add(MustRequirement(v1.LabelTopologyZone, v1.OpIn, zone))
		}
		keep = func(it *InstanceType) bool { return it == c.target }
	} else if f := c.use.Family(); f != "" {
		keep = func(it *InstanceType) bool { return Family(it) == f }
	}
	out := make([]*InstanceType, 0, len(options))
	for _, it := range options {
		if keep(it) && it.compatible(reqs) {
			out = append(out, it)
		}
	}
	if len(out) == 0 {
		return []*InstanceType{c.target}
	}
	return out
}

// recharge charges a covered claim for the type it launches as (the cheapest
// option that holds its pods, which a Savings Plan covers as it did the type the
// claim was sized for) and returns its price.
func (s *solver) recharge(c *claim, it *InstanceType, o Offering) float64 {
	if _, reserved := c.use.Reserved(); reserved || it == c.target {
		return c.use.Price
	}
	s.ledger.Release(c.use)
	c.use = s.ledger.Take(instanceOf(it, o))
	return c.use.Price
}
