package scheduling

import (
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
)

var testZones = []string{"us-west-2a", "us-west-2b", "us-west-2c"}

type typeSpec struct {
	name   string
	arch   string
	cpu    string
	memory string
	pods   int64
	gpus   int64
	price  float64
}

var testTypes = []typeSpec{
	{"c5.large", "amd64", "2", "4Gi", 29, 0, 0.085},
	{"c5.xlarge", "amd64", "4", "8Gi", 58, 0, 0.17},
	{"m5.large", "amd64", "2", "8Gi", 29, 0, 0.096},
	{"m5.xlarge", "amd64", "4", "16Gi", 58, 0, 0.192},
	{"m5.2xlarge", "amd64", "8", "32Gi", 58, 0, 0.384},
	{"m5.4xlarge", "amd64", "16", "64Gi", 234, 0, 0.768},
	{"r5.large", "amd64", "2", "16Gi", 29, 0, 0.126},
	{"m6g.large", "arm64", "2", "8Gi", 29, 0, 0.077},
	{"m6g.xlarge", "arm64", "4", "16Gi", 58, 0, 0.154},
	{"g5.xlarge", "amd64", "4", "16Gi", 58, 1, 1.006},
	{"p3.2xlarge", "amd64", "8", "61Gi", 58, 1, 3.06},
}

func makeInstanceType(t typeSpec) *InstanceType {
	family, size, _ := strings.Cut(t.name, ".")
	labels := map[string]string{
		v1.LabelArch: t.arch, v1.LabelOS: "linux",
		v1.LabelInstanceFamily: family, v1.LabelInstanceSize: size,
		v1.LabelInstanceCategory: family[:1], v1.LabelInstanceGen: family[1:2],
		v1.LabelInstanceCPU: strings.TrimSuffix(t.cpu, "m"),
	}
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:              resource.MustParse(t.cpu),
		corev1.ResourceMemory:           resource.MustParse(t.memory),
		corev1.ResourcePods:             *resource.NewQuantity(t.pods, resource.DecimalSI),
		corev1.ResourceEphemeralStorage: resource.MustParse("20Gi"),
	}
	if t.gpus > 0 {
		capacity["nvidia.com/gpu"] = *resource.NewQuantity(t.gpus, resource.DecimalSI)
		labels[v1.LabelInstanceGPUCount] = fmt.Sprint(t.gpus)
		labels[v1.LabelInstanceGPUMfr] = "nvidia"
	}
	var offerings []Offering
	for _, z := range testZones {
		offerings = append(offerings,
			Offering{Zone: z, CapacityType: v1.CapacityTypeOnDemand, Price: t.price, Available: true},
			Offering{Zone: z, CapacityType: v1.CapacityTypeSpot, Price: t.price * 0.35, Available: true})
	}
	return NewInstanceType(t.name, labels, capacity, offerings, DefaultAllocatableSettings())
}

func testCatalog() []*InstanceType {
	out := make([]*InstanceType, 0, len(testTypes))
	for _, t := range testTypes {
		out = append(out, makeInstanceType(t))
	}
	return out
}

type poolOpt func(*v1.NodePool)

func nodePool(name string, opts ...poolOpt) *v1.NodePool {
	np := &v1.NodePool{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1.NodePoolSpec{Template: v1.NodeClaimTemplate{Spec: v1.NodeClaimTemplateSpec{
			Requirements: []v1.NodePoolRequirement{req(v1.LabelCapacityType, v1.OpIn, v1.CapacityTypeOnDemand)},
			NodeClassRef: &v1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "default"},
		}}},
	}
	for _, o := range opts {
		o(np)
	}
	return np
}

func req(key string, op v1.RequirementOperator, values ...string) v1.NodePoolRequirement {
	return v1.NodePoolRequirement{Key: key, RequirementBody: v1.RequirementBody{Operator: op, Values: values}}
}

func withRequirements(reqs ...v1.NodePoolRequirement) poolOpt {
	return func(np *v1.NodePool) { np.Spec.Template.Spec.Requirements = reqs }
}

func withTaint(key, value string) poolOpt {
	return func(np *v1.NodePool) {
		np.Spec.Template.Spec.Taints = append(np.Spec.Template.Spec.Taints, corev1.Taint{Key: key, Value: value, Effect: corev1.TaintEffectNoSchedule})
	}
}

func withLabel(key, value string) poolOpt {
	return func(np *v1.NodePool) {
		if np.Spec.Template.Labels == nil {
			np.Spec.Template.Labels = map[string]string{}
		}
		np.Spec.Template.Labels[key] = value
	}
}

func withWeight(w int32) poolOpt { return func(np *v1.NodePool) { np.Spec.Weight = &w } }

func withLimit(name corev1.ResourceName, q string) poolOpt {
	return func(np *v1.NodePool) {
		if np.Spec.Limits == nil {
			np.Spec.Limits = v1.Limits{}
		}
		np.Spec.Limits[name] = resource.MustParse(q)
	}
}

type podOpt func(*corev1.Pod)

