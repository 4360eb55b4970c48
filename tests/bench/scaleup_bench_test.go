// Package bench measures Dovetail end to end on the local stack: how fast a burst of
// pending pods becomes Running, and what the controller costs in memory. Figures are
// reported, never asserted (make bench-e2e).
package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/controller/catalog"
	"github.com/dovetail-sh/dovetail/tests/localstack"
	"github.com/dovetail-sh/dovetail/tests/testenv"
)

// BenchmarkScaleUp scales on two NodePools over the whole embedded AWS catalog:
// Karpenter's usual "anything linux" pool, and its getting-started c/m/r pool.
func BenchmarkScaleUp(b *testing.B) {
	pools := []struct {
		name string
		pool func() *v1.NodePool
	}{
		{"any-linux", func() *v1.NodePool {
			return localstack.NodePool("default", localstack.Requirement(v1.LabelOS, v1.OpIn, "linux"))
		}},
		{"c-m-r", func() *v1.NodePool { return localstack.GeneralNodePool("default") }},
	}
	for _, p := range pools {
		for _, n := range []int32{100, 1000} {
			b.Run(fmt.Sprintf("pool=%s/pods=%d", p.name, n), func(b *testing.B) {
				for i := 0; i < b.N; i++ {
					scaleUp(b, p.pool(), n)
				}
			})
		}
	}
}

// scaleUp scales a Deployment of pause pods (1 cpu, 1Gi) from 0 to n on a fresh stack
// with the given pool, and reports the seconds to the first NodeClaim and to every
// pod Running, the NodeClaims and their price, and the controller's peak resident
// memory.
func scaleUp(b *testing.B, pool *v1.NodePool, n int32) {
	b.Helper()
	ctx := context.Background()
	env := startBenchStack(b, pool, localstack.Deployment("inflate", 0, "1", "1Gi"))
	c, informers, controller := env.client, env.informers, env.controller
	b.ResetTimer()
	start := time.Now()
	scaleTo(b, c, n)
	var firstClaim, allRunning time.Duration
	lastLine := ""
	deadline := start.Add(3 * time.Minute)
	for allRunning == 0 {
		if time.Now().After(deadline) {
			b.Fatalf("pods not Running within 3 minutes")
		}
		if firstClaim == 0 {
			var claims v1.NodeClaimList
			if err := informers.List(ctx, &claims); err == nil && len(claims.Items) > 0 {
				firstClaim = time.Since(start)
			}
		}
		var pods corev1.PodList
		if err := informers.List(ctx, &pods, client.InNamespace("default")); err != nil {
			b.Fatal(err)
		}
		running := 0
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodRunning {
				running++
			}
		}
		if running == int(n) {
			allRunning = time.Since(start)
		}
		if os.Getenv("BENCH_DEBUG") != "" {
			bound := 0
			for _, p := range pods.Items {
				if p.Spec.NodeName != "" {
					bound++
				}
			}
			var claims v1.NodeClaimList
			_ = informers.List(ctx, &claims)
			line := fmt.Sprintf("pods=%d bound=%d running=%d claims=%d", len(pods.Items), bound, running, len(claims.Items))
			if line != lastLine {
				fmt.Fprintf(os.Stderr, "t=%.2fs %s\n", time.Since(start).Seconds(), line)
				lastLine = line
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	b.StopTimer()
	if os.Getenv("BENCH_DEBUG") != "" {
		_ = os.WriteFile(fmt.Sprintf("/tmp/dovetail-bench-controller-%d.log", n), []byte(controller.Tail(1<<30)), 0o600)
		fmt.Fprintf(os.Stderr, "scale started at %.3f\n", float64(start.UnixNano())/1e9)
	}
	var claims v1.NodeClaimList
	_ = informers.List(ctx, &claims)
	b.ReportMetric(firstClaim.Seconds(), "s-to-first-nodeclaim")
	b.ReportMetric(allRunning.Seconds(), "s-to-all-running")
	b.ReportMetric(float64(len(claims.Items)), "nodes")
	b.ReportMetric(launchedPrice(b, claims.Items), "$/h")
	b.ReportMetric(peakRSSMiB(b, controller.Pid()), "controller-peak-RSS-MiB")
}

// benchStack is a local stack running the controller binary, with an informer
// cache to poll through.
type benchStack struct {
	client     client.Client
	informers  cache.Cache
	controller *localstack.Process
}

// startBenchStack starts the stack and the controller (kwok provider, embedded
// catalog), creates the node class, the pool and the objects, and syncs a cache of
// pods, NodeClaims and Nodes.
func startBenchStack(b *testing.B, pool *v1.NodePool, objs ...client.Object) *benchStack {
	b.Helper()
	ctx := context.Background()
	stack := testenv.StartStack(b)
	controllerBin := filepath.Join(testenv.BinDir(b), "dovetail-controller")
	if _, err := os.Stat(controllerBin); err != nil {
		b.Fatalf("%s not found: run `make build`", controllerBin)
	}
	controller, err := stack.Run(controllerBin, "--kubeconfig="+stack.Kubeconfig, "--leader-elect=false", "--cloud-provider=kwok",
		"--metrics-port=0", "--health-probe-port=0", "--cluster-name=bench", "--log-level="+logLevel())
	if err != nil {
		b.Fatal(err)
	}
	c := stack.Client
	for _, obj := range append([]client.Object{localstack.NodeClass("default"), pool}, objs...) {
		if err := c.Create(ctx, obj); err != nil {
			b.Fatal(err)
		}
	}
	return &benchStack{client: c, informers: watchCache(b, stack), controller: controller}
}

// watchCache is a synced informer cache of the stack's pods, NodeClaims and Nodes,
// so that polling them costs the API server nothing.
func watchCache(b *testing.B, stack *testenv.Stack) cache.Cache {
	b.Helper()
	informers, err := cache.New(stack.Config, cache.Options{Scheme: localstack.Scheme(), DefaultTransform: cache.TransformStripManagedFields()})
	if err != nil {
		b.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	b.Cleanup(stop)
	for _, obj := range []client.Object{&corev1.Pod{}, &v1.NodeClaim{}, &corev1.Node{}} {
		if _, err := informers.GetInformer(ctx, obj); err != nil {
			b.Fatal(err)
		}
	}
	go func() { _ = informers.Start(ctx) }()
	informers.WaitForCacheSync(ctx)
	return informers
}

// peakRSSMiB reads the high-water mark of a process's resident memory.
func peakRSSMiB(b *testing.B, pid int) float64 {
	kib, err := testenv.PeakRSSKiB(pid)
	if err != nil {
		b.Fatalf("reading the controller's memory: %v", err)
	}
	return float64(kib) / 1024
}

func logLevel() string {
	if os.Getenv("BENCH_DEBUG") != "" {
		return "debug"
	}
	return "info"
}

// launchedPrice is the hourly price of the launched NodeClaims' instances, from the
// embedded catalog the controller launched them from.
func launchedPrice(b *testing.B, claims []v1.NodeClaim) float64 {
	cat, err := catalog.EmbeddedAWS()
	if err != nil {
		b.Fatal(err)
	}
	total := 0.0
	for _, nc := range claims {
		e, ok := cat.Find(nc.Labels[v1.LabelInstanceType])
		if !ok {
			continue
		}
		for _, o := range e.Offerings {
			if o.Zone == nc.Labels[v1.LabelTopologyZone] && o.CapacityType == nc.Labels[v1.LabelCapacityType] {
				total += o.Price
				break
			}
		}
	}
	return total
}
