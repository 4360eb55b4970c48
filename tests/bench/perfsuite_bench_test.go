package bench

import (
	"context"
	"fmt"
	"math"
	"os"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	resourcehelper "k8s.io/component-helpers/resource"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/tests/localstack"
	"github.com/dovetail-sh/dovetail/tests/testenv"
)

// chartMemoryLimit is the controller's memory limit in the chart's default values.
const chartMemoryLimit = 1 << 30

// suiteLabel marks every pod of a scenario, as Karpenter's suite's
// testing/cluster label does; utilization and pod counts select by it.
const suiteLabel = "testing/cluster"

// BenchmarkPerfSuite runs Karpenter's performance suite (kubernetes-sigs/karpenter
// test/suites/performance) on the local stack: the same workloads, NodePool and
// steps, each on a fresh cluster with the controller as its own process under the
// chart's memory limit and the installed ServiceAccount. Each reports the seconds of
// the phase Karpenter bounds, the controller's peak resident memory (Karpenter
// bounds the 95th percentile of samples; the peak is stricter), and the reserved
// utilization Karpenter checks, computed as its Monitor does.
func BenchmarkPerfSuite(b *testing.B) {
	for _, s := range perfScenarios {
		b.Run(s.name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				env := startPerfStack(b)
				s.run(b, env)
				b.ReportMetric(env.controller.PeakRSSMiB(), "peak_rss_MiB")
				b.ReportMetric(env.controller.CPUSeconds(), "controller_cpu_seconds")
				if s.ceiling > 0 {
					b.Logf("Karpenter's ceilings: %s and %d MB; our goal: %s and %d MiB",
						s.ceiling, s.memoryMB, s.ceiling/4, s.memoryMB/2)
				}
			}
		})
	}
}

type perfScenario struct {
	name string
	// ceiling and memoryMB are Karpenter's pass limits for the phase reported as
	// seconds, for the log.
	ceiling  time.Duration
	memoryMB int
	run      func(*testing.B, *perfStack)
}

// Karpenter's two pod shapes, used by most scenarios.
var (
	smallApp = appShape{"small-resource-app", "900m", "3100Mi"}
	largeApp = appShape{"large-resource-app", "3500m", "28Gi"}
)

var perfScenarios = []perfScenario{
	{"basic-1000", 2 * time.Minute, 260, func(b *testing.B, env *perfStack) {
		env.create(b, smallApp.deployment(500), largeApp.deployment(500))
		env.reportScaleOut(b, 1000, 15*time.Minute)
	}},
	{"consolidation-1000-700", 20 * time.Minute, 260, func(b *testing.B, env *perfStack) {
		env.create(b, smallApp.deployment(500), largeApp.deployment(500))
		env.waitRunning(b, 1000, 15*time.Minute)
		env.scale(b, map[string]int32{smallApp.name: 350, largeApp.name: 350})
		env.reportConsolidation(b, "", 700, 20*time.Minute)
	}},
	{"wide-30x", 5 * time.Minute, 370, func(b *testing.B, env *perfStack) {
		env.create(b, wideDeployments()...)
		env.reportScaleOut(b, 1000, 20*time.Minute)
	}},
	{"hostname-spread-1000", 5 * time.Minute, 680, func(b *testing.B, env *perfStack) {
		env.create(b, smallApp.deployment(500, hostnameSpread), largeApp.deployment(500))
		env.reportScaleOut(b, 1000, 15*time.Minute)
	}},
	{"hostname-spread-2000", 35 * time.Minute, 1330, func(b *testing.B, env *perfStack) {
		env.create(b, smallApp.deployment(1000, hostnameSpread), largeApp.deployment(1000))
		env.reportScaleOut(b, 2000, 25*time.Minute)
	}},
	{"self-anti-affinity-500", 5 * time.Minute, 620, func(b *testing.B, env *perfStack) {
		env.create(b, smallApp.deployment(500, hostnameAntiAffinity))
		env.reportScaleOut(b, 500, 15*time.Minute)
		// Karpenter's second phase: the other shape arrives while the first shrinks.
		env.scale(b, map[string]int32{smallApp.name: 250})
		start := time.Now()
		env.create(b, largeApp.deployment(500, hostnameAntiAffinity))
		env.waitRunning(b, 750, 5*time.Minute)
		b.ReportMetric(time.Since(start).Seconds(), "interference_seconds")
	}},
	{"do-not-disrupt-1100", 4 * time.Minute, 645, func(b *testing.B, env *perfStack) {
		protected := appShape{"do-not-disrupt-app", "900m", "450Mi"}.deployment(100)
		protected.Spec.Template.Annotations = map[string]string{v1.DoNotDisruptAnnotationKey: "true"}
		env.create(b, smallApp.deployment(500, hostnameSpread), largeApp.deployment(500), protected)
		env.reportScaleOut(b, 1100, 15*time.Minute)
		protectedNodes := env.nodesOf(b, protected.Name)
		env.scale(b, map[string]int32{smallApp.name: 250, largeApp.name: 250})
		env.reportConsolidation(b, "consolidation_", 600, 25*time.Minute)
		kept := 0
		for name := range env.nodesOf(b, protected.Name) {
			if protectedNodes[name] {
				kept++
			}
		}
		b.ReportMetric(float64(kept), "protected_nodes_kept")
		if kept < len(protectedNodes) {
			b.Errorf("%d of the %d nodes running do-not-disrupt pods were disrupted", len(protectedNodes)-kept, len(protectedNodes))
		}
	}},
	{"drift-600", 50 * time.Minute, 470, func(b *testing.B, env *perfStack) {
		env.create(b, appShape{"hostname-spread-app", "900m", "3100Mi"}.deployment(300, hostnameSpread),
			appShape{"standard-app", "3500m", "28Gi"}.deployment(300))
		env.waitRunning(b, 600, 20*time.Minute)
		env.reportDrift(b, 600, 30*time.Minute)
	}},
	{"backlog-15000", 0, 0, backlog},
}

