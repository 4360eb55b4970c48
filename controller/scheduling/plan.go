package scheduling

import (
	"slices"
	"sort"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/controller/commitment"
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
	// NodeCosts price what a node costs beyond its instance; nil means
	// DefaultNodeCosts.
	NodeCosts *NodeCosts
	// PoolUsage, when set, is what each pool already holds toward its limits (see
	// UsageOfClaims) instead of the sum of Nodes: capacity being deleted, cordoned
	// or disrupted is no place for pods, but its instances still count.
	PoolUsage map[string]PoolUsage
	// VolumeRequirements are, per pod, what its volumes require of its node (see
	// Volumes.Requirements): a pod with a bound zonal volume goes to that zone.
	VolumeRequirements map[types.UID]VolumeTopology
	// VolumeAttachments are, per pod (pending or bound), the volumes it attaches by
	// CSI driver (see Volumes.Attachments): an existing node takes no more than its
	// VolumeLimits.
	VolumeAttachments map[types.UID]AttachedVolumes
	// Commitments are the Reserved Instances and Savings Plans the cluster may use
	// (nil: none). The engine charges the existing on-demand nodes to them first,
	// then plans new on-demand capacity at what it adds to the bill with what is
	// left: 0 while a reservation lasts, a Savings Plan's rate while its hourly
	// commitment does. It does not change the ledger given.
	Commitments *commitment.Ledger
	// charged is a ledger already charged with the rest of a solve, for a re-plan
	// of part of it.
	charged *commitment.Ledger
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
	// PlannedPrice is what a claim still launching was planned at, for a spend
	// limit to count while its offering is unknown; NaN or 0 when not known.
	PlannedPrice float64
	// VolumeLimits are how many volumes each CSI driver may attach to the node, as
	// its CSINode reports; a driver not listed attaches any number.
	VolumeLimits map[string]int
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
	// InstanceType and Offering are the cheapest of the options. The offering's
	// price is what the node adds to the bill: commitments applied.
	InstanceType *InstanceType
	Offering     Offering
	// ListPrice is the offering's price without commitments; CoveredBy names the
	// commitment that pays for the node ("" when none does).
	ListPrice float64
	CoveredBy string
	Pods      []*corev1.Pod
	// Requests is the pods' requests plus daemonset overhead.
	Requests Resources
	// SizedByDemand is set when the node's type was chosen while some type could
	// hold every pod its pool had left to place: the tail of the plan, and every
	// node of a plan smaller than the pool's largest type. While pods are still
	// arriving, more of them would size it differently (a larger type than the
	// full small node the gathered pods chose).
	SizedByDemand bool
}

// Launched is the node the plan becomes once launched as its cheapest offering,
// named name: the claim's labels with its type's and the offering's, the type's
// resources, the plan's pods on it. Work done in waves (drift replacing a budget's
// worth of nodes at a time) plans a later wave beside an earlier one's nodes.
func (p *NodeClaimPlan) Launched(name string) *ExistingNode {
	labels := p.Requirements.Labels()
	for k, v := range p.InstanceType.Requirements.Labels() {
		labels[k] = v
	}
	for k, v := range p.Labels {
		labels[k] = v
	}
	labels[v1.LabelTopologyZone], labels[v1.LabelCapacityType] = p.Offering.Zone, p.Offering.CapacityType
	labels[v1.LabelNodePool], labels[v1.LabelHostname] = p.NodePool, name
	return &ExistingNode{Name: name, Labels: labels, Taints: p.Taints, Capacity: p.InstanceType.Capacity, Allocatable: p.InstanceType.Allocatable,
		Pods: slices.Clone(p.Pods), NodePool: p.NodePool, PlannedPrice: p.Offering.Price}
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
	// SpendLimited are the pools whose dovetail.sh/usd-per-hour limit kept a node
	// from being planned, with what the pool spends per hour as planned.
	SpendLimited map[string]float64
}

// PricePerHour is the total price of the new NodeClaims.
func (r *Results) PricePerHour() float64 { return PriceOf(r.NodeClaims) }

// costPerHour is the new claims' price plus what each node costs beyond it: what
// the engine minimizes.
func (r *Results) costPerHour(costs NodeCosts) float64 {
	total := 0.0
	for _, nc := range r.NodeClaims {
		total += nc.Offering.Price + costs.PerNode(nc.InstanceType)
	}
	return total
}

// PriceOf is what the planned claims' offerings cost per hour.
func PriceOf(plans []*NodeClaimPlan) float64 {
	total := 0.0
	for _, nc := range plans {
		total += nc.Offering.Price
	}
	return total
}

func (s *solver) results() *Results {
	r := &Results{Unschedulable: s.errors}
	for _, ps := range s.pools {
		if ps.spendCapped {
			if r.SpendLimited == nil {
				r.SpendLimited = map[string]float64{}
			}
			r.SpendLimited[ps.np.Name] = ps.spend
		}
	}
	for _, c := range s.claims {
		options := filterFits(c.options, c.requests)
		reqs := c.reqs.Copy()
		if c.use.Covered() {
			options = s.pinToCommitment(c, reqs, options)
		}
		prices := make(map[*InstanceType]Offering, len(options))
		for _, it := range options {
			o, _ := it.cheapestOffering(reqs)
			prices[it] = o
		}
		sort.SliceStable(options, func(i, j int) bool {
			pi, pj := prices[options[i]].Price, prices[options[j]].Price
			if pi != pj {
				return pi < pj
			}
			return options[i].Name < options[j].Name
		})
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
			Requests: c.requests, SizedByDemand: c.sizedByDemand, ListPrice: prices[options[0]].Price,
		}
		if c.use.Covered() {
			plan.Offering.Price, plan.CoveredBy = s.recharge(c, options[0], plan.Offering), c.use.By
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
