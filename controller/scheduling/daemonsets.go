package scheduling

import (
	corev1 "k8s.io/api/core/v1"
)

// daemonSet is one DaemonSet's pod as the engine reserves it on new nodes.
type daemonSet struct {
	requests    Resources
	tolerations []corev1.Toleration
	hostPorts   []hostPort
	// terms are its required node-affinity terms (with its node selector), ORed;
	// nil when it runs on every node whose taints it tolerates.
	terms []Requirements
}

// OwnedByDaemonSet reports whether a DaemonSet owns the pod.
func OwnedByDaemonSet(pod *corev1.Pod) bool {
	for _, o := range pod.OwnerReferences {
		if o.Kind == "DaemonSet" {
			return true
		}
	}
	return false
}

func newDaemonSets(pods []*corev1.Pod) []daemonSet {
	out := make([]daemonSet, 0, len(pods))
	for _, pod := range pods {
		info, err := newPodInfo(pod, nil)
		if err != nil {
			// Affinity that does not parse matches no node, for the DaemonSet
			// controller too.
			continue
		}
		ds := daemonSet{requests: PodRequests(pod), tolerations: pod.Spec.Tolerations, hostPorts: podHostPorts(pod)}
		if !(len(info.requiredTerms) == 1 && len(info.requiredTerms[0]) == 0) {
			ds.terms = info.requiredTerms
		}
		out = append(out, ds)
	}
	return out
}

// landsOn reports whether the DaemonSet runs on a node of a pool with these
// requirements and of this instance type (nil: any of the pool's). Its node
// affinity needs only be compatible: a new node's labels are not all known yet.
// A custom label the pool does not give its nodes is one they will not have.
func (d *daemonSet) landsOn(reqs Requirements, it *InstanceType) bool {
	if d.terms == nil {
		return true
	}
	for _, term := range d.terms {
		if reqs.Intersects(term) != nil {
			continue
		}
		if it == nil || it.compatible(term) {
			return true
		}
	}
	return false
}

// reserveDaemonSets works out what the DaemonSets take of each new node of a pool.
// A DaemonSet runs once the node's startup taints are gone, so only the pool's
// taints keep it off; whether it runs is decided per instance type, since its
// affinity may select some types only. What runs on every type is the pool's
// overhead (with its host ports); what runs on some is taken out of those types'
// allocatable, on copies of them private to this solve.
func (ps *poolState) reserveDaemonSets(daemonSets []daemonSet) {
	extra := map[*InstanceType]Resources{}
	for i := range daemonSets {
		ds := &daemonSets[i]
		if toleratesAll(ds.tolerations, ps.taints) != nil || !ds.landsOn(ps.requirements, nil) {
			continue
		}
		var on []*InstanceType
		if ds.terms != nil {
			for _, it := range ps.instanceTypes {
				if ds.landsOn(ps.requirements, it) {
					on = append(on, it)
				}
			}
		}
		if ds.terms == nil || len(on) == len(ps.instanceTypes) {
			ps.daemonOverhead = ps.daemonOverhead.Add(ds.requests)
			ps.daemonHostPorts = append(ps.daemonHostPorts, ds.hostPorts...)
			continue
		}
		for _, it := range on {
			extra[it] = extra[it].Add(ds.requests)
		}
	}
	if len(extra) == 0 {
		return
	}
	types := make([]*InstanceType, len(ps.instanceTypes))
	for i, it := range ps.instanceTypes {
		types[i] = it
		if r, ok := extra[it]; ok {
			reserved := *it
			reserved.Overhead = it.Overhead.Add(r)
			reserved.Allocatable = it.Allocatable.Sub(r)
			types[i] = &reserved
		}
	}
	ps.instanceTypes = types
}