func pod(name, cpu, memory string, opts ...podOpt) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: map[string]string{}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(memory),
		}}}}},
	}
	for _, o := range opts {
		o(p)
	}
	return p
}

func pods(n int, prefix, cpu, memory string, opts ...podOpt) []*corev1.Pod {
	out := make([]*corev1.Pod, n)
	for i := range out {
		out[i] = pod(fmt.Sprintf("%s-%d", prefix, i), cpu, memory, opts...)
	}
	return out
}

func withPodLabel(k, v string) podOpt { return func(p *corev1.Pod) { p.Labels[k] = v } }

func withNodeSelector(k, v string) podOpt {
	return func(p *corev1.Pod) {
		if p.Spec.NodeSelector == nil {
			p.Spec.NodeSelector = map[string]string{}
		}
		p.Spec.NodeSelector[k] = v
	}
}

func withToleration(key string) podOpt {
	return func(p *corev1.Pod) {
		p.Spec.Tolerations = append(p.Spec.Tolerations, corev1.Toleration{Key: key, Operator: corev1.TolerationOpExists})
	}
}

func withGPU(n string) podOpt {
	return func(p *corev1.Pod) { p.Spec.Containers[0].Resources.Requests["nvidia.com/gpu"] = resource.MustParse(n) }
}

func ensureAffinity(p *corev1.Pod) *corev1.Affinity {
	if p.Spec.Affinity == nil {
		p.Spec.Affinity = &corev1.Affinity{}
	}
	return p.Spec.Affinity
}

func withRequiredTerms(terms ...[]corev1.NodeSelectorRequirement) podOpt {
	return func(p *corev1.Pod) {
		a := ensureAffinity(p)
		a.NodeAffinity = &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{}}
		for _, t := range terms {
			a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms = append(
				a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms, corev1.NodeSelectorTerm{MatchExpressions: t})
		}
	}
}

func withPreferred(weight int32, exprs ...corev1.NodeSelectorRequirement) podOpt {
	return func(p *corev1.Pod) {
		a := ensureAffinity(p)
		if a.NodeAffinity == nil {
			a.NodeAffinity = &corev1.NodeAffinity{}
		}
		a.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution = append(a.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution,
			corev1.PreferredSchedulingTerm{Weight: weight, Preference: corev1.NodeSelectorTerm{MatchExpressions: exprs}})
	}
}

func withAntiAffinity(key string, match map[string]string) podOpt {
	return func(p *corev1.Pod) {
		a := ensureAffinity(p)
		a.PodAntiAffinity = &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
			TopologyKey: key, LabelSelector: &metav1.LabelSelector{MatchLabels: match},
		}}}
	}
}

func withAffinity(key string, match map[string]string) podOpt {
	return func(p *corev1.Pod) {
		a := ensureAffinity(p)
		a.PodAffinity = &corev1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
			TopologyKey: key, LabelSelector: &metav1.LabelSelector{MatchLabels: match},
		}}}
	}
}

func withSpread(key string, maxSkew int32, when corev1.UnsatisfiableConstraintAction, match map[string]string) podOpt {
	return func(p *corev1.Pod) {
		p.Spec.TopologySpreadConstraints = append(p.Spec.TopologySpreadConstraints, corev1.TopologySpreadConstraint{
			MaxSkew: maxSkew, TopologyKey: key, WhenUnsatisfiable: when, LabelSelector: &metav1.LabelSelector{MatchLabels: match},
		})
	}
}

func withHostPort(port int32) podOpt {
	return func(p *corev1.Pod) {
		p.Spec.Containers[0].Ports = append(p.Spec.Containers[0].Ports, corev1.ContainerPort{ContainerPort: port, HostPort: port})
	}
}

func solve(t *testing.T, podList []*corev1.Pod, pools []*v1.NodePool, mutate ...func(*Input)) *Results {
	t.Helper()
	in := Input{Pods: podList, NodePools: pools, InstanceTypes: map[string][]*InstanceType{}}
	cat := testCatalog()
	for _, np := range pools {
		in.InstanceTypes[np.Name] = cat
	}
	for _, m := range mutate {
		m(&in)
	}
	return Solve(in)
}

// claimOf returns the plan holding a pod, or nil.
func claimOf(r *Results, name string) *NodeClaimPlan {
	for _, nc := range r.NodeClaims {
		for _, p := range nc.Pods {
			if p.Name == name {
				return nc
			}
		}
	}
	return nil
}

func unschedulable(r *Results, name string) string {
	for _, e := range r.Unschedulable {
		if e.Pod.Name == name {
			return e.Reason
		}
	}
	return ""
}

func label(nc *NodeClaimPlan, key string) string {
	if r, ok := nc.Requirements[key]; ok && r.Len() == 1 {
		v, _ := r.Any()
		return v
	}
	if key == v1.LabelTopologyZone {
		return nc.Offering.Zone
	}
	if key == v1.LabelCapacityType {
		return nc.Offering.CapacityType
	}
	if r, ok := nc.InstanceType.Requirements[key]; ok {
		v, _ := r.Any()
		return v
	}
	return ""
}
