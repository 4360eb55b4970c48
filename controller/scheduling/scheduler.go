package scheduling

import (
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"

	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
)

// Input is everything a solve needs, as plain values.
type Input struct {
	// Pods are the pending pods to place.
	Pods []*corev1.Pod
	// Nodes are existing nodes and in-flight NodeClaims, with the pods bound to them.
	Nodes []*ExistingNode
	// NodePools the engine may launch from. Static pools (replicas set) are skipped.
	NodePools []*v1.NodePool
	// InstanceTypes per NodePool name; the cloud provider resolves them from the
	// pool's node class.
	InstanceTypes map[string][]*InstanceType
	// DaemonSetPods are one pod per DaemonSet, from its template: their requests are
	// reserved on every new node they would run on.
	DaemonSetPods []*corev1.Pod
}

// ExistingNode is capacity that already exists or is already being launched.
type ExistingNode struct {
	Name        string
	Labels      map[string]string
	Taints      []corev1.Taint
	Capacity    Resources
	Allocatable Resources
	// Pods already bound to the node; their requests are used, their labels counted
	// for topology, their anti-affinity honoured.
	Pods     []*corev1.Pod
	NodePool string
}

// NodeClaimPlan is one node to launch.
type NodeClaimPlan struct {
	Name          string
	NodePool      string
	Requirements  Requirements
	Labels        map[string]string
	Annotations   map[string]string
	Taints        []corev1.Taint
	StartupTaints []corev1.Taint
	// InstanceTypeOptions can all hold the pods, cheapest first.
	InstanceTypeOptions []*InstanceType
	// InstanceType and Offering are the cheapest of the options.
	InstanceType *InstanceType
	Offering     Offering
	Pods         []*corev1.Pod
	// Requests is the pods' requests plus daemonset overhead.
	Requests Resources
}

// ExistingPlacement lists pods placed on an existing node.
type ExistingPlacement struct {
	Node *ExistingNode
	Pods []*corev1.Pod
}

// PodError says why a pod cannot be placed.
type PodError struct {
	Pod    *corev1.Pod
	Reason string
}

// Results is a plan.
type Results struct {
	NodeClaims    []*NodeClaimPlan
	Existing      []*ExistingPlacement
	Unschedulable []PodError
}

// PricePerHour is the total price of the new NodeClaims.
func (r *Results) PricePerHour() float64 {
	total := 0.0
	for _, nc := range r.NodeClaims {
		total += nc.Offering.Price
	}
	return total
}

type poolState struct {
	index          int
	np             *v1.NodePool
	requirements   Requirements
	taints         []corev1.Taint
	instanceTypes  []*InstanceType
	daemonOverhead Resources
	limits         corev1.ResourceList
	usage          Resources
	nodes          int64
	// demand is the unplaced requests of the pods this pool admits; it steers which
	// instance type a new claim is sized for.
	demand    Resources
	universes map[string]sets.Set[string]
}

type claim struct {
	name      string
	pool      *poolState
	reqs      Requirements
	options   []*InstanceType
	target    *InstanceType
	requests  Resources
	remaining Resources
	pods      []*podInfo
	hostPorts []hostPort
}

type nodeState struct {
	node      *ExistingNode
	reqs      Requirements
	remaining Resources
	hostPorts []hostPort
	placed    []*podInfo
}

type solver struct {
	pools      []*poolState
	nodes      []*nodeState
	active     []*claim
	claims     []*claim
	topology   *topology
	minPod     Resources
	errors     []PodError
	admitCache map[admitKey]error
	buckets    []*bucket
	// optionCache holds, per pod class and pool, the pool's types compatible with
	// the pod's requirements, before resources: replicas reuse it.
	optionCache map[admitKey][]*InstanceType
	catalogs    map[string][]*InstanceType
}

// Solve places pods onto existing capacity and new NodeClaims. It never fails as a
// whole: a pod that cannot be placed is reported with its reason.
func Solve(in Input) *Results {
	s := &solver{topology: newTopology(), admitCache: map[admitKey]error{}, optionCache: map[admitKey][]*InstanceType{}, catalogs: in.InstanceTypes}
	s.buildPools(in)
	pods := s.buildPods(in.Pods)
	s.buildNodes(in.Nodes, pods)
	s.minPod = Resources{MilliCPU: math.MaxInt64, Memory: math.MaxInt64, Pods: 1}
	for _, p := range pods {
		s.minPod.MilliCPU = min(s.minPod.MilliCPU, p.requests.MilliCPU)
		s.minPod.Memory = min(s.minPod.Memory, p.requests.Memory)
	}
	sortPods(pods)
	s.buildBuckets(pods)
	for _, p := range pods {
		if p.placed {
			continue
		}
		s.place(p)
	}
	return s.results()
}

