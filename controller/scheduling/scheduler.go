package scheduling

import (
	"fmt"
	"math"
	"sort"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"

	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/controller/commitment"
)

type poolState struct {
	index         int
	np            *v1.NodePool
	requirements  Requirements
	taints        []corev1.Taint
	instanceTypes []*InstanceType
	// daemonOverhead is what the DaemonSets that run on every node of the pool
	// request, daemonHostPorts the host ports they hold.
	daemonOverhead  Resources
	daemonHostPorts []hostPort
	limits          corev1.ResourceList
	usage           Resources
	nodes           int64
	// demand is the unplaced requests of the pods this pool admits; it steers which
	// instance type a new claim is sized for. absorbed is the part of it the
	// existing nodes' free room will take (markAbsorbed), which no new claim needs
	// to be sized for.
	demand, absorbed Resources
	universes        map[string]sets.Set[string]
	// spend is what the pool's nodes and claims cost per hour at the prices the
	// engine plans with; spendLimit its dovetail.sh/usd-per-hour limit.
	spend        float64
	spendLimit   float64
	spendLimited bool
	// spendCapped is set when the limit kept a node from being planned.
	spendCapped bool
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
	// sizedByDemand marks a claim opened when some type could hold everything its
	// pool had left to place: the tail of a solve.
	sizedByDemand bool
	// price is what the claim's target costs per hour as planned, use what it
	// took from the commitments (when the solve tracks prices).
	price float64
	use   commitment.Use
}

// poolOptions are a pool's types compatible with a pod class's requirements:
// those the engine plans with, and the burstable ones it leaves out unless no other
// type can hold the pod.
type poolOptions struct {
	kept, burstable []*InstanceType
}

type nodeState struct {
	node      *ExistingNode
	remaining Resources
	hostPorts []hostPort
	// attached are the volumes the node's pods attach, tracked only on a node
	// with volume limits.
	attached AttachedVolumes
	placed   []*podInfo
}

type solver struct {
	pools []*poolState
	nodes []*nodeState
	// roomy are the nodes, in order, that still have room for the smallest pending
	// pod: on a large cluster most nodes are full, and each pod would try them all.
	roomy      []*nodeState
	active     []*claim
	claims     []*claim
	topology   *topology
	minPod     Resources
	errors     []PodError
	admitCache map[admitKey]error
	shapes     []*shape
	// optionCache holds, per pod class and pool, the pool's types compatible with
	// the pod's requirements, before resources: replicas reuse it.
	optionCache map[admitKey]poolOptions
	catalogs    map[string][]*InstanceType
	costs       NodeCosts
	// universes caches the domains of a spread by key and node filter: groups
	// spreading on the same key over the same nodes share them (read only).
	universes map[string]sets.Set[string]
	// firstFit plans as first-fit decreasing does (Karpenter's way): a claim is
	// sized for the largest type its pods allow and takes pods in size order,
	// shrunk to the cheapest type that holds them at the end.
	firstFit bool
	// ledger is what the commitments still pay for (nil: none); spendLimited is
	// set when some pool limits its spend.
	ledger       *commitment.Ledger
	spendLimited bool
}

// Solve places pods onto existing capacity and new NodeClaims. It never fails as a
// whole: a pod that cannot be placed is reported with its reason.
func Solve(in Input) *Results {
	r, s := plan(in, false)
	return s.repackTail(in, r)
}

