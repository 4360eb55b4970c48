package scheduling

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
)

// fullNode is an existing node with no room left, carrying one pod of app "web".
func fullNode(name string, nodeLabels map[string]string, taints ...corev1.Taint) *ExistingNode {
	bound := pod(name+"-web", "1", "1Gi", withPodLabel("app", "web"))
	bound.Spec.NodeName = name
	labels := map[string]string{v1.LabelHostname: name}
	for k, v := range nodeLabels {
		labels[k] = v
	}
	size := FromResourceList(corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi"), corev1.ResourcePods: resource.MustParse("10")})
	return &ExistingNode{Name: name, Labels: labels, Taints: taints, Capacity: size, Allocatable: size, Pods: []*corev1.Pod{bound}}
}

// countBy counts the planned pods of a prefix by the value of key on their node.
func countBy(r *Results, key string) map[string]int {
	out := map[string]int{}
	for _, nc := range r.NodeClaims {
		out[label(nc, key)] += len(nc.Pods)
	}
	return out
}

func withNodeInclusion(affinity, taints *corev1.NodeInclusionPolicy) podOpt {
	return func(p *corev1.Pod) {
		for i := range p.Spec.TopologySpreadConstraints {
			p.Spec.TopologySpreadConstraints[i].NodeAffinityPolicy = affinity
			p.Spec.TopologySpreadConstraints[i].NodeTaintsPolicy = taints
		}
	}
}

// A spread's domains include those only existing nodes have, as kube-scheduler
// counts them: with one matching pod on a full node in the first domain and a pool
// that can launch only into the others, maxSkew 1 lets two replicas into each of
// those and no more. Planning 5+5 would buy nodes kube-scheduler leaves six of the
// pods Pending beside.
func TestSpreadCountsDomainsOnlyExistingNodesHave(t *testing.T) {
	honor, ignore := corev1.NodeInclusionPolicyHonor, corev1.NodeInclusionPolicyIgnore
	taint := corev1.Taint{Key: "dedicated", Value: "other", Effect: corev1.TaintEffectNoSchedule}
	cases := []struct {
		name string
		key  string
		node *ExistingNode
		pool *v1.NodePool
		opts []podOpt
		want map[string]int
	}{
		{"zone", v1.LabelTopologyZone, fullNode("n1", map[string]string{v1.LabelTopologyZone: "us-west-2a"}),
			nodePool("default", withRequirements(req(v1.LabelCapacityType, v1.OpIn, v1.CapacityTypeOnDemand), req(v1.LabelTopologyZone, v1.OpIn, "us-west-2b", "us-west-2c"))),
			nil, map[string]int{"us-west-2b": 2, "us-west-2c": 2}},
		{"capacity type", v1.LabelCapacityType, fullNode("n1", map[string]string{v1.LabelCapacityType: v1.CapacityTypeSpot}),
			nodePool("default"), nil, map[string]int{v1.CapacityTypeOnDemand: 2}},
		{"architecture", v1.LabelArch, fullNode("n1", map[string]string{v1.LabelArch: v1.ArchitectureArm64}),
			nodePool("default", withRequirements(req(v1.LabelCapacityType, v1.OpIn, v1.CapacityTypeOnDemand), req(v1.LabelArch, v1.OpIn, v1.ArchitectureAmd64))),
			nil, map[string]int{v1.ArchitectureAmd64: 2}},
		// nodeAffinityPolicy Honor (the default) counts only nodes the pod's required
		// affinity allows; Ignore counts the others too.
		{"a zone the pod's affinity excludes, honored", v1.LabelTopologyZone, fullNode("n1", map[string]string{v1.LabelTopologyZone: "us-west-2a"}),
			nodePool("default"), []podOpt{withRequiredTerms([]corev1.NodeSelectorRequirement{{Key: v1.LabelTopologyZone, Operator: corev1.NodeSelectorOpIn, Values: []string{"us-west-2b", "us-west-2c"}}}), withNodeInclusion(&honor, nil)},
			map[string]int{"us-west-2b": 5, "us-west-2c": 5}},
		{"a zone the pod's affinity excludes, ignored", v1.LabelTopologyZone, fullNode("n1", map[string]string{v1.LabelTopologyZone: "us-west-2a"}),
			nodePool("default"), []podOpt{withRequiredTerms([]corev1.NodeSelectorRequirement{{Key: v1.LabelTopologyZone, Operator: corev1.NodeSelectorOpIn, Values: []string{"us-west-2b", "us-west-2c"}}}), withNodeInclusion(&ignore, nil)},
			map[string]int{"us-west-2b": 2, "us-west-2c": 2}},
		// nodeTaintsPolicy Ignore (the default) counts tainted nodes; Honor counts only
		// those whose taints the pod tolerates.
		{"a tainted node, ignored", v1.LabelTopologyZone, fullNode("n1", map[string]string{v1.LabelTopologyZone: "us-west-2a"}, taint),
			nodePool("default", withRequirements(req(v1.LabelCapacityType, v1.OpIn, v1.CapacityTypeOnDemand), req(v1.LabelTopologyZone, v1.OpIn, "us-west-2b", "us-west-2c"))),
			nil, map[string]int{"us-west-2b": 2, "us-west-2c": 2}},
		{"a tainted node, honored", v1.LabelTopologyZone, fullNode("n1", map[string]string{v1.LabelTopologyZone: "us-west-2a"}, taint),
			nodePool("default", withRequirements(req(v1.LabelCapacityType, v1.OpIn, v1.CapacityTypeOnDemand), req(v1.LabelTopologyZone, v1.OpIn, "us-west-2b", "us-west-2c"))),
			[]podOpt{withNodeInclusion(nil, &honor)}, map[string]int{"us-west-2b": 5, "us-west-2c": 5}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			opts := append([]podOpt{withPodLabel("app", "web"), withSpread(c.key, 1, corev1.DoNotSchedule, map[string]string{"app": "web"})}, c.opts...)
			in := pods(10, "web", "500m", "512Mi", opts...)
			r := solve(t, in, []*v1.NodePool{c.pool}, func(i *Input) { i.Nodes = []*ExistingNode{c.node} })
			got := countBy(r, c.key)
			if fmt.Sprint(got) != fmt.Sprint(c.want) {
				t.Errorf("planned %v, want %v (unschedulable: %d)", got, c.want, len(r.Unschedulable))
			}
			placed := 0
			for _, n := range c.want {
				placed += n
			}
			if len(r.Unschedulable) != 10-placed {
				t.Errorf("%d unschedulable, want %d", len(r.Unschedulable), 10-placed)
			}
			for _, u := range r.Unschedulable {
				if !containsAll(u.Reason, "topology spread on "+c.key) {
					t.Errorf("%s: reason %q does not name the spread", u.Pod.Name, u.Reason)
				}
			}
		})
	}
}

// A preferred node affinity may only choose among the placements that keep every
// required rule: six pods spread over three zones with maxSkew 1 and a preference
// for two of them are 2/2/2, not 3/3 (skew 3), since Kubernetes counts domains by
// required affinity only.
func TestPreferredAffinityDoesNotNarrowARequiredSpread(t *testing.T) {
	in := pods(6, "web", "500m", "512Mi", withPodLabel("app", "web"), withSpread(v1.LabelTopologyZone, 1, corev1.DoNotSchedule, map[string]string{"app": "web"}),
		withPreferred(10, corev1.NodeSelectorRequirement{Key: v1.LabelTopologyZone, Operator: corev1.NodeSelectorOpIn, Values: []string{"us-west-2a", "us-west-2b"}}))
	r := solve(t, in, []*v1.NodePool{nodePool("default")})
	want := map[string]int{"us-west-2a": 2, "us-west-2b": 2, "us-west-2c": 2}
	if got := countBy(r, v1.LabelTopologyZone); fmt.Sprint(got) != fmt.Sprint(want) || len(r.Unschedulable) > 0 {
		t.Errorf("planned %v, want %v (unschedulable %v)", got, want, r.Unschedulable)
	}
}