// sortPods orders pods largest first (cpu, then memory): first-fit decreasing.
func sortPods(pods []*podInfo) {
	sort.SliceStable(pods, func(i, j int) bool {
		a, b := pods[i].requests, pods[j].requests
		if a.MilliCPU != b.MilliCPU {
			return a.MilliCPU > b.MilliCPU
		}
		if a.Memory != b.Memory {
			return a.Memory > b.Memory
		}
		return pods[i].key < pods[j].key
	})
}

func (s *solver) buildPools(in Input) {
	nps := append([]*v1.NodePool(nil), in.NodePools...)
	sort.SliceStable(nps, func(i, j int) bool {
		wi, wj := weight(nps[i]), weight(nps[j])
		if wi != wj {
			return wi > wj
		}
		return nps[i].Name < nps[j].Name
	})
	for _, np := range nps {
		if np.Spec.Replicas != nil || np.DeletionTimestamp != nil {
			continue
		}
		reqs, err := FromNodePoolRequirements(np.Spec.Template.Spec.Requirements)
		if err != nil {
			continue
		}
		for k, v := range np.Spec.Template.Labels {
			reqs.Add(MustRequirement(k, v1.OpIn, v))
		}
		reqs.Add(MustRequirement(v1.LabelNodePool, v1.OpIn, np.Name))
		ps := &poolState{index: len(s.pools), np: np, requirements: reqs, taints: np.Spec.Template.Spec.Taints, limits: corev1.ResourceList(np.Spec.Limits), universes: map[string]sets.Set[string]{}}
		for _, it := range in.InstanceTypes[np.Name] {
			if it.compatible(reqs) {
				ps.instanceTypes = append(ps.instanceTypes, it)
			}
		}
		sortByPrice(ps.instanceTypes)
		for _, ds := range in.DaemonSetPods {
			if daemonSetFits(ds, reqs, append(append([]corev1.Taint(nil), ps.taints...), np.Spec.Template.Spec.StartupTaints...)) {
				ps.daemonOverhead = ps.daemonOverhead.Add(PodRequests(ds))
			}
		}
		s.pools = append(s.pools, ps)
	}
	for _, n := range in.Nodes {
		for _, ps := range s.pools {
			if n.NodePool == ps.np.Name {
				ps.usage = ps.usage.Add(n.Capacity)
				ps.nodes++
			}
		}
	}
}

func weight(np *v1.NodePool) int32 {
	if np.Spec.Weight == nil {
		return 0
	}
	return *np.Spec.Weight
}

func (s *solver) buildPods(pods []*corev1.Pod) []*podInfo {
	out := make([]*podInfo, 0, len(pods))
	classes := map[string]int{}
	for _, pod := range pods {
		p, err := newPodInfo(pod)
		if err != nil {
			s.errors = append(s.errors, PodError{Pod: pod, Reason: err.Error()})
			continue
		}
		if err := s.topology.addPod(p, s.universe); err != nil {
			s.errors = append(s.errors, PodError{Pod: pod, Reason: err.Error()})
			continue
		}
		sig := constraintSignature(pod)
		if _, ok := classes[sig]; !ok {
			classes[sig] = len(classes)
		}
		p.class = classes[sig]
		for _, ps := range s.pools {
			if s.admits(ps, p) == nil {
				p.pools = append(p.pools, ps.index)
				ps.demand = ps.demand.Add(p.requests)
			}
		}
		out = append(out, p)
	}
	return out
}

func (s *solver) buildNodes(nodes []*ExistingNode, pending []*podInfo) {
	for _, n := range nodes {
		ns := &nodeState{node: n, reqs: FromLabels(n.Labels), remaining: n.Allocatable}
		for _, pod := range n.Pods {
			ns.remaining = ns.remaining.Sub(PodRequests(pod))
			ns.hostPorts = append(ns.hostPorts, podHostPorts(pod)...)
			// Bound pods' own anti-affinity keeps matching pending pods away.
			var owned []*topologyGroup
			if pod.Spec.Affinity != nil && pod.Spec.Affinity.PodAntiAffinity != nil {
				if info, err := newPodInfo(pod); err == nil && s.topology.addPod(info, s.universe) == nil {
					owned = info.topology
				}
			}
			s.topology.record(pod.Namespace, pod.Labels, owned, s.nodeDomain(ns))
		}
		s.nodes = append(s.nodes, ns)
	}
}

