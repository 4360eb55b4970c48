package plancheck

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"

	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/controller/scheduling"
)

// Plan checks a whole plan against its input: every option of every new claim
// (Claim, with each type's allocatable before DaemonSets and the DaemonSets that
// would run on the node worked out here), every pod placed on an existing node,
// every pod accounted for once, and no pod left unschedulable that a type of a
// pool could host alone.
func Plan(in scheduling.Input, r *scheduling.Results) []Violation {
	var out []Violation
	daemonSets := in.DaemonSetPods
	if daemonSets == nil {
		daemonSets = []*corev1.Pod{}
	}
	for _, nc := range r.NodeClaims {
		capacity := Capacity{Allocatable: map[string]scheduling.Resources{}, DaemonSetPods: daemonSets}
		for _, it := range in.InstanceTypes[nc.NodePool] {
			capacity.Allocatable[it.Name] = it.Allocatable
		}
		for _, vs := range sortedByOption(Claim(nc, capacity)) {
			out = append(out, vs...)
		}
	}
	for _, e := range r.Existing {
		out = append(out, existing(e)...)
		out = append(out, volumeLimits(e, in.VolumeAttachments)...)
	}
	out = append(out, accounted(in, r)...)
	out = append(out, stranded(in, r)...)
	return out
}

func sortedByOption(byOption map[string][]Violation) [][]Violation {
	names := make([]string, 0, len(byOption))
	for n := range byOption {
		names = append(names, n)
	}
	sort.Strings(names)
	out := make([][]Violation, len(names))
	for i, n := range names {
		out[i] = byOption[n]
	}
	return out
}

// existing checks the pods placed on an existing node: its labels and taints, its
// allocatable against the pods already there and those placed, and what pods on one
// node must agree on.
func existing(e *scheduling.ExistingPlacement) []Violation {
	n := e.Node
	bad := func(pod, rule, format string, args ...any) Violation {
		return Violation{Node: n.Name, Pod: pod, Rule: rule, Detail: fmt.Sprintf(format, args...)}
	}
	node := &corev1.Node{Spec: corev1.NodeSpec{Taints: n.Taints}}
	node.Name, node.Labels = n.Name, n.Labels
	var out []Violation
	need := scheduling.Resources{}
	for _, p := range n.Pods {
		need = need.Add(scheduling.PodRequests(p))
	}
	for _, p := range e.Pods {
		out = append(out, podRuns(p, nodeaffinity.GetRequiredNodeAffinity(p), node, bad)...)
		need = need.Add(scheduling.PodRequests(p))
	}
	if !need.Fits(n.Allocatable) {
		out = append(out, bad("", RuleResources, "its pods and the pods placed request %s, more than its allocatable %s", need, n.Allocatable))
	}
	// Only the placed pods' rules are the plan's; the bound pods' own conflicts
	// are none of its doing.
	for _, v := range sharedNode(append(append([]*corev1.Pod(nil), n.Pods...), e.Pods...), bad) {
		for _, p := range e.Pods {
			if v.Pod == p.Namespace+"/"+p.Name || (v.Rule == RuleHostPorts || v.Rule == RuleTopology) && mentions(v.Detail, p) {
				out = append(out, v)
				break
			}
		}
	}
	return dedupe(out)
}

// volumeLimits checks that the pods placed on an existing node attach no more
// volumes than its CSINode lets each driver attach, counting the bound pods' (a
// node already over its limit, with nothing placed that adds to it, is none of the
// plan's doing).
func volumeLimits(e *scheduling.ExistingPlacement, attachments map[types.UID]scheduling.AttachedVolumes) []Violation {
	var out []Violation
	for driver, limit := range e.Node.VolumeLimits {
		bound, all := sets.New[string](), sets.New[string]()
		for _, p := range e.Node.Pods {
			bound.Insert(attachments[p.UID][driver].UnsortedList()...)
		}
		all.Insert(bound.UnsortedList()...)
		for _, p := range e.Pods {
			all.Insert(attachments[p.UID][driver].UnsortedList()...)
		}
		if all.Len() > limit && all.Len() > bound.Len() {
			out = append(out, Violation{Node: e.Node.Name, Rule: RuleVolumeLimits,
				Detail: fmt.Sprintf("its pods and the pods placed attach %d volumes of %s, more than the %d its CSINode allows", all.Len(), driver, limit)})
		}
	}
	return out
}

func mentions(detail string, p *corev1.Pod) bool {
	return strings.Contains(detail, p.Namespace+"/"+p.Name)
}

