package scheduling

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/sets"

	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
)

func (s *solver) tryClaims(p *podInfo) bool {
	if p.needsHostnameAffinity() {
		// Full claims are retired from the active list, but the claim holding this
		// pod's peers may grow for it.
		for _, c := range s.claims {
			if s.addToClaim(c, p) == nil {
				return true
			}
		}
		return false
	}
	for i := 0; i < len(s.active); i++ {
		c := s.active[i]
		if !p.requests.Fits(c.remaining) {
			continue
		}
		if s.addToClaim(c, p) == nil {
			if !s.minPod.Fits(c.remaining) {
				s.active = append(s.active[:i], s.active[i+1:]...)
			}
			return true
		}
	}
	return false
}

// addToClaim places p on c if it fits, narrowing c's requirements and instance-type
// options; on failure c is unchanged.
func (s *solver) addToClaim(c *claim, p *podInfo) error {
	if err := s.admits(c.pool, p); err != nil {
		return err
	}
	if err := c.reqs.Intersects(p.requirements); err != nil {
		return err
	}
	if hostPortsConflict(c.hostPorts, p.hostPorts) {
		return fmt.Errorf("host port conflict")
	}
	reqs := c.reqs
	if narrows(c.reqs, p.requirements) {
		reqs = c.reqs.Copy()
		for _, r := range p.requirements {
			reqs.Add(r)
		}
	}
	reqs, err := s.pinTopology(c, p, reqs)
	if err != nil {
		return err
	}
	// requests already holds the daemonset overhead.
	total := c.requests.Add(p.requests)
	options, target := c.options, c.target
	if changed := changedKeys(c.reqs, reqs); len(changed) > 0 {
		options = filterCompatible(c.options, reqs, changed)
	}
	if len(options) != len(c.options) && !containsType(options, target) {
		fitting := filterFits(options, total)
		if len(fitting) == 0 {
			return fmt.Errorf("no instance type holds the pods")
		}
		target = s.target(fitting, reqs, c.requests, s.shapeFor(c.pool, p))
	}
	if !total.Fits(target.Allocatable) {
		// A pod that must share a node with pods on this claim has nowhere else to
		// go: let the claim grow to a larger option rather than strand it.
		if !p.needsHostnameAffinity() {
			return fmt.Errorf("does not fit the claim's instance type")
		}
		fitting := filterFits(options, total)
		if len(fitting) == 0 {
			return fmt.Errorf("no instance type holds the pod with the pods it must share a node with")
		}
		target = s.target(fitting, reqs, Resources{}, demandShape{total: total})
	}
	if hasMinValues(reqs) {
		if err := checkMinValues(reqs, filterFits(options, total)); err != nil {
			return err
		}
	}
	repriced := s.pricing() && (target != c.target || !sameRequirements(reqs, c.reqs))
	if repriced && c.pool.spendLimited {
		if o, _ := s.cheapest(target, reqs); !s.withinSpend(c.pool, o.Price-c.price) {
			c.pool.spendCapped = true
			return fmt.Errorf("the NodePool's spend limit of %s would be exceeded", FormatDollars(c.pool.spendLimit))
		}
	}
	c.reqs, c.options, c.target, c.requests = reqs, options, target, total
	if repriced {
		s.charge(c)
	}
	c.remaining = target.Allocatable.Sub(total)
	c.pods = append(c.pods, p)
	c.hostPorts = append(c.hostPorts, p.hostPorts...)
	s.topology.record(s.topology.matchingPod(p), p.topology, claimDomain(c), claimCounts(c))
	return nil
}

// changedKeys lists the keys whose requirement differs; requirements are immutable,
// so pointer identity is enough.
func changedKeys(before, after Requirements) []string {
	var out []string
	for k, v := range after {
		if before[k] != v {
			out = append(out, k)
		}
	}
	return out
}