func (s *solver) nodeDomain(ns *nodeState) func(string) (string, bool) {
	return func(key string) (string, bool) {
		if key == v1.LabelHostname {
			if h, ok := ns.node.Labels[v1.LabelHostname]; ok {
				return h, true
			}
			return ns.node.Name, true
		}
		v, ok := ns.node.Labels[key]
		return v, ok
	}
}

func claimDomain(c *claim) func(string) (string, bool) {
	return func(key string) (string, bool) {
		if key == v1.LabelHostname {
			return c.name, true
		}
		if r, ok := c.reqs[key]; ok && r.Len() == 1 {
			return r.Any()
		}
		return "", false
	}
}

// universe is the set of domains a spread on key can use for pod p: what the pools p
// may use allow for that key, and what existing nodes have.
func (s *solver) universe(key string, p *podInfo) sets.Set[string] {
	out := sets.New[string]()
	want := p.requirements.Get(key)
	for _, ps := range s.pools {
		if s.poolAdmits(ps, p) != nil {
			continue
		}
		vals, ok := ps.universes[key]
		if !ok {
			vals = sets.New[string]()
			if r, ok := ps.requirements[key]; ok && !r.complement {
				vals.Insert(r.Values()...)
			} else {
				for _, it := range ps.instanceTypes {
					if r, ok := it.Requirements[key]; ok && !r.complement {
						for _, v := range r.Values() {
							if ps.requirements.Get(key).Has(v) {
								vals.Insert(v)
							}
						}
					}
				}
			}
			ps.universes[key] = vals
		}
		for v := range vals {
			if want.Has(v) {
				out.Insert(v)
			}
		}
	}
	for _, n := range s.nodes {
		if v, ok := n.node.Labels[key]; ok && want.Has(v) {
			out.Insert(v)
		}
	}
	return out
}

type admitKey struct{ class, term, preferred, pool int }

// admits is poolAdmits cached per pod class and relaxation state: replicas of one
// workload ask the same question of every claim.
func (s *solver) admits(ps *poolState, p *podInfo) error {
	k := admitKey{p.class, p.term, p.preferred, ps.index}
	if err, ok := s.admitCache[k]; ok {
		return err
	}
	err := s.poolAdmits(ps, p)
	s.admitCache[k] = err
	return err
}

// poolAdmits checks taints and requirements of a pool against a pod.
func (s *solver) poolAdmits(ps *poolState, p *podInfo) error {
	if err := toleratesAll(p.tolerations, ps.taints); err != nil {
		return err
	}
	if err := ps.requirements.Intersects(p.requirements); err != nil {
		return fmt.Errorf("incompatible requirements, %w", err)
	}
	return nil
}

// place puts one pod on existing capacity, an open claim, or a new claim, relaxing
// its preferences until one works. A pod that cannot be placed is done with too: it
// is reported, and no later fill picks it up.
func (s *solver) place(p *podInfo) {
	defer s.markPlaced(p)
	for {
		if s.tryExisting(p) || s.tryClaims(p) {
			return
		}
		c, err := s.tryNewClaim(p)
		if err == nil {
			s.markPlaced(p)
			s.fill(c)
			return
		}
		if !p.relax() {
			s.errors = append(s.errors, PodError{Pod: p.pod, Reason: err.Error()})
			return
		}
	}
}

func (s *solver) markPlaced(p *podInfo) {
	if p.placed {
		return
	}
	p.placed = true
	for _, i := range p.pools {
		s.pools[i].demand = s.pools[i].demand.Sub(p.requests)
	}
}

func (s *solver) tryExisting(p *podInfo) bool {
	for _, ns := range s.nodes {
		if !p.requests.Fits(ns.remaining) {
			continue
		}
		if toleratesAll(p.tolerations, ns.node.Taints) != nil {
			continue
		}
		if !labelsSatisfy(ns.node.Labels, p.requirements) {
			continue
		}
		if hostPortsConflict(ns.hostPorts, p.hostPorts) {
			continue
		}
		domainOf := s.nodeDomain(ns)
		if s.topologyBlocks(p, domainOf) {
			continue
		}
		ns.remaining = ns.remaining.Sub(p.requests)
		ns.hostPorts = append(ns.hostPorts, p.hostPorts...)
		ns.placed = append(ns.placed, p)
		s.topology.record(p.pod.Namespace, p.pod.Labels, p.topology, domainOf)
		return true
	}
	return false
}