func plan(in Input, firstFit bool) (*Results, *solver) {
	s := &solver{topology: newTopology(), admitCache: map[admitKey]error{}, optionCache: map[admitKey]poolOptions{}, catalogs: in.InstanceTypes, costs: DefaultNodeCosts(), firstFit: firstFit,
		universes: map[string]sets.Set[string]{}}
	if in.NodeCosts != nil {
		s.costs = *in.NodeCosts
	}
	s.buildPools(in)
	s.buildSpend(in)
	// Nodes come before pods: a spread's domains include those only existing nodes
	// have. Their pods are counted once the pending pods' groups exist.
	s.buildNodes(in.Nodes, in.VolumeAttachments)
	pods := s.buildPods(in.Pods, in.VolumeRequirements, in.VolumeAttachments)
	s.recordBoundPods()
	for _, p := range pods {
		for _, g := range s.topology.matchingPod(p) {
			g.pending++
		}
	}
	s.minPod = Resources{MilliCPU: math.MaxInt64, Memory: math.MaxInt64, Pods: 1}
	for _, p := range pods {
		s.minPod.MilliCPU = min(s.minPod.MilliCPU, p.requests.MilliCPU)
		s.minPod.Memory = min(s.minPod.Memory, p.requests.Memory)
	}
	for _, ns := range s.nodes {
		if s.minPod.Fits(ns.remaining) {
			s.roomy = append(s.roomy, ns)
		}
	}
	sortPods(pods)
	s.buildBuckets(pods)
	s.markAbsorbed(pods)
	var waiting []*podInfo
	for _, p := range pods {
		if p.placed {
			continue
		}
		if s.waitsForPeers(p) {
			waiting = append(waiting, p)
			continue
		}
		s.place(p)
	}
	s.placeWaiting(waiting)
	return s.results(), s
}

// waitsForPeers reports whether a pod's required pod affinity matches no pod placed
// yet while pods it would match are still to be placed: it goes after them, as
// Karpenter re-queues such a pod while its batch makes progress, so a pod listed
// (or sized) before the pod it must run beside is not left Pending.
func (s *solver) waitsForPeers(p *podInfo) bool {
	for _, g := range p.topology {
		if g.kind == topologyAffinity && !g.preference && g.total == 0 && g.pending > 0 && !g.matches(p.pod.Namespace, p.pod.Labels) {
			return true
		}
	}
	return false
}

// placeWaiting places the pods that waited for their affinity's targets, round
// after round while some target got placed (chains: ui needs cache needs web needs
// db). What still waits when a round changes nothing waits on itself, and is placed
// now to be reported with the reason.
func (s *solver) placeWaiting(waiting []*podInfo) {
	for len(waiting) > 0 {
		var still []*podInfo
		progressed := false
		for _, p := range waiting {
			if p.placed {
				progressed = true
				continue
			}
			if s.waitsForPeers(p) {
				still = append(still, p)
				continue
			}
			s.place(p)
			progressed = true
		}
		if !progressed {
			for _, p := range still {
				if !p.placed {
					s.place(p)
				}
			}
			return
		}
		waiting = still
	}
}

// sortPods orders pods largest first (cpu, then memory): first-fit decreasing,
// after the pods whose replicas must spread over nodes. Among pods of one size,
// those with required topology rules (which others may count on) go before those
// without, and those whose rules are only preferences last, so the plan does not
// depend on which sorts first by name.
func sortPods(pods []*podInfo) {
	first := make(map[*podInfo]bool, len(pods))
	rank := make(map[*podInfo]int, len(pods))
	for _, p := range pods {
		first[p] = p.spreadsOverHosts()
		rank[p] = topologyRank(p)
	}
	sort.SliceStable(pods, func(i, j int) bool {
		if hi, hj := first[pods[i]], first[pods[j]]; hi != hj {
			return hi
		}
		a, b := pods[i].requests, pods[j].requests
		if a.MilliCPU != b.MilliCPU {
			return a.MilliCPU > b.MilliCPU
		}
		if a.Memory != b.Memory {
			return a.Memory > b.Memory
		}
		if ri, rj := rank[pods[i]], rank[pods[j]]; ri != rj {
			return ri < rj
		}
		return pods[i].key < pods[j].key
	})
}