// accounted checks that every pod of the input is placed once or reported once.
func accounted(in scheduling.Input, r *scheduling.Results) []Violation {
	seen := map[*corev1.Pod]string{}
	var out []Violation
	note := func(p *corev1.Pod, where string) {
		if prev, ok := seen[p]; ok {
			out = append(out, Violation{Node: where, Pod: p.Namespace + "/" + p.Name, Rule: RuleStranded, Detail: "planned twice: also on " + prev})
		}
		seen[p] = where
	}
	for _, nc := range r.NodeClaims {
		for _, p := range nc.Pods {
			note(p, nc.Name)
		}
	}
	for _, e := range r.Existing {
		for _, p := range e.Pods {
			note(p, e.Node.Name)
		}
	}
	for _, u := range r.Unschedulable {
		note(u.Pod, "unschedulable")
	}
	for _, p := range in.Pods {
		if _, ok := seen[p]; !ok {
			out = append(out, Violation{Pod: p.Namespace + "/" + p.Name, Rule: RuleStranded, Detail: "neither placed nor reported unschedulable"})
		}
	}
	return out
}

// stranded checks the pods left unschedulable that nothing but a node could stop:
// a pod with no pod (anti-)affinity, spread, host port or volume, which some
// instance type of a pool with no limits could host alone (the pool's
// requirements met, the pod's affinity and tolerations, its requests and the
// DaemonSets beside it within the type's allocatable), is a pod the plan strands.
func stranded(in scheduling.Input, r *scheduling.Results) []Violation {
	var out []Violation
	// Replicas share a spec: one verdict serves them all.
	var hostable []corev1.PodSpec
	var unhostable []corev1.PodSpec
	for _, u := range r.Unschedulable {
		p := u.Pod
		if !standalone(p) || len(in.VolumeRequirements[p.UID]) > 0 || containsSpec(unhostable, p.Spec) {
			continue
		}
		if containsSpec(hostable, p.Spec) {
			out = append(out, Violation{Pod: p.Namespace + "/" + p.Name, Rule: RuleStranded, Detail: "left unschedulable (" + u.Reason + ") though a replica of the same spec was found a node that could run it"})
			continue
		}
		found := false
		for _, np := range in.NodePools {
			if np.Spec.Replicas != nil || np.DeletionTimestamp != nil || len(np.Spec.Limits) > 0 || hasMinValues(np) {
				continue
			}
			if it, ok := hostsAlone(np, in.InstanceTypes[np.Name], in.DaemonSetPods, p); ok {
				out = append(out, Violation{Node: "nodepool " + np.Name, InstanceType: it, Pod: p.Namespace + "/" + p.Name, Rule: RuleStranded,
					Detail: "left unschedulable (" + u.Reason + ") though a node of this type could run it"})
				found = true
				break
			}
		}
		if found {
			hostable = append(hostable, p.Spec)
		} else {
			unhostable = append(unhostable, p.Spec)
		}
	}
	return out
}

func containsSpec(specs []corev1.PodSpec, spec corev1.PodSpec) bool {
	for i := range specs {
		if equality.Semantic.DeepEqual(specs[i], spec) {
			return true
		}
	}
	return false
}

func standalone(p *corev1.Pod) bool {
	if len(p.Spec.TopologySpreadConstraints) > 0 || len(hostPorts(p)) > 0 {
		return false
	}
	if a := p.Spec.Affinity; a != nil && (a.PodAffinity != nil || a.PodAntiAffinity != nil) {
		return false
	}
	for _, v := range p.Spec.Volumes {
		if v.PersistentVolumeClaim != nil || v.Ephemeral != nil {
			return false
		}
	}
	return true
}

func hasMinValues(np *v1.NodePool) bool {
	for _, r := range np.Spec.Template.Spec.Requirements {
		if r.MinValues != nil {
			return true
		}
	}
	return false
}

// hostsAlone reports the first type of the pool (as a node in any of its
// offerings) that could run p alone.
func hostsAlone(np *v1.NodePool, types []*scheduling.InstanceType, daemonSets []*corev1.Pod, p *corev1.Pod) (string, bool) {
	reqs, err := scheduling.FromNodePoolRequirements(np.Spec.Template.Spec.Requirements)
	if err != nil {
		return "", false
	}
	plan := &scheduling.NodeClaimPlan{Name: "alone", NodePool: np.Name, Requirements: reqs, Labels: np.Spec.Template.Labels,
		Taints: np.Spec.Template.Spec.Taints, Pods: []*corev1.Pod{p}, InstanceTypeOptions: types}
	if daemonSets == nil {
		daemonSets = []*corev1.Pod{}
	}
	c := ForClaim(plan, Capacity{DaemonSetPods: daemonSets})
	for _, it := range types {
		// Most types fail on labels; only those that pass are checked whole.
		if c.labelsFit(it) && len(c.Option(it)) == 0 {
			return it.Name, true
		}
	}
	return "", false
}