func labelsSatisfy(l map[string]string, reqs Requirements) bool {
	for key, r := range reqs {
		v, ok := l[key]
		if !ok {
			if !r.AllowsAbsent() {
				return false
			}
			continue
		}
		if !r.Has(v) {
			return false
		}
	}
	return true
}

func (s *solver) topologyBlocks(p *podInfo, domainOf func(string) (string, bool)) bool {
	for _, g := range p.topology {
		d, ok := domainOf(g.key)
		if !ok {
			if g.kind == topologyAffinity {
				return true
			}
			continue
		}
		if g.allows(p, d) != nil {
			return true
		}
	}
	return s.topology.inverseAllows(p, domainOf) != nil
}

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
		target = chooseTarget(fitting, reqs, c.pool.daemonOverhead, c.pool.demand.Add(p.requests))
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
		target = chooseTarget(fitting, reqs, c.pool.daemonOverhead, total)
	}
	if hasMinValues(reqs) {
		if err := checkMinValues(reqs, filterFits(options, total)); err != nil {
			return err
		}
	}
	c.reqs, c.options, c.target, c.requests = reqs, options, target, total
	c.remaining = target.Allocatable.Sub(total)
	c.pods = append(c.pods, p)
	c.hostPorts = append(c.hostPorts, p.hostPorts...)
	s.topology.record(p.pod.Namespace, p.pod.Labels, p.topology, claimDomain(c))
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
	for _, g := range s.topology.antiOnly {
		if g.matches(p.pod.Namespace, p.pod.Labels) {
			keys.Insert(g.key)
		}
	}
	if keys.Has(v1.LabelHostname) {
		if s.topologyBlocksKey(p, v1.LabelHostname, c.name) {
			return nil, fmt.Errorf("topology on %s", v1.LabelHostname)
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
		for _, d := range candidates {
			if !s.topologyBlocksKey(p, key, d) {
				chosen = d
				break
			}
		}
		if chosen == "" {
			return nil, fmt.Errorf("no %s domain satisfies the pod's topology", key)
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

func (s *solver) topologyBlocksKey(p *podInfo, key, d string) bool {
	domainOf := func(k string) (string, bool) {
		if k == key {
			return d, true
		}
		return "", false
	}
	for _, g := range p.topology {
		if g.key == key && g.allows(p, d) != nil {
			return true
		}
	}
	return s.topology.inverseAllows(p, domainOf) != nil
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

// chooseTarget picks the instance type a new claim is sized for: the one with the
// lowest price per share of the outstanding demand it can hold. While much demand
// remains this is the type with the best price for the demand's cpu:memory mix; near
// the end it is the cheapest type that holds what is left.
func chooseTarget(options []*InstanceType, reqs Requirements, overhead, demand Resources) *InstanceType {
	var best *InstanceType
	bestScore := math.Inf(1)
	for _, it := range options {
		o, ok := it.cheapestOffering(reqs)
		if !ok {
			continue
		}
		usable := it.Allocatable.Sub(overhead)
		frac := 1.0
		if demand.MilliCPU > 0 {
			frac = min(frac, float64(usable.MilliCPU)/float64(demand.MilliCPU))
		}
		if demand.Memory > 0 {
			frac = min(frac, float64(usable.Memory)/float64(demand.Memory))
		}
		if demand.Pods > 0 {
			frac = min(frac, float64(usable.Pods)/float64(demand.Pods))
		}
		for k, v := range demand.Extended {
			if v > 0 {
				frac = min(frac, float64(usable.Extended[k])/float64(v))
			}
		}
		if frac <= 0 {
			continue
		}
		score := o.Price / frac
		if best == nil || score < bestScore-1e-12 {
			best, bestScore = it, score
		}
	}
	if best == nil {
		return options[0]
	}
	return best
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
	if n, ok := ps.limits[v1.ResourceNodes]; ok && ps.nodes+1 > n.Value() {
		return nil, fmt.Errorf("limit of %d nodes reached", n.Value())
	}
	reqs := ps.requirements.Copy()
	for _, r := range p.requirements {
		reqs.Add(r)
	}
	c := &claim{name: fmt.Sprintf("%s-%d", ps.np.Name, len(s.claims)+1), pool: ps, reqs: reqs}
	need := p.requests.Add(ps.daemonOverhead)
	k := admitKey{p.class, p.term, p.preferred, ps.index}
	compatible, ok := s.optionCache[k]
	if !ok {
		for _, it := range ps.instanceTypes {
			if it.compatible(reqs) {
				compatible = append(compatible, it)
			}
		}
		s.optionCache[k] = compatible
	}
	for _, it := range compatible {
		if need.Fits(it.Allocatable) && s.withinLimits(ps, it) {
			c.options = append(c.options, it)
		}
	}
	if len(c.options) == 0 {
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
	c.target = chooseTarget(c.options, reqs, ps.daemonOverhead, ps.demand.Add(p.requests))
	c.requests = ps.daemonOverhead.Add(p.requests)
	c.remaining = c.target.Allocatable.Sub(c.requests)
	c.pods = []*podInfo{p}
	c.hostPorts = append(c.hostPorts, p.hostPorts...)
	ps.usage = ps.usage.Add(c.target.Capacity)
	ps.nodes++
	s.claims = append(s.claims, c)
	if s.minPod.Fits(c.remaining) {
		s.active = append(s.active, c)
	}
	s.topology.record(p.pod.Namespace, p.pod.Labels, p.topology, claimDomain(c))
	return c, nil
}

func (s *solver) withinLimits(ps *poolState, it *InstanceType) bool {
	if len(ps.limits) == 0 {
		return true
	}
	after := ps.usage.Add(it.Capacity).ToResourceList()
	for name, limit := range ps.limits {
		if name == v1.ResourceNodes {
			continue
		}
		if used, ok := after[name]; ok && used.Cmp(limit) > 0 {
			return false
		}
	}
	return true
}

// explainNoInstanceType says which constraint ruled out every instance type.
func (s *solver) explainNoInstanceType(ps *poolState, reqs Requirements, need Resources) error {
	if len(ps.instanceTypes) == 0 {
		return fmt.Errorf("no instance type satisfies the NodePool's requirements%s", s.blockingRequirement(ps))
	}
	compatible, fitting := 0, 0
	var biggest Resources
	for _, it := range ps.instanceTypes {
		if !it.compatible(reqs) {
			continue
		}
		compatible++
		if need.Fits(it.Allocatable) {
			fitting++
		}
		if it.Allocatable.MilliCPU >= biggest.MilliCPU {
			biggest = it.Allocatable
		}
	}
	switch {
	case compatible == 0:
		return fmt.Errorf("no instance type satisfies requirements %s", reqs)
	case fitting == 0:
		return fmt.Errorf("no instance type has enough resources for requests %s (with daemonset overhead); %d types match the requirements, short of %s", need, compatible, strings.Join(need.Exceeding(biggest), ", "))
	default:
		return fmt.Errorf("the NodePool's limits %s would be exceeded", formatLimits(ps.limits))
	}
}

// blockingRequirement names the NodePool requirements that no instance type meets on
// their own, so the user knows which line to change.
func (s *solver) blockingRequirement(ps *poolState) string {
	var all []*InstanceType
	seen := map[*InstanceType]bool{}
	for _, types := range s.catalogs {
		for _, it := range types {
			if !seen[it] {
				seen[it] = true
				all = append(all, it)
			}
		}
	}
	var blocking []string
	for _, key := range ps.requirements.Keys() {
		single := Requirements{key: ps.requirements[key]}
		ok := false
		for _, it := range all {
			if it.compatible(single) {
				ok = true
				break
			}
		}
		if !ok {
			blocking = append(blocking, ps.requirements[key].String())
		}
	}
	if len(blocking) == 0 {
		return " together"
	}
	return ": none offers " + strings.Join(blocking, "; ")
}

func formatLimits(l corev1.ResourceList) string {
	keys := make([]string, 0, len(l))
	for k := range l {
		keys = append(keys, string(k))
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		q := l[corev1.ResourceName(k)]
		parts = append(parts, fmt.Sprintf("%s=%s", k, q.String()))
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

func (s *solver) results() *Results {
	r := &Results{Unschedulable: s.errors}
	for _, c := range s.claims {
		options := filterFits(c.options, c.requests)
		prices := make(map[*InstanceType]Offering, len(options))
		for _, it := range options {
			o, _ := it.cheapestOffering(c.reqs)
			prices[it] = o
		}
		sort.SliceStable(options, func(i, j int) bool {
			pi, pj := prices[options[i]].Price, prices[options[j]].Price
			if pi != pj {
				return pi < pj
			}
			return options[i].Name < options[j].Name
		})
		reqs := c.reqs.Copy()
		names := make([]string, len(options))
		for i, it := range options {
			names[i] = it.Name
		}
		it := MustRequirement(v1.LabelInstanceType, v1.OpIn, names...)
		it.MinValues = reqs.Get(v1.LabelInstanceType).MinValues
		reqs[v1.LabelInstanceType] = it
		plan := &NodeClaimPlan{
			Name: c.name, NodePool: c.pool.np.Name, Requirements: reqs,
			Labels: c.pool.np.Spec.Template.Labels, Annotations: c.pool.np.Spec.Template.Annotations,
			Taints: c.pool.taints, StartupTaints: c.pool.np.Spec.Template.Spec.StartupTaints,
			InstanceTypeOptions: options, InstanceType: options[0], Offering: prices[options[0]],
			Requests: c.requests,
		}
		for _, p := range c.pods {
			plan.Pods = append(plan.Pods, p.pod)
		}
		r.NodeClaims = append(r.NodeClaims, plan)
	}
	for _, ns := range s.nodes {
		if len(ns.placed) == 0 {
			continue
		}
		ep := &ExistingPlacement{Node: ns.node}
		for _, p := range ns.placed {
			ep.Pods = append(ep.Pods, p.pod)
		}
		r.Existing = append(r.Existing, ep)
	}
	sort.SliceStable(r.Unschedulable, func(i, j int) bool {
		a, b := r.Unschedulable[i].Pod, r.Unschedulable[j].Pod
		return a.Namespace+"/"+a.Name < b.Namespace+"/"+b.Name
	})
	return r
}

// constraintSignature identifies pods whose node constraints are identical, whatever
// their resources: such pods get the same answer from every pool.
func constraintSignature(pod *corev1.Pod) string {
	raw, _ := json.Marshal(struct {
		NS          string
		Selector    map[string]string
		Affinity    *corev1.Affinity
		Tolerations []corev1.Toleration
	}{pod.Namespace, pod.Spec.NodeSelector, pod.Spec.Affinity, pod.Spec.Tolerations})
	return string(raw)
}

// bucket holds the pending replicas of one workload shape: same constraints, labels
// and requests, so one answer about the head pod holds for the rest.
type bucket struct {
	pods []*podInfo
	next int
}

func (b *bucket) head() *podInfo {
	for b.next < len(b.pods) && b.pods[b.next].placed {
		b.next++
	}
	if b.next == len(b.pods) {
		return nil
	}
	return b.pods[b.next]
}

func (s *solver) buildBuckets(pods []*podInfo) {
	index := map[string]*bucket{}
	for _, p := range pods {
		raw, _ := json.Marshal(p.pod.Spec.TopologySpreadConstraints)
		key := fmt.Sprintf("%d|%s|%s|%s", p.class, raw, labelSignature(p.pod.Namespace, p.pod.Labels), p.requests)
		b, ok := index[key]
		if !ok {
			b = &bucket{}
			index[key] = b
			s.buckets = append(s.buckets, b)
		}
		b.pods = append(b.pods, p)
	}
}

// fill packs a newly opened claim with pending pods, each time taking the workload
// whose request best aligns with the claim's remaining capacity (the dot-product
// heuristic for vector bin packing). Filling node by node this way uses cpu and
// memory together, where first-fit in size order fills one and strands the other.
func (s *solver) fill(c *claim) {
	failed := map[*bucket]bool{}
	for {
		var best *bucket
		bestScore := -1.0
		a := c.target.Allocatable
		if a.MilliCPU == 0 || a.Memory == 0 {
			return
		}
		remCPU := float64(c.remaining.MilliCPU) / float64(a.MilliCPU)
		remMem := float64(c.remaining.Memory) / float64(a.Memory)
		live := s.buckets[:0]
		for _, b := range s.buckets {
			p := b.head()
			if p == nil {
				continue
			}
			live = append(live, b)
			if failed[b] || !p.requests.Fits(c.remaining) {
				continue
			}
			score := float64(p.requests.MilliCPU)/float64(a.MilliCPU)*remCPU + float64(p.requests.Memory)/float64(a.Memory)*remMem
			if score > bestScore {
				best, bestScore = b, score
			}
		}
		s.buckets = live
		if best == nil {
			break
		}
		p := best.head()
		if s.addToClaim(c, p) != nil {
			failed[best] = true
			continue
		}
		s.markPlaced(p)
	}
	if !s.minPod.Fits(c.remaining) {
		for i, open := range s.active {
			if open == c {
				s.active = append(s.active[:i], s.active[i+1:]...)
				break
			}
		}
	}
}
