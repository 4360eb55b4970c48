package scheduling_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/controller/catalog"
	"github.com/dovetail-sh/dovetail/controller/scheduling"
)

// benchPool is Karpenter's getting-started NodePool: c/m/r families newer than
// generation 2, on-demand, either architecture.
func benchPool() *v1.NodePool {
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

// generateWorkload makes n pods in deployments of 20 replicas: about 15% with a zone
// spread, 10% with hostname anti-affinity (50 groups), 5% with a hostname spread, 5%
// with a zone node selector, 5% arm64-only, the rest unconstrained. Sizes are drawn
// independently from 100m-4 cpu and 128Mi-8Gi memory.
func generateWorkload(n int, zones []string, seed uint64) []*corev1.Pod {
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

// priceLowerBound is max(total cpu × cheapest $/vCPU, total memory × cheapest $/GiB)
// over the types the pool may launch: no packing can cost less.
func priceLowerBound(pods []*corev1.Pod, types []*scheduling.InstanceType) float64 {
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

func BenchmarkSolve(b *testing.B) {
	cat, err := catalog.EmbeddedAWS()
	if err != nil {
		b.Fatal(err)
	}
	types := cat.ForEngine(scheduling.DefaultAllocatableSettings())
	pool := benchPool()
	compatible := poolTypes(pool, types)
	for _, n := range []int{1000, 5000, 20000} {
		b.Run(fmt.Sprintf("pods=%d", n), func(b *testing.B) {
			pods := generateWorkload(n, []string{"us-east-1a", "us-east-1b", "us-east-1c"}, 42)
			bound := priceLowerBound(pods, compatible)
			var results *scheduling.Results
			var peak uint64
			b.ReportAllocs()
			b.ResetTimer()
			var peakHeap uint64
			for i := 0; i < b.N; i++ {
				runtime.GC()
				var before runtime.MemStats
				runtime.ReadMemStats(&before)
				stop := sampleHeap(&peakHeap)
				results = scheduling.Solve(scheduling.Input{Pods: pods, NodePools: []*v1.NodePool{pool}, InstanceTypes: map[string][]*scheduling.InstanceType{"default": types}})
				stop()
				var after runtime.MemStats
				runtime.ReadMemStats(&after)
				peak = max(peak, after.TotalAlloc-before.TotalAlloc)
			}
			b.StopTimer()
			if len(results.Unschedulable) > 0 {
				b.Fatalf("%d pods unschedulable, first: %s", len(results.Unschedulable), results.Unschedulable[0].Reason)
			}
			perOp := b.Elapsed().Seconds() / float64(b.N)
			b.ReportMetric(float64(n)/perOp, "pods/s")
			b.ReportMetric(float64(len(results.NodeClaims)), "nodes")
			b.ReportMetric(results.PricePerHour(), "$/h")
			b.ReportMetric(results.PricePerHour()/bound, "ratio-to-bound")
			b.ReportMetric(float64(peak)/(1<<20), "MiB-allocated")
			b.ReportMetric(float64(peakHeap)/(1<<20), "MiB-peak-heap")
			b.Logf("%d pods: %d types in the pool, lower bound $%.2f/h", n, len(compatible), bound)
		})
	}
}

// BenchmarkSolveAnyLinux plans a Deployment of 1-cpu, 1Gi pods on Karpenter's usual
// "anything linux" NodePool over the whole catalog: the case that once launched a
// burstable 2-vCPU node per pod. The bound leaves out the burstable (t) types, which
// the engine does not launch unless a requirement names them.
func BenchmarkSolveAnyLinux(b *testing.B) {
	cat, err := catalog.EmbeddedAWS()
	if err != nil {
		b.Fatal(err)
	}
	types := cat.ForEngine(scheduling.DefaultAllocatableSettings())
	pool := &v1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "default"}, Spec: v1.NodePoolSpec{Template: v1.NodeClaimTemplate{Spec: v1.NodeClaimTemplateSpec{
		Requirements: []v1.NodePoolRequirement{{Key: v1.LabelOS, RequirementBody: v1.RequirementBody{Operator: v1.OpIn, Values: []string{"linux"}}}},
	}}}}
	var sustained []*scheduling.InstanceType
	for _, it := range poolTypes(pool, types) {
		if !scheduling.Compatible(it, scheduling.Requirements{v1.LabelInstanceCategory: scheduling.MustRequirement(v1.LabelInstanceCategory, v1.OpNotIn, "t")}) {
			continue
		}
		sustained = append(sustained, it)
	}
	for _, n := range []int{100, 1000} {
		b.Run(fmt.Sprintf("pods=%d", n), func(b *testing.B) {
			pods := make([]*corev1.Pod, n)
			for i := range pods {
				pods[i] = &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("inflate-%d", i), Namespace: "default", Labels: map[string]string{"app": "inflate"}},
					Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
						corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi")}}}}}}
			}
			var results *scheduling.Results
			for i := 0; i < b.N; i++ {
				results = scheduling.Solve(scheduling.Input{Pods: pods, NodePools: []*v1.NodePool{pool}, InstanceTypes: map[string][]*scheduling.InstanceType{"default": types}})
			}
			if len(results.Unschedulable) > 0 {
				b.Fatalf("%d pods unschedulable, first: %s", len(results.Unschedulable), results.Unschedulable[0].Reason)
			}
			b.ReportMetric(float64(len(results.NodeClaims)), "nodes")
			b.ReportMetric(results.PricePerHour(), "$/h")
			b.ReportMetric(results.PricePerHour()/priceLowerBound(pods, sustained), "ratio-to-bound")
		})
	}
}

// sampleHeap records the largest heap in use until stop is called.
func sampleHeap(peak *uint64) (stop func()) {
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		ticker := time.NewTicker(2 * time.Millisecond)
		defer ticker.Stop()
		for {
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			*peak = max(*peak, m.HeapInuse)
			select {
			case <-done:
				return
			case <-ticker.C:
			}
		}
	}()
	return func() { close(done); <-finished }
}

// poolTypes are the types a pool's requirements allow, for the lower bound.
func poolTypes(pool *v1.NodePool, types []*scheduling.InstanceType) []*scheduling.InstanceType {
	reqs, _ := scheduling.FromNodePoolRequirements(pool.Spec.Template.Spec.Requirements)
	var out []*scheduling.InstanceType
	for _, it := range types {
		if scheduling.Compatible(it, reqs) {
			out = append(out, it)
		}
	}
	return out
}