// appShape is a Deployment of pause pods with Karpenter's suite labels.
type appShape struct{ name, cpu, memory string }

func (a appShape) deployment(replicas int32, mutate ...func(*corev1.PodSpec, map[string]string)) *appsv1.Deployment {
	d := localstack.Deployment(a.name, replicas, a.cpu, a.memory)
	d.Spec.Template.Labels[suiteLabel] = "unspecified"
	d.Spec.Selector.MatchLabels[suiteLabel] = "unspecified"
	for _, m := range mutate {
		m(&d.Spec.Template.Spec, d.Spec.Template.Labels)
	}
	return d
}

func hostnameSpread(spec *corev1.PodSpec, podLabels map[string]string) {
	spec.TopologySpreadConstraints = append(spec.TopologySpreadConstraints, corev1.TopologySpreadConstraint{
		MaxSkew: 1, TopologyKey: corev1.LabelHostname, WhenUnsatisfiable: corev1.DoNotSchedule,
		LabelSelector: &metav1.LabelSelector{MatchLabels: copyLabels(podLabels)}})
}

func zoneSpread(spec *corev1.PodSpec, podLabels map[string]string) {
	spec.TopologySpreadConstraints = append(spec.TopologySpreadConstraints, corev1.TopologySpreadConstraint{
		MaxSkew: 1, TopologyKey: corev1.LabelTopologyZone, WhenUnsatisfiable: corev1.DoNotSchedule,
		LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": podLabels["app"]}}})
}

func hostnameAntiAffinity(spec *corev1.PodSpec, podLabels map[string]string) {
	spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
			TopologyKey: corev1.LabelHostname, LabelSelector: &metav1.LabelSelector{MatchLabels: copyLabels(podLabels)}}}}}
}

