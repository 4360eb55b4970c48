package bench

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/controller/catalog"
	"github.com/dovetail-sh/dovetail/controller/scheduling"
	"github.com/dovetail-sh/dovetail/controller/scheduling/schedulingtest"
	"github.com/dovetail-sh/dovetail/tests/localstack"
)

// scaleInPods is 150 nodes' worth: three 1-cpu pods fit on each 4-vCPU node.
const scaleInPods = 450

// BenchmarkScaleIn is modelled on Karpenter's scale-down test: a Deployment spread
// over about 150 nodes (the pool launches 4-vCPU nodes only), then scaled down in
// steps of 25% of the original to 25%. After each step it reports the seconds until
// the fleet's $/h is within 10% of the ideal (the engine's fresh plan for the pods
// left, on the same pool), and the node-hours spent above the ideal's node count
// until then; at the end, the cumulative node-hours. The pool keeps Karpenter's
// defaults: consolidateAfter 0s is the only change, and the budget is 10%.
func BenchmarkScaleIn(b *testing.B) {
	for i := 0; i < b.N; i++ {
		scaleIn(b)
	}
}

func scaleIn(b *testing.B) {
	pool := localstack.GeneralNodePool("default")
	pool.Spec.Template.Spec.Requirements = append(pool.Spec.Template.Spec.Requirements, localstack.Requirement(v1.LabelInstanceCPU, v1.OpIn, "4"))
	pool.Spec.Disruption.ConsolidationPolicy = v1.ConsolidationPolicyWhenEmptyOrUnderutilized
	pool.Spec.Disruption.ConsolidateAfter = v1.MustParseNillableDuration("0s")
	env := startBenchStack(b, pool, localstack.Deployment("inflate", 0, "1", "1Gi"))
	cat, err := catalog.EmbeddedAWS()
	if err != nil {
		b.Fatal(err)
	}
	types := cat.ForEngine(scheduling.DefaultAllocatableSettings())
	template := localstack.Deployment("inflate", 0, "1", "1Gi")

	scaleTo(b, env.client, scaleInPods)
	waitRunning(b, env, scaleInPods, 5*time.Minute)
	peak := len(listClaims(b, env))
	b.ResetTimer()
	cumulative := 0.0
	for _, pct := range []int{75, 50, 25} {
		replicas := scaleInPods * pct / 100
		ideal := idealPlan(pool, types, template, replicas)
		idealPrice, idealNodes := ideal.PricePerHour(), len(ideal.NodeClaims)
		scaleTo(b, env.client, int32(replicas))
		start, last := time.Now(), time.Now()
		overIdeal, converged := 0.0, time.Duration(0)
		for converged == 0 && time.Since(start) < 10*time.Minute {
			time.Sleep(time.Second)
			claims := listClaims(b, env)
			now := time.Now()
			overIdeal += float64(max(0, len(claims)-idealNodes)) * now.Sub(last).Hours()
			last = now
			if launchedPrice(b, claims) <= idealPrice*1.10 {
				converged = time.Since(start)
			}
		}
		cumulative += overIdeal
		if converged == 0 {
			b.Logf("%d%%: the fleet was not within 10%% of the ideal after 10 minutes: %d nodes, $%.3f/h; ideal %d nodes, $%.3f/h",
				pct, len(listClaims(b, env)), launchedPrice(b, listClaims(b, env)), idealNodes, idealPrice)
			converged = 10 * time.Minute
		}
		b.ReportMetric(converged.Seconds(), fmt.Sprintf("s_to_within_10pct_at_%dpct", pct))
		b.ReportMetric(overIdeal, fmt.Sprintf("node_hours_over_ideal_at_%dpct", pct))
		bound := schedulingtest.PriceLowerBound(replicaPods(template, replicas), schedulingtest.PoolTypes(pool, types))
		b.Logf("%d%% (%d pods): %.0fs to within 10%% of the ideal (%d nodes, $%.3f/h; price lower bound $%.3f/h); %.3f node-hours over the ideal",
			pct, replicas, converged.Seconds(), idealNodes, idealPrice, bound, overIdeal)
	}
	b.StopTimer()
	// Reported after the timer's reset, which drops metrics reported before it.
	b.ReportMetric(float64(peak), "nodes_at_peak")
	b.ReportMetric(cumulative, "node_hours_over_ideal")
	if os.Getenv("BENCH_DEBUG") != "" {
		_ = os.WriteFile("/tmp/dovetail-bench-scalein-controller.log", []byte(env.controller.Tail(1<<30)), 0o600)
	}
}

func scaleTo(b *testing.B, c client.Client, n int32) {
	b.Helper()
	ctx := context.Background()
	d := &appsv1.Deployment{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "inflate"}, d); err != nil {
		b.Fatal(err)
	}
	patch := client.MergeFrom(d.DeepCopy())
	d.Spec.Replicas = &n
	if err := c.Patch(ctx, d, patch); err != nil {
		b.Fatal(err)
	}
}

func waitRunning(b *testing.B, env *benchStack, n int, timeout time.Duration) {
	b.Helper()
	deadline := time.Now().Add(timeout)
	for {
		var pods corev1.PodList
		if err := env.informers.List(context.Background(), &pods, client.InNamespace("default")); err != nil {
			b.Fatal(err)
		}
		running := 0
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
				running++
			}
		}
		if running == n {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("%d of %d pods Running after %s", running, n, timeout)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// listClaims lists every NodeClaim, those being deleted included: they cost until
// they are gone.
func listClaims(b *testing.B, env *benchStack) []v1.NodeClaim {
	b.Helper()
	var claims v1.NodeClaimList
	if err := env.informers.List(context.Background(), &claims); err != nil {
		b.Fatal(err)
	}
	return claims.Items
}

func replicaPods(d *appsv1.Deployment, n int) []*corev1.Pod {
	pods := make([]*corev1.Pod, n)
	for i := range pods {
		pods[i] = &corev1.Pod{ObjectMeta: d.Spec.Template.ObjectMeta, Spec: d.Spec.Template.Spec}
		pods[i].Name, pods[i].Namespace = fmt.Sprintf("%s-%d", d.Name, i), d.Namespace
	}
	return pods
}

// idealPlan is the engine's plan for n replicas on an empty cluster with the pool.
func idealPlan(pool *v1.NodePool, types []*scheduling.InstanceType, d *appsv1.Deployment, n int) *scheduling.Results {
	return scheduling.Solve(scheduling.Input{Pods: replicaPods(d, n), NodePools: []*v1.NodePool{pool},
		InstanceTypes: map[string][]*scheduling.InstanceType{pool.Name: types}})
}