func hasMinValues(reqs Requirements) bool {
	for _, r := range reqs {
		if r.MinValues != nil {
			return true
		}
	}
	return false
}

// narrows reports whether adding pod requirements could change the claim's.
func narrows(have, want Requirements) bool {
	for key, w := range want {
		h, ok := have[key]
		if !ok {
			return true
		}
		if h.complement || w.complement || h.values.Len() > w.values.Len() {
			return true
		}
		for v := range h.values {
			if !w.Has(v) {
				return true
			}
		}
	}
	return false
}

func sameRequirements(a, b Requirements) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// pinTopology chooses, for each topology key the pod constrains, a domain of the claim
// that satisfies every group, and pins the claim's requirement to it.
func (s *solver) pinTopology(c *claim, p *podInfo, reqs Requirements) (Requirements, error) {
	keys := sets.New[string]()
	for _, g := range p.topology {
		keys.Insert(g.key)
	}
	for _, g := range s.topology.matchingPod(p) {
		// Another pod's anti-affinity keeps p out of domains; another pod's required
		// affinity to p, while nothing it matches is placed, needs p's domain known
		// so that pod can join it (a claim open to three zones is in none yet).
		if !g.preference && (g.kind == topologyAntiAffinity || (g.kind == topologyAffinity && g.total == 0)) {
			keys.Insert(g.key)
		}
	}
	if keys.Has(v1.LabelHostname) {
		if err := s.topologyBlocksKey(p, v1.LabelHostname, c.name); err != nil {
			return nil, err
		}
		keys.Delete(v1.LabelHostname)
	}
	for _, key := range sets.List(keys) {
		r := reqs.Get(key)
		var candidates []string
		if r.Len() == 1 {
			candidates = r.Values()
		} else {
			candidates = s.claimDomains(c, key, reqs)
		}
		for _, g := range p.topology {
			if g.key == key && g.kind == topologySpread {
				candidates = g.preferredDomains(candidates)
				break
			}
		}
		chosen := ""
		var blocked error
		for _, d := range candidates {
			err := s.topologyBlocksKey(p, key, d)
			if err == nil {
				chosen = d
				break
			}
			if blocked == nil {
				blocked = err
			}
		}
		if chosen == "" {
			if blocked == nil {
				return nil, fmt.Errorf("no %s domain is left to the node (its requirements allow none)", key)
			}
			return nil, fmt.Errorf("no %s domain satisfies the pod's topology: in %s, %w", key, strings.Join(candidates, ", "), blocked)
		}
		if r.Len() != 1 {
			if sameRequirements(reqs, c.reqs) {
				reqs = reqs.Copy()
			}
			reqs.Add(MustRequirement(key, v1.OpIn, chosen))
		}
	}
	return reqs, nil
}

// topologyBlocksKey says which rule, if any, keeps p out of domain d of key.
func (s *solver) topologyBlocksKey(p *podInfo, key, d string) error {
	domainOf := func(k string) (string, bool) {
		if k == key {
			return d, true
		}
		return "", false
	}
	for _, g := range p.topology {
		if g.key == key {
			if err := g.allows(p, d); err != nil {
				return err
			}
		}
	}
	return s.topology.inverseAllows(p, domainOf)
}

// claimDomains lists the values of key a claim could still take, from its options.
func (s *solver) claimDomains(c *claim, key string, reqs Requirements) []string {
	r := reqs.Get(key)
	vals := sets.New[string]()
	for _, it := range c.options {
		switch key {
		case v1.LabelTopologyZone, v1.LabelCapacityType:
			for _, o := range it.Offerings {
				if !o.Available {
					continue
				}
				v := o.Zone
				if key == v1.LabelCapacityType {
					v = o.CapacityType
				}
				if r.Has(v) {
					vals.Insert(v)
				}
			}
		default:
			if ir, ok := it.Requirements[key]; ok {
				for _, v := range ir.Values() {
					if r.Has(v) {
						vals.Insert(v)
					}
				}
			}
		}
	}
	if vals.Len() == 0 && !r.complement {
		vals.Insert(r.Values()...)
	}
	return sets.List(vals)
}