func copyLabels(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// wideDeployments are the suite's 30 deployments: 1,000 pods of varied shapes, each
// spread over zones; the first three also one per node, the next three spread
// over nodes.
func wideDeployments() []*appsv1.Deployment {
	shapes := [][2]string{
		{"240m", "300Mi"}, {"450m", "400Mi"}, {"650m", "700Mi"}, {"900m", "1Gi"}, {"1400m", "2Gi"},
		{"1900m", "4Gi"}, {"2400m", "8Gi"}, {"2800m", "4Gi"}, {"3300m", "16Gi"}, {"3700m", "10Gi"},
		{"2300m", "64Gi"}, {"900m", "30Gi"}, {"1300m", "32Gi"}, {"2800m", "32Gi"}, {"1800m", "30Gi"},
		{"1850m", "20Gi"}, {"3300m", "30Gi"}, {"3800m", "300Mi"}, {"225m", "500Mi"}, {"450m", "750Mi"},
		{"700m", "1Gi"}, {"900m", "2Gi"}, {"1300m", "4Gi"}, {"1800m", "8Gi"}, {"2400m", "16Gi"},
		{"2800m", "32Gi"}, {"3400m", "28Gi"}, {"3800m", "64Gi"}, {"3300m", "13Gi"}, {"2800m", "24Gi"},
	}
	var out []*appsv1.Deployment
	for i, s := range shapes {
		n := i + 1
		replicas := int32(35)
		if n > 20 {
			replicas = 30
		}
		mutate := []func(*corev1.PodSpec, map[string]string){zoneSpread}
		label := func(k string) func(*corev1.PodSpec, map[string]string) {
			return func(_ *corev1.PodSpec, l map[string]string) { l[k] = "true" }
		}
		switch {
		case n <= 3:
			mutate = append(mutate, label("has-anti-affinity"), hostnameAntiAffinity)
		case n <= 6:
			mutate = append(mutate, label("has-hostname-spread"), hostnameSpread)
		}
		d := appShape{fmt.Sprintf("wide-deployment-%d", n), s[0], s[1]}.deployment(replicas, mutate...)
		d.Spec.Template.Labels["deployment-index"] = strconv.Itoa(n)
		out = append(out, d)
	}
	return out
}

// perfStack is a local stack with the controller as a process, watched through an
// informer cache.
type perfStack struct {
	client     client.Client
	informers  cache.Cache
	controller *testenv.ControllerProcess
	pool       *v1.NodePool
}

// suiteNodePool is the suite's NodePool: linux on-demand, no limits, consolidation
// after 30 s with a 100% budget, nodes never expiring. Karpenter's KWOK instance
// types are held under 32 vCPUs; the same bound is kept on the AWS catalog.
func suiteNodePool() *v1.NodePool {
	pool := localstack.NodePool("default",
		localstack.Requirement(v1.LabelOS, v1.OpIn, "linux"),
		localstack.Requirement(v1.LabelCapacityType, v1.OpIn, v1.CapacityTypeOnDemand),
		localstack.Requirement(v1.LabelInstanceCPU, v1.OpLt, "32"))
	pool.Spec.Template.Spec.ExpireAfter = v1.MustParseNillableDuration("Never")
	pool.Spec.Disruption = v1.Disruption{ConsolidationPolicy: v1.ConsolidationPolicyWhenEmptyOrUnderutilized,
		ConsolidateAfter: v1.MustParseNillableDuration("30s"), Budgets: []v1.Budget{{Nodes: "100%"}}}
	return pool
}

func startPerfStack(b *testing.B) *perfStack {
	b.Helper()
	ctx := context.Background()
	ctrl.SetLogger(logr.Discard())
	stack := testenv.StartStack(b)
	opts := testenv.DefaultOptions(b)
	// The controller's own defaults, not the tests' quickened ones, on the embedded
	// AWS catalog, under the chart's memory limit.
	opts.KwokCatalog, opts.MemoryLimit, opts.LogLevel = "", chartMemoryLimit, logLevel()
	opts.DisruptionPeriod, opts.ConsolidationValidationDelay = 10*time.Second, 15*time.Second
	// BENCH_PPROF_PORT serves the controller's pprof there, for diagnosis.
	if port, err := strconv.Atoi(os.Getenv("BENCH_PPROF_PORT")); err == nil {
		opts.MetricsPort, opts.EnableProfiling = port, true
	}
	controller := testenv.StartControllerProcess(b, stack.Config, stack.Kubeconfig, stack.Dir, opts)
	pool := suiteNodePool()
	for _, obj := range []client.Object{localstack.NodeClass("default"), pool} {
		if err := stack.Client.Create(ctx, obj); err != nil {
			b.Fatal(err)
		}
	}
	b.Cleanup(func() {
		if b.Failed() || os.Getenv("BENCH_DEBUG") != "" {
			b.Logf("controller log tail:\n%s", tail(controller.Log(), 6000))
		}
	})
	return &perfStack{client: stack.Client, informers: watchCache(b, stack), controller: controller, pool: pool}
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

func (e *perfStack) create(b *testing.B, objs ...*appsv1.Deployment) {
	b.Helper()
	for _, d := range objs {
		if err := e.client.Create(context.Background(), d); err != nil {
			b.Fatal(err)
		}
	}
}

func (e *perfStack) scale(b *testing.B, replicas map[string]int32) {
	b.Helper()
	for name, n := range replicas {
		d := &appsv1.Deployment{}
		if err := e.client.Get(context.Background(), client.ObjectKey{Namespace: "default", Name: name}, d); err != nil {
			b.Fatal(err)
		}
		patch := client.MergeFrom(d.DeepCopy())
		d.Spec.Replicas = &n
		if err := e.client.Patch(context.Background(), d, patch); err != nil {
			b.Fatal(err)
		}
	}
}

// suitePods are the scenario's pods that are not being deleted.
func (e *perfStack) suitePods(b *testing.B) []corev1.Pod {
	b.Helper()
	var pods corev1.PodList
	if err := e.informers.List(context.Background(), &pods, client.MatchingLabels{suiteLabel: "unspecified"}); err != nil {
		b.Fatal(err)
	}
	out := pods.Items[:0]
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil {
			out = append(out, p)
		}
	}
	return out
}

// waitRunning waits until exactly n of the scenario's pods are Running, as
// Karpenter's EventuallyExpectHealthyPodCount does, and returns how long it took.
func (e *perfStack) waitRunning(b *testing.B, n int, timeout time.Duration) time.Duration {
	b.Helper()
	start := time.Now()
	last := ""
	for {
		running := 0
		pods := e.suitePods(b)
		for _, p := range pods {
			if p.Status.Phase == corev1.PodRunning {
				running++
			}
		}
		if running == n {
			return time.Since(start)
		}
		if os.Getenv("BENCH_DEBUG") != "" {
			if line := fmt.Sprintf("%d pods, %d Running, %d nodeclaims", len(pods), running, len(e.claims(b))); line != last {
				fmt.Fprintf(os.Stderr, "t=%.1fs %s\n", time.Since(start).Seconds(), line)
				last = line
			}
		}
		if time.Since(start) > timeout {
			b.Fatalf("%d of %d pods Running after %s (%d pods, %d nodeclaims)", running, n, timeout, len(pods), len(e.claims(b)))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (e *perfStack) claims(b *testing.B) []v1.NodeClaim {
	b.Helper()
	var claims v1.NodeClaimList
	if err := e.informers.List(context.Background(), &claims); err != nil {
		b.Fatal(err)
	}
	return claims.Items
}

// reportScaleOut times the wait for n Running pods from now and reports it with
// the nodes and the reserved utilization at the end.
func (e *perfStack) reportScaleOut(b *testing.B, n int, timeout time.Duration) {
	b.Helper()
	start := time.Now()
	took := e.waitRunning(b, n, timeout)
	b.ReportMetric(took.Seconds(), "seconds")
	// The controller's own part: when it created the last of the claims the pods
	// run on. The rest is the local stack's kube-scheduler, kwok and API server
	// binding and starting 1,000 pods on two cores.
	b.ReportMetric(e.lastClaimCreated(b, start).Sub(start).Seconds(), "last_nodeclaim_seconds")
	// Where the rest goes: the last claim initialized (the controller registered its
	// node and kwok made it Ready), then the last pod bound by kube-scheduler. The
	// API server stamps these to the second.
	b.ReportMetric(e.lastInitialized(b, start).Sub(start).Seconds(), "last_initialized_seconds")
	b.ReportMetric(e.lastBound(b, start).Sub(start).Seconds(), "last_bound_seconds")
	e.reportFleet(b, "")
}

// lastInitialized is when the last claim became Initialized, or since if none did later.
func (e *perfStack) lastInitialized(b *testing.B, since time.Time) time.Time {
	b.Helper()
	var stamps []metav1.Time
	for _, nc := range e.claims(b) {
		if c := meta.FindStatusCondition(nc.Status.Conditions, v1.ConditionTypeInitialized); c != nil && c.Status == metav1.ConditionTrue {
			stamps = append(stamps, c.LastTransitionTime)
		}
	}
	return latest(since, stamps)
}

// lastBound is when the last of the scenario's pods was bound, or since if none was later.
func (e *perfStack) lastBound(b *testing.B, since time.Time) time.Time {
	b.Helper()
	var stamps []metav1.Time
	for _, p := range e.suitePods(b) {
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionTrue {
				stamps = append(stamps, c.LastTransitionTime)
			}
		}
	}
	return latest(since, stamps)
}

func latest(since time.Time, stamps []metav1.Time) time.Time {
	last := since
	for _, t := range stamps {
		if t.After(last) {
			last = t.Time
		}
	}
	return last
}

// lastClaimCreated is when the newest claim was created, or since if none is newer.
func (e *perfStack) lastClaimCreated(b *testing.B, since time.Time) time.Time {
	b.Helper()
	last := since
	for _, nc := range e.claims(b) {
		if created := nc.CreationTimestamp.Time; created.After(last) {
			last = created
		}
	}
	return last
}

// reportFleet reports the nodes and Karpenter's reserved utilization: the mean
// over the pool's nodes of requests (every pod bound, DaemonSets included) over
// allocatable.
func (e *perfStack) reportFleet(b *testing.B, prefix string) {
	b.Helper()
	var nodes corev1.NodeList
	if err := e.informers.List(context.Background(), &nodes); err != nil {
		b.Fatal(err)
	}
	var pods corev1.PodList
	if err := e.informers.List(context.Background(), &pods); err != nil {
		b.Fatal(err)
	}
	requests := map[string]corev1.ResourceList{}
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.Spec.NodeName == "" {
			continue
		}
		sum := requests[p.Spec.NodeName]
		if sum == nil {
			sum = corev1.ResourceList{}
		}
		for name, q := range resourcehelper.PodRequests(p, resourcehelper.PodResourcesOptions{UseStatusResources: true}) {
			total := sum[name]
			total.Add(q)
			sum[name] = total
		}
		requests[p.Spec.NodeName] = sum
	}
	counted := 0
	for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		total, n := 0.0, 0
		for _, node := range nodes.Items {
			alloc := node.Status.Allocatable[r]
			if node.Labels[v1.LabelNodePool] == "" || alloc.IsZero() {
				continue
			}
			used := requests[node.Name][r]
			total += used.AsApproximateFloat64() / alloc.AsApproximateFloat64()
			n++
		}
		counted = n
		util := math.NaN()
		if n > 0 {
			util = total / float64(n)
		}
		b.ReportMetric(util, prefix+string(r)+"_util")
	}
	b.ReportMetric(float64(counted), prefix+"nodes")
}

// reportConsolidation waits for n Running pods, then for consolidation to finish:
// no claim created or deleted, and no node tainted for disruption, for 3 minutes,
// as Karpenter's suite waits (longer than consolidateAfter, the validation delay
// and a few disruption passes together). It reports the seconds to the last change, the nodes removed and the
// utilization after.
func (e *perfStack) reportConsolidation(b *testing.B, prefix string, n int, timeout time.Duration) {
	b.Helper()
	start := time.Now()
	before := len(e.claims(b))
	e.waitRunning(b, n, timeout)
	lastChange := e.quietAfter(b, 3*time.Minute, timeout)
	b.ReportMetric(lastChange.Sub(start).Seconds(), prefix+"seconds")
	b.ReportMetric(float64(before-len(e.claims(b))), prefix+"nodes_removed")
	e.reportFleet(b, prefix)
}

// quietAfter waits until the fleet has not changed for quiet, and returns when it
// last changed.
func (e *perfStack) quietAfter(b *testing.B, quiet, timeout time.Duration) time.Time {
	b.Helper()
	start, lastChange, last := time.Now(), time.Now(), ""
	for time.Since(lastChange) < quiet {
		if time.Since(start) > timeout {
			b.Fatalf("the fleet was still changing after %s", timeout)
		}
		if state := e.fleetState(b); state != last {
			last, lastChange = state, time.Now()
		}
		time.Sleep(time.Second)
	}
	return lastChange
}

// fleetState names the claims, which are deleting, and which nodes are tainted for
// disruption.
func (e *perfStack) fleetState(b *testing.B) string {
	b.Helper()
	var names []string
	for _, nc := range e.claims(b) {
		names = append(names, fmt.Sprintf("%s:%t", nc.Name, nc.DeletionTimestamp != nil))
	}
	var nodes corev1.NodeList
	if err := e.informers.List(context.Background(), &nodes); err != nil {
		b.Fatal(err)
	}
	for _, node := range nodes.Items {
		for _, t := range node.Spec.Taints {
			if t.Key == v1.DisruptedNoScheduleTaint.Key {
				names = append(names, "tainted:"+node.Name)
			}
		}
	}
	sort.Strings(names)
	return fmt.Sprint(names)
}

// nodesOf names the nodes running the app's pods.
func (e *perfStack) nodesOf(b *testing.B, app string) map[string]bool {
	b.Helper()
	out := map[string]bool{}
	for _, p := range e.suitePods(b) {
		if p.Labels["app"] == app && p.Status.Phase == corev1.PodRunning {
			out[p.Spec.NodeName] = true
		}
	}
	return out
}

// reportDrift changes the pool's template so that every node drifts, and reports
// the seconds until every claim is one launched after the change and n pods run.
// Karpenter's scenario changes a template annotation; Dovetail applies metadata in
// place without replacing nodes (--drift-on-metadata restores Karpenter's rule), so
// a template taint, which drifts in both, is changed with it.
func (e *perfStack) reportDrift(b *testing.B, n int, timeout time.Duration) {
	b.Helper()
	ctx := context.Background()
	before := map[string]bool{}
	for _, nc := range e.claims(b) {
		before[nc.Name] = true
	}
	pool := &v1.NodePool{}
	if err := e.client.Get(ctx, client.ObjectKeyFromObject(e.pool), pool); err != nil {
		b.Fatal(err)
	}
	patch := client.MergeFrom(pool.DeepCopy())
	trigger := fmt.Sprintf("drift-%d", time.Now().Unix())
	if pool.Spec.Template.Annotations == nil {
		pool.Spec.Template.Annotations = map[string]string{}
	}
	pool.Spec.Template.Annotations["test-drift-trigger"] = trigger
	pool.Spec.Template.Spec.Taints = append(pool.Spec.Template.Spec.Taints,
		corev1.Taint{Key: "test-drift-trigger", Value: trigger, Effect: corev1.TaintEffectPreferNoSchedule})
	if err := e.client.Patch(ctx, pool, patch); err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	for {
		old := 0
		for _, nc := range e.claims(b) {
			if before[nc.Name] {
				old++
			}
		}
		if old == 0 {
			break
		}
		if time.Since(start) > timeout {
			b.Fatalf("%d of %d drifted nodeclaims not replaced after %s", old, len(before), timeout)
		}
		time.Sleep(time.Second)
	}
	e.waitRunning(b, n, timeout/2)
	b.ReportMetric(time.Since(start).Seconds(), "seconds")
	b.ReportMetric(float64(len(before)), "nodes_replaced")
	e.reportFleet(b, "")
}

// backlog is 15,000 pods pending at once in five shapes, two spread over zones and
// one over nodes. The controller is killed (SIGKILL) once half are Running and
// started again; every pod must end Running, with the controller's peak resident
// memory within 512 MiB and no exit of its own. The 45 minutes allowed are the
// local stack's: kwok starts a few hundred pods a minute on two cores, long
// after the controller has launched the last node.
func backlog(b *testing.B, env *perfStack) {
	shapes := []*appsv1.Deployment{
		appShape{"backlog-tiny", "100m", "128Mi"}.deployment(4000),
		appShape{"backlog-small", "250m", "512Mi"}.deployment(4000),
		appShape{"backlog-medium", "500m", "1Gi"}.deployment(3000, zoneSpread),
		appShape{"backlog-large", "1", "2Gi"}.deployment(2500, zoneSpread),
		appShape{"backlog-spread", "200m", "256Mi"}.deployment(1500, hostnameSpread),
	}
	const total = 15000
	start := time.Now()
	env.create(b, shapes...)
	const timeout = 45 * time.Minute
	deadline := start.Add(timeout)
	killed := false
	for {
		running, pending := 0, 0
		for _, p := range env.suitePods(b) {
			switch p.Status.Phase {
			case corev1.PodRunning:
				running++
			case corev1.PodPending:
				pending++
			}
		}
		if running == total {
			break
		}
		if !killed && running >= total/2 {
			env.controller.Kill()
			env.controller.Start()
			killed = true
			b.Logf("killed and restarted the controller at %.0fs with %d Running, %d Pending", time.Since(start).Seconds(), running, pending)
		}
		if env.controller.Exited() {
			b.Fatalf("the controller exited by itself with %d of %d pods Running:\n%s", running, total, tail(env.controller.Log(), 3000))
		}
		if time.Now().After(deadline) {
			b.Fatalf("%d of %d pods Running after %s (%d nodeclaims)", running, total, timeout, len(env.claims(b)))
		}
		time.Sleep(500 * time.Millisecond)
	}
	b.ReportMetric(time.Since(start).Seconds(), "seconds")
	b.ReportMetric(env.lastClaimCreated(b, start).Sub(start).Seconds(), "last_nodeclaim_seconds")
	env.reportFleet(b, "")
	if peak := env.controller.PeakRSSMiB(); peak > 512 {
		b.Errorf("the controller's peak resident memory was %.0f MiB, over the 512 MiB bound", peak)
	}
	if !killed {
		b.Error("the controller was never killed mid-backlog")
	}
}