// topologyRank is 0 for a pod with a required topology rule, 1 for one with none,
// 2 for one whose rules are all preferences.
func topologyRank(p *podInfo) int {
	if len(p.topology) == 0 {
		return 1
	}
	for _, g := range p.topology {
		if !g.preference {
			return 0
		}
	}
	return 2
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
	daemonSets := newDaemonSets(in.DaemonSetPods)
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
		ps.reserveDaemonSets(daemonSets)
		s.pools = append(s.pools, ps)
	}
	if in.PoolUsage != nil {
		for _, ps := range s.pools {
			ps.usage, ps.nodes = in.PoolUsage[ps.np.Name].Resources, in.PoolUsage[ps.np.Name].Nodes
		}
		return
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

func (s *solver) buildPods(pods []*corev1.Pod, volumes map[types.UID]VolumeTopology, attachments map[types.UID]AttachedVolumes) []*podInfo {
	out := make([]*podInfo, 0, len(pods))
	classes := map[string]int{}
	for _, pod := range pods {
		p, err := newPodInfo(pod, volumes[pod.UID])
		if err != nil {
			s.errors = append(s.errors, PodError{Pod: pod, Reason: err.Error()})
			continue
		}
		if err := s.topology.addPod(p, s.universe); err != nil {
			s.errors = append(s.errors, PodError{Pod: pod, Reason: err.Error()})
			continue
		}
		p.attached = attachments[pod.UID]
		// Replicas whose volumes are in different zones answer differently.
		sig := constraintSignature(pod) + p.volume.String()
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

func (s *solver) buildNodes(nodes []*ExistingNode, attachments map[types.UID]AttachedVolumes) {
	for _, n := range nodes {
		ns := &nodeState{node: n, remaining: n.Allocatable}
		if len(n.VolumeLimits) > 0 {
			ns.attached = AttachedVolumes{}
		}
		for _, pod := range n.Pods {
			ns.remaining = ns.remaining.Sub(PodRequests(pod))
			ns.hostPorts = append(ns.hostPorts, podHostPorts(pod)...)
			if ns.attached != nil {
				ns.attached.add(attachments[pod.UID])
			}
		}
		s.nodes = append(s.nodes, ns)
	}
}

// recordBoundPods counts the pods bound to existing nodes in the groups that
// select them, and registers their own anti-affinity, which keeps matching pending
// pods away.
func (s *solver) recordBoundPods() {
	for _, ns := range s.nodes {
		for _, pod := range ns.node.Pods {
			var owned []*topologyGroup
			if pod.Spec.Affinity != nil && pod.Spec.Affinity.PodAntiAffinity != nil {
				if info, err := newPodInfo(pod, nil); err == nil && s.topology.addPod(info, s.universe) == nil {
					owned = info.topology
				}
			}
			s.topology.record(s.topology.matching(pod.Namespace, pod.Labels), owned, s.nodeDomain(ns), s.nodeCounts(ns))
		}
	}
}

// nodeCounts says whether a spread counts pods on an existing node.
func (s *solver) nodeCounts(ns *nodeState) func(*nodeFilter) bool {
	return func(f *nodeFilter) bool { return f.matchesNode(ns.node.Labels, ns.node.Taints) }
}

// claimCounts says whether a spread counts pods on a planned node.
func claimCounts(c *claim) func(*nodeFilter) bool {
	return func(f *nodeFilter) bool { return f.matchesRequirements(c.reqs, c.pool.taints) }
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

// universe is the set of domains a spread on key can use: what the pools allow for
// that key and what existing nodes have, among the nodes the spread counts (f). As
// in Kubernetes, a pool whose taints the pod does not tolerate still counts unless
// the spread honors taints, and only the pod's required node affinity narrows it.
func (s *solver) universe(key string, f *nodeFilter) sets.Set[string] {
	cacheKey := key
	if f != nil {
		cacheKey += "|" + f.id
	}
	if u, ok := s.universes[cacheKey]; ok {
		return u
	}
	out := sets.New[string]()
	defer func() { s.universes[cacheKey] = out }()
	for _, ps := range s.pools {
		if !f.toleratesTaints(ps.taints) {
			continue
		}
		if f != nil && !f.matchesRequirements(ps.requirements, nil) {
			continue
		}
		for v := range s.poolDomains(ps, key) {
			if f.allowsValue(key, v) {
				out.Insert(v)
			}
		}
	}
	for _, n := range s.nodes {
		if v, ok := n.node.Labels[key]; ok && f.matchesNode(n.node.Labels, n.node.Taints) {
			out.Insert(v)
		}
	}
	return out
}

// poolDomains are the values of key a pool's nodes can have: those of its instance
// types that its requirement allows, or where the types do not say (a label of the
// pool's own), its requirement's. A value the pool lists but no type offers (a
// zone it has no capacity in, reserved capacity without a reservation) is no
// domain: no node will ever be in it.
func (s *solver) poolDomains(ps *poolState, key string) sets.Set[string] {
	if vals, ok := ps.universes[key]; ok {
		return vals
	}
	vals := sets.New[string]()
	typed := false
	for _, it := range ps.instanceTypes {
		if r, ok := it.Requirements[key]; ok && !r.complement {
			typed = true
			for _, v := range r.Values() {
				if ps.requirements.Get(key).Has(v) {
					vals.Insert(v)
				}
			}
		}
	}
	if r, ok := ps.requirements[key]; ok && !r.complement && !typed {
		vals.Insert(r.Values()...)
	}
	ps.universes[key] = vals
	return vals
}

type admitKey struct{ class, term, vterm, preferred, pool int }

// admits is poolAdmits cached per pod class and relaxation state: replicas of one
// workload ask the same question of every claim.
func (s *solver) admits(ps *poolState, p *podInfo) error {
	k := admitKey{p.class, p.term, p.vterm, p.preferred, ps.index}
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
			if !s.firstFit {
				s.fill(c)
			}
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
	for _, g := range s.topology.matchingPod(p) {
		g.pending--
	}
	if p.bucket != nil {
		p.bucket.unplaced--
	}
	for _, i := range p.pools {
		s.pools[i].demand = s.pools[i].demand.Sub(p.requests)
		if p.absorbed {
			s.pools[i].absorbed = s.pools[i].absorbed.Sub(p.requests)
		}
	}
}

// markAbsorbed finds, in placing order, the pods the existing nodes' free room
// will take: each pod goes to the first node that fits it, as tryExisting places
// it before any claim is tried. Their requests are left out of the demand new
// claims are sized for. Without this, a claim opened for a large pod was sized
// for the small pods too, which then went to the existing nodes anyway: planning
// the pods of two nodes with two large and seven small pods each, where the rest
// of the cluster had room for the small ones, opened four nodes of one large pod
// each (sized for a mix of large and small) where one node holds the four.
// Pods that topology constrains or selects, or that need host ports, are left
// in the demand: whether a node takes them depends on where others go. Room only
// shrinks, so once one replica of a bucket fits nowhere its fellows are not tried.
func (s *solver) markAbsorbed(pods []*podInfo) {
	if len(s.roomy) == 0 {
		return
	}
	free := make([]Resources, len(s.roomy))
	for i, ns := range s.roomy {
		free[i] = ns.remaining
	}
	noRoom := map[*bucket]bool{}
	for _, p := range pods {
		if p.placed || noRoom[p.bucket] || len(p.pools) == 0 || len(p.hostPorts) > 0 || len(p.topology) > 0 || len(s.topology.matchingPod(p)) > 0 {
			continue
		}
		noRoom[p.bucket] = true
		for i, ns := range s.roomy {
			if !p.requests.Fits(free[i]) || toleratesAll(p.tolerations, ns.node.Taints) != nil || !labelsSatisfy(ns.node.Labels, p.requirements) {
				continue
			}
			free[i] = free[i].Sub(p.requests)
			p.absorbed = true
			delete(noRoom, p.bucket)
			for _, j := range p.pools {
				s.pools[j].absorbed = s.pools[j].absorbed.Add(p.requests)
			}
			break
		}
	}
}

func (s *solver) tryExisting(p *podInfo) bool {
	for i, ns := range s.roomy {
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
		if ns.attached.exceeds(ns.node.VolumeLimits, p.attached) {
			continue
		}
		domainOf := s.nodeDomain(ns)
		if s.topologyBlocks(p, domainOf) {
			continue
		}
		ns.remaining = ns.remaining.Sub(p.requests)
		ns.hostPorts = append(ns.hostPorts, p.hostPorts...)
		if ns.attached != nil {
			ns.attached.add(p.attached)
		}
		ns.placed = append(ns.placed, p)
		s.topology.record(s.topology.matchingPod(p), p.topology, domainOf, s.nodeCounts(ns))
		if !s.minPod.Fits(ns.remaining) {
			s.roomy = append(s.roomy[:i], s.roomy[i+1:]...)
		}
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

// spreadsOverHosts reports whether the pod's own replicas must spread over nodes
// (hostname anti-affinity or spread): each of them needs a node the others are not
// on, so they go first and the pods placed after them fill around them, rather than
// arriving last and opening nodes of their own.
func (p *podInfo) spreadsOverHosts() bool {
	for _, g := range p.topology {
		if g.key == v1.LabelHostname && g.kind != topologyAffinity && g.matches(p.pod.Namespace, p.pod.Labels) {
			return true
		}
	}
	return false
}