// filterCompatible keeps the types that still meet reqs on the changed keys.
func filterCompatible(options []*InstanceType, reqs Requirements, keys []string) []*InstanceType {
	out := make([]*InstanceType, 0, len(options))
	for _, it := range options {
		if it.compatibleOn(reqs, keys) {
			out = append(out, it)
		}
	}
	return out
}

// filterFits keeps the types whose allocatable holds need.
func filterFits(options []*InstanceType, need Resources) []*InstanceType {
	out := make([]*InstanceType, 0, len(options))
	for _, it := range options {
		if need.Fits(it.Allocatable) {
			out = append(out, it)
		}
	}
	return out
}

func containsType(options []*InstanceType, it *InstanceType) bool {
	for _, o := range options {
		if o == it {
			return true
		}
	}
	return false
}

// checkMinValues enforces minValues: the options must span that many distinct values
// of each such key.
func checkMinValues(reqs Requirements, options []*InstanceType) error {
	for key, r := range reqs {
		if r.MinValues == nil {
			continue
		}
		vals := sets.New[string]()
		for _, it := range options {
			if ir, ok := it.Requirements[key]; ok {
				for _, v := range ir.Values() {
					if r.Has(v) {
						vals.Insert(v)
					}
				}
			}
		}
		if vals.Len() < *r.MinValues {
			return fmt.Errorf("minValues for %s is %d but only %d values remain", key, *r.MinValues, vals.Len())
		}
	}
	return nil
}

// MinValuesPrefix is how many of options, taken in order, it takes to satisfy every
// minValues of reqs (0 when reqs has none); ok is false when all of them do not.
func MinValuesPrefix(reqs Requirements, options []*InstanceType) (int, bool) {
	if !hasMinValues(reqs) {
		return 0, true
	}
	for n := 1; n <= len(options); n++ {
		if checkMinValues(reqs, options[:n]) == nil {
			return n, true
		}
	}
	return 0, false
}

// tryNewClaim opens a claim on the first NodePool, by weight, that can hold the pod.
func (s *solver) tryNewClaim(p *podInfo) (*claim, error) {
	if len(s.pools) == 0 {
		return nil, fmt.Errorf("no NodePool can launch nodes (none exist, or all are static)")
	}
	var reasons []string
	for _, ps := range s.pools {
		c, err := s.openClaim(ps, p)
		if err == nil {
			return c, nil
		}
		reasons = append(reasons, fmt.Sprintf("nodepool %q: %s", ps.np.Name, err))
	}
	return nil, fmt.Errorf("%s", strings.Join(reasons, "; "))
}

