package scheduling

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"

	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/controller/commitment"
)

// Snapshot is the cluster as the engine sees it, for other controllers that plan
// with it (disruption): pending pods, schedulable nodes and in-flight claims with
// their pods, ready pools with their instance types, and daemonset pods.
type Snapshot struct {
	Pending       []*corev1.Pod
	Nodes         []*ExistingNode
	Pools         []*v1.NodePool
	InstanceTypes map[string][]*InstanceType
	DaemonSetPods []*corev1.Pod
	NodeCosts     NodeCosts
	PoolUsage     map[string]PoolUsage
	// Claims by name, for taking what a claim holds out of its pool's usage.
	Claims map[string]*v1.NodeClaim
	// VolumeRequirements are what pods' volumes require of their nodes.
	VolumeRequirements map[types.UID]VolumeTopology
	// VolumeAttachments are the volumes pods attach, by CSI driver.
	VolumeAttachments map[types.UID]AttachedVolumes
	// Refused are the pending pods no node can take as things are (their volumes
	// keep kube-scheduler from placing them anywhere), with why; they are not in
	// Pending.
	Refused []PodError
	// Commitments are the Reserved Instances and Savings Plans plans are priced
	// with (nil: none).
	Commitments *commitment.Ledger
}

// PlanWithout plans pods onto the cluster as if the named nodes (or claims) were
// gone: how disruption and interruption find what replaces capacity.
func (s *Snapshot) PlanWithout(gone sets.Set[string], pods []*corev1.Pod) *Results {
	return s.Plan(gone, pods, true)
}

// Plan is PlanWithout; without launch it places pods on the remaining nodes only,
// and reports the rest unschedulable.
func (s *Snapshot) Plan(gone sets.Set[string], pods []*corev1.Pod, launch bool) *Results {
	nodes := make([]*ExistingNode, 0, len(s.Nodes))
	for _, n := range s.Nodes {
		if !gone.Has(n.Name) {
			nodes = append(nodes, n)
		}
	}
	return s.PlanOn(nodes, gone, pods, launch)
}

// PlanOn plans pods onto the given nodes, in order (the engine fills the first
// that fits), with the claims named in gone taken out of their pools' usage: how
// consolidation tries the cluster with some nodes emptied.
func (s *Snapshot) PlanOn(nodes []*ExistingNode, gone sets.Set[string], pods []*corev1.Pod, launch bool) *Results {
	return Solve(s.InputOn(nodes, gone, pods, launch))
}

// InputOn is the engine's input PlanOn solves: for a caller that checks a plan
// against what it was made from.
func (s *Snapshot) InputOn(nodes []*ExistingNode, gone sets.Set[string], pods []*corev1.Pod, launch bool) Input {
	// The claims planned away are going: their replacements take their place
	// toward the pools' limits, as in Karpenter.
	usage := s.PoolUsage
	if usage != nil && gone.Len() > 0 {
		usage = make(map[string]PoolUsage, len(s.PoolUsage))
		for pool, u := range s.PoolUsage {
			usage[pool] = u
		}
		for name := range gone {
			nc, ok := s.Claims[name]
			if !ok {
				continue
			}
			pool, held := ClaimHolds(nc)
			if u, ok := usage[pool]; ok {
				u.Resources, u.Nodes = u.Resources.Sub(held), u.Nodes-1
				usage[pool] = u
			}
		}
	}
	pools := s.Pools
	if !launch {
		pools = nil
	}
	return Input{Pods: pods, Nodes: nodes, NodePools: pools, InstanceTypes: s.InstanceTypes, DaemonSetPods: s.DaemonSetPods,
		NodeCosts: &s.NodeCosts, PoolUsage: usage, VolumeRequirements: s.VolumeRequirements, VolumeAttachments: s.VolumeAttachments, Commitments: s.Commitments}
}

// Pool returns the ready pool of that name, or nil.
func (s *Snapshot) Pool(name string) *v1.NodePool {
	for _, np := range s.Pools {
		if np.Name == name {
			return np
		}
	}
	return nil
}

// FreeingReservation is the snapshot as it will be once a node holding a place in
// the capacity reservation id has gone: the reservation's offerings are available
// again. The snapshot itself is unchanged; types without such an offering are
// shared.
func (s *Snapshot) FreeingReservation(id string) *Snapshot {
	out := *s
	out.InstanceTypes = make(map[string][]*InstanceType, len(s.InstanceTypes))
	for pool, types := range s.InstanceTypes {
		freed := make([]*InstanceType, len(types))
		for i, it := range types {
			freed[i] = it.withReservationFreed(id)
		}
		out.InstanceTypes[pool] = freed
	}
	return &out
}
