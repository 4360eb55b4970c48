// Package schedulingtest holds the generated workloads and the price lower bound
// that the engine's and consolidation's benchmarks share.
package schedulingtest

import (
	"fmt"
	"math"
	"math/rand/v2"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/controller/scheduling"
)

// BenchPool is Karpenter's getting-started NodePool: c/m/r families newer than
// generation 2, on-demand, either architecture.
func BenchPool() *v1.NodePool {
	r := func(key string, op v1.RequirementOperator, vals ...string) v1.NodePoolRequirement {
		return v1.NodePoolRequirement{Key: key, RequirementBody: v1.RequirementBody{Operator: op, Values: vals}}
	}
	return &v1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "default"}, Spec: v1.NodePoolSpec{Template: v1.NodeClaimTemplate{Spec: v1.NodeClaimTemplateSpec{
		Requirements: []v1.NodePoolRequirement{
			r(v1.LabelCapacityType, v1.OpIn, v1.CapacityTypeOnDemand),
			r(v1.LabelArch, v1.OpIn, v1.ArchitectureAmd64, v1.ArchitectureArm64),
			r(v1.LabelInstanceCategory, v1.OpIn, "c", "m", "r"),
			r(v1.LabelInstanceGen, v1.OpGt, "2"),
		},
		NodeClassRef: &v1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "default"},
	}}}}
}

var (
	benchCPUs     = []string{"100m", "250m", "500m", "1", "2", "4"}
	benchMemories = []string{"128Mi", "256Mi", "512Mi", "1Gi", "2Gi", "4Gi", "8Gi"}
)

// GenerateWorkload makes n pods in deployments of 20 replicas: about 15% with a zone
// spread, 10% with hostname anti-affinity (50 groups), 5% with a hostname spread, 5%
// with a zone node selector, 5% arm64-only, the rest unconstrained. Sizes are drawn
// independently from 100m-4 cpu and 128Mi-8Gi memory.
func GenerateWorkload(n int, zones []string, seed uint64) []*corev1.Pod {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	var out []*corev1.Pod
	for d := 0; len(out) < n; d++ {
		app := fmt.Sprintf("app-%d", d)
		spec := corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
			corev1.ResourceCPU:    resource.MustParse(benchCPUs[rng.IntN(len(benchCPUs))]),
			corev1.ResourceMemory: resource.MustParse(benchMemories[rng.IntN(len(benchMemories))]),
		}}}}}
		podLabels := map[string]string{"app": app}
		switch roll := rng.Float64(); {
		case roll < 0.15:
			spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: v1.LabelTopologyZone,
				WhenUnsatisfiable: corev1.DoNotSchedule, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}}}
		case roll < 0.25:
			group := fmt.Sprintf("anti-%d", rng.IntN(50))
			podLabels["anti"] = group
			spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
				TopologyKey: v1.LabelHostname, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"anti": group}}}}}}
		case roll < 0.30:
			spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: v1.LabelHostname,
				WhenUnsatisfiable: corev1.DoNotSchedule, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}}}
		case roll < 0.35:
			spec.NodeSelector = map[string]string{v1.LabelTopologyZone: zones[rng.IntN(len(zones))]}
		case roll < 0.40:
			spec.NodeSelector = map[string]string{v1.LabelArch: v1.ArchitectureArm64}
		}
		for i := 0; i < 20 && len(out) < n; i++ {
			out = append(out, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", app, i), Namespace: "default", Labels: podLabels}, Spec: spec})
		}
	}
	return out
}

// PriceLowerBound is max(total cpu × cheapest $/vCPU, total memory × cheapest $/GiB)
// over the types the pool may launch: no packing can cost less.
func PriceLowerBound(pods []*corev1.Pod, types []*scheduling.InstanceType) float64 {
	var cpu, mem float64
	for _, p := range pods {
		r := scheduling.PodRequests(p)
		cpu += float64(r.MilliCPU) / 1000
		mem += float64(r.Memory) / (1 << 30)
	}
	perCPU, perGiB := math.Inf(1), math.Inf(1)
	for _, it := range types {
		perCPU = min(perCPU, it.CheapestPrice/(float64(it.Capacity.MilliCPU)/1000))
		perGiB = min(perGiB, it.CheapestPrice/(float64(it.Capacity.Memory)/(1<<30)))
	}
	return max(cpu*perCPU, mem*perGiB)
}

// PoolTypes are the types a pool's requirements allow, for the lower bound.
func PoolTypes(pool *v1.NodePool, types []*scheduling.InstanceType) []*scheduling.InstanceType {
	reqs, _ := scheduling.FromNodePoolRequirements(pool.Spec.Template.Spec.Requirements)
	var out []*scheduling.InstanceType
	for _, it := range types {
		if scheduling.Compatible(it, reqs) {
			out = append(out, it)
		}
	}
	return out
}