func (s *solver) openClaim(ps *poolState, p *podInfo) (*claim, error) {
	if err := s.admits(ps, p); err != nil {
		return nil, err
	}
	if hostPortsConflict(ps.daemonHostPorts, p.hostPorts) {
		return nil, fmt.Errorf("a DaemonSet that runs on every node of the pool holds one of the pod's host ports")
	}
	if n, ok := ps.limits[v1.ResourceNodes]; ok && ps.nodes+1 > n.Value() {
		return nil, fmt.Errorf("limit of %d nodes reached", n.Value())
	}
	reqs := ps.requirements.Copy()
	for _, r := range p.requirements {
		reqs.Add(r)
	}
	c := &claim{name: fmt.Sprintf("%s-%d", ps.np.Name, len(s.claims)+1), pool: ps, reqs: reqs}
	need := p.requests.Add(ps.daemonOverhead)
	k := admitKey{p.class, p.term, p.vterm, p.preferred, ps.index}
	cached, ok := s.optionCache[k]
	if !ok {
		var all []*InstanceType
		for _, it := range ps.instanceTypes {
			if it.compatible(reqs) {
				all = append(all, it)
			}
		}
		cached.kept = withoutUnnamedBurstables(all, reqs)
		// What it left out, in order (it keeps the rest of all, in order).
		for i, j := 0, 0; i < len(all); i++ {
			if j < len(cached.kept) && cached.kept[j] == all[i] {
				j++
				continue
			}
			cached.burstable = append(cached.burstable, all[i])
		}
		s.optionCache[k] = cached
	}
	overSpend := false
	collect := func(types []*InstanceType) {
		for _, it := range types {
			if !need.Fits(it.Allocatable) {
				continue
			}
			within, spend := s.withinLimits(ps, it, reqs)
			if within {
				c.options = append(c.options, it)
			}
			overSpend = overSpend || spend
		}
	}
	collect(cached.kept)
	if len(c.options) == 0 {
		// Burstable types are left out while another type can take the pod; when
		// none can, a burstable one is better than a pod left pending.
		collect(cached.burstable)
	}
	if len(c.options) == 0 {
		// Only when the spend limit is why nothing is left does the pool report it.
		ps.spendCapped = ps.spendCapped || overSpend
		return nil, s.explainNoInstanceType(ps, reqs, need)
	}
	var err error
	if reqs, err = s.pinTopology(c, p, reqs); err != nil {
		return nil, err
	}
	if changed := changedKeys(c.reqs, reqs); len(changed) > 0 {
		c.reqs = reqs
		c.options = filterCompatible(c.options, reqs, changed)
		if len(c.options) == 0 {
			return nil, fmt.Errorf("no instance type is offered in the domain the pod's topology needs")
		}
	}
	if err := checkMinValues(reqs, c.options); err != nil {
		return nil, err
	}
	if s.firstFit {
		c.target = largest(c.options)
	} else {
		c.target, c.sizedByDemand = chooseTarget(c.options, reqs, ps.daemonOverhead, s.shapeFor(ps, p), s.costs, s.cheapest)
	}
	if ps.spendLimited {
		// The topology may have pinned a dearer zone than the options were checked in.
		if o, _ := s.cheapest(c.target, reqs); !s.withinSpend(ps, o.Price) {
			ps.spendCapped = true
			return nil, fmt.Errorf("the NodePool's spend limit of %s would be exceeded: it spends %s", FormatDollars(ps.spendLimit), FormatDollars(ps.spend))
		}
	}
	s.charge(c)
	c.requests = ps.daemonOverhead.Add(p.requests)
	c.remaining = c.target.Allocatable.Sub(c.requests)
	c.pods = []*podInfo{p}
	c.hostPorts = append(append([]hostPort(nil), ps.daemonHostPorts...), p.hostPorts...)
	ps.usage = ps.usage.Add(c.target.Capacity)
	ps.nodes++
	s.claims = append(s.claims, c)
	if s.minPod.Fits(c.remaining) {
		s.active = append(s.active, c)
	}
	s.topology.record(s.topology.matchingPod(p), p.topology, claimDomain(c), claimCounts(c))
	return c, nil
}

// withinLimits reports whether one more node of the type keeps the pool within
// its limits, and whether the spend limit is what it would break.
func (s *solver) withinLimits(ps *poolState, it *InstanceType, reqs Requirements) (within, overSpend bool) {
	if len(ps.limits) == 0 {
		return true, false
	}
	if ps.spendLimited {
		if o, ok := s.cheapest(it, reqs); !ok || !s.withinSpend(ps, o.Price) {
			return false, true
		}
	}
	after := ps.usage.Add(it.Capacity).ToResourceList()
	for name, limit := range ps.limits {
		if name == v1.ResourceNodes || name == ResourceSpendPerHour {
			continue
		}
		if used, ok := after[name]; ok && used.Cmp(limit) > 0 {
			return false, false
		}
	}
	return true, false
}
