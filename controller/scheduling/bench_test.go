package scheduling_test

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/controller/catalog"
	"github.com/dovetail-sh/dovetail/controller/scheduling"
	"github.com/dovetail-sh/dovetail/controller/scheduling/schedulingtest"
)

func BenchmarkSolve(b *testing.B) {
	cat, err := catalog.EmbeddedAWS()
	if err != nil {
		b.Fatal(err)
	}
	types := cat.ForEngine(scheduling.DefaultAllocatableSettings())
	pool := schedulingtest.BenchPool()
	compatible := schedulingtest.PoolTypes(pool, types)
	for _, n := range []int{1000, 5000, 20000} {
		b.Run(fmt.Sprintf("pods=%d", n), func(b *testing.B) {
			pods := schedulingtest.GenerateWorkload(n, []string{"us-east-1a", "us-east-1b", "us-east-1c"}, 42)
			bound := schedulingtest.PriceLowerBound(pods, compatible)
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
	for _, it := range schedulingtest.PoolTypes(pool, types) {
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
			b.ReportMetric(results.PricePerHour()/schedulingtest.PriceLowerBound(pods, sustained), "ratio-to-bound")
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
