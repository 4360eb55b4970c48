// Command demo is `make demo`: it starts a local Kubernetes control plane with
// simulated nodes, runs dovetail-controller against it, predicts with `simulate` what
// a scale-up will cost, scales a Deployment, narrates the nodes that launch, then
// scales down, terminates the nodes and stops everything it started (Ctrl-C too).
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/controller/catalog"
	"github.com/dovetail-sh/dovetail/controller/scheduling"
	"github.com/dovetail-sh/dovetail/controller/simulate"
	"github.com/dovetail-sh/dovetail/tests/localstack"
)

func main() {
	replicas := flag.Int("replicas", 200, "pods to scale the inflate Deployment to")
	bin := flag.String("bin", "bin", "directory with the control-plane binaries and dovetail-controller")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *bin, int32(*replicas)); err != nil {
		fmt.Fprintf(os.Stderr, "\ndemo: %v\n", err)
		os.Exit(1)
	}
}

type step struct{ n, of int }

func (s *step) say(format string, args ...any) {
	s.n++
	fmt.Printf("\n[%d/%d] %s\n", s.n, s.of, fmt.Sprintf(format, args...))
}

func note(format string, args ...any) { fmt.Printf("      %s\n", fmt.Sprintf(format, args...)) }

func run(ctx context.Context, binDir string, replicas int32) error {
	binDir, _ = filepath.Abs(binDir)
	dir, err := os.MkdirTemp("", "dovetail-demo-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	fmt.Println("Dovetail demo: Karpenter-compatible autoscaling on a local control plane with simulated")
	fmt.Println("nodes (kwok). No cloud account; the instance types and prices are AWS's (us-east-1).")
	s := &step{of: 7}

	s.say("Starting etcd, kube-apiserver, kube-scheduler, kube-controller-manager and kwok")
	start := time.Now()
	stack, err := localstack.Start(ctx, localstack.Options{BinDir: binDir, Dir: dir})
	if err != nil {
		return err
	}
	defer func() {
		fmt.Println("\nStopping everything the demo started...")
		_ = stack.Stop()
	}()
	note("up in %.1fs; kubeconfig: %s (valid while the demo runs)", time.Since(start).Seconds(), stack.Kubeconfig)

	s.say("Starting dovetail-controller (kwok cloud provider, embedded AWS catalog)")
	healthPort, err := freePort()
	if err != nil {
		return err
	}
	controller, err := stack.Run(filepath.Join(binDir, "dovetail-controller"), "--kubeconfig="+stack.Kubeconfig, "--leader-elect=false", "--cloud-provider=kwok",
		"--cluster-name=demo", "--bind-address=127.0.0.1", "--metrics-port=0", fmt.Sprintf("--health-probe-port=%d", healthPort),
		"--disruption-period=2s", "--consolidation-validation-delay=3s")
	if err != nil {
		return err
	}
	if err := waitReady(ctx, healthPort, controller); err != nil {
		return err
	}
	note("ready (readiness probe on 127.0.0.1:%d); logs: %s", healthPort, controller.LogPath)

	c := stack.Client
	pool := localstack.GeneralNodePool("default")
	// Quick to show: empty nodes go 10s after their last pod, half of them at a time.
	pool.Spec.Disruption.ConsolidateAfter = v1.MustParseNillableDuration("10s")
	pool.Spec.Disruption.ConsolidationPolicy = v1.ConsolidationPolicyWhenEmpty
	pool.Spec.Disruption.Budgets = []v1.Budget{{Nodes: "50%"}}
	s.say("Applying EC2NodeClass %q and NodePool %q (c/m/r families, on-demand, amd64+arm64)", "default", pool.Name)
	if err := c.Create(ctx, localstack.NodeClass("default")); err != nil {
		return err
	}
	if err := c.Create(ctx, pool); err != nil {
		return err
	}
	inflate := localstack.Deployment("inflate", 0, "1", "1536Mi")
	spread := localstack.Deployment("web", 0, "500m", "512Mi", func(ps *corev1.PodSpec) {
		ps.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: v1.LabelTopologyZone,
			WhenUnsatisfiable: corev1.DoNotSchedule, LabelSelector: inflateSelector("web")}}
	})
	for _, d := range []*appsv1.Deployment{inflate, spread} {
		if err := c.Create(ctx, d); err != nil {
			return err
		}
	}

	webReplicas := int32(30)
	s.say("Predicting with `dovetail simulate`: inflate × %d (1 cpu, 1.5Gi) + web × %d (zone spread)", replicas, webReplicas)
	predicted, err := predict(pool, inflate, spread, replicas, webReplicas)
	if err != nil {
		return err
	}
	note("plan: %d nodes, $%.4f/hour, solved in %.0fms", predicted.Summary.NodeClaims, predicted.Summary.PricePerHour, predicted.Summary.SolveSeconds*1000)

	s.say("Scaling inflate 0 → %d and web 0 → %d", replicas, webReplicas)
	scaledAt := time.Now()
	if err := scale(ctx, c, "inflate", replicas); err != nil {
		return err
	}
	if err := scale(ctx, c, "web", webReplicas); err != nil {
		return err
	}
	firstClaim, allRunning, err := watchScaleUp(ctx, c, scaledAt, int(replicas+webReplicas))
	if err != nil {
		return err
	}
	nodes, price, err := describeNodes(ctx, c)
	if err != nil {
		return err
	}

	s.say("Scaling both to 0")
	for _, name := range []string{"inflate", "web"} {
		if err := scale(ctx, c, name, 0); err != nil {
			return err
		}
	}
	if err := waitFor(ctx, 2*time.Minute, "pods to go", func() (bool, error) {
		var pods corev1.PodList
		err := c.List(ctx, &pods, client.InNamespace("default"))
		return len(pods.Items) == 0, err
	}); err != nil {
		return err
	}
	note("all pods gone")

	s.say("Consolidation removes the empty nodes (consolidateAfter 10s, budget 50%% of the pool at a time)")
	emptied := time.Now()
	if err := waitFor(ctx, 3*time.Minute, "empty nodes to be removed", func() (bool, error) {
		var nodeList corev1.NodeList
		var claims v1.NodeClaimList
		if err := c.List(ctx, &nodeList); err != nil {
			return false, err
		}
		err := c.List(ctx, &claims)
		return len(nodeList.Items)+len(claims.Items) == 0, err
	}); err != nil {
		return err
	}
	note("every node cordoned, drained and terminated %.0fs after the last pod left", time.Since(emptied).Seconds())

	fmt.Println("\nSummary")
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "  pods scheduled\t%d\n", replicas+webReplicas)
	fmt.Fprintf(tw, "  nodes launched\t%d (predicted %d)\n", nodes, predicted.Summary.NodeClaims)
	fmt.Fprintf(tw, "  price of the nodes\t$%.4f/hour (predicted $%.4f/hour)\n", price, predicted.Summary.PricePerHour)
	fmt.Fprintf(tw, "  first NodeClaim after scale\t%.2fs\n", firstClaim.Seconds())
	fmt.Fprintf(tw, "  every pod Running after scale\t%.2fs\n", allRunning.Seconds())
	fmt.Fprintf(tw, "  nodes left after teardown\t0\n")
	return tw.Flush()
}

func inflateSelector(app string) *metav1.LabelSelector {
	return &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func waitReady(ctx context.Context, port int, p *localstack.Process) error {
	url := fmt.Sprintf("http://127.0.0.1:%d/readyz", port)
	return waitFor(ctx, time.Minute, "the controller to be ready", func() (bool, error) {
		select {
		case <-p.Exited():
			return false, fmt.Errorf("dovetail-controller exited:\n%s", p.Tail(2000))
		default:
		}
		resp, err := http.Get(url)
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
}

// predict runs the engine on the same objects the cluster will see.
func predict(pool *v1.NodePool, inflate, web *appsv1.Deployment, replicas, webReplicas int32) (*simulate.Plan, error) {
	cat, err := catalog.EmbeddedAWS()
	if err != nil {
		return nil, err
	}
	in := &simulate.Inputs{NodePools: []*v1.NodePool{pool}}
	for _, d := range []struct {
		dep *appsv1.Deployment
		n   int32
	}{{inflate, replicas}, {web, webReplicas}} {
		for i := int32(0); i < d.n; i++ {
			p := &corev1.Pod{Spec: d.dep.Spec.Template.Spec}
			p.Name, p.Namespace, p.Labels = fmt.Sprintf("%s-%d", d.dep.Name, i), "default", d.dep.Spec.Template.Labels
			in.Pods = append(in.Pods, p)
		}
	}
	return simulate.Run(in, cat.ForEngine(scheduling.DefaultAllocatableSettings()), clock.RealClock{}), nil
}

func scale(ctx context.Context, c client.Client, name string, replicas int32) error {
	d := &appsv1.Deployment{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "default", Name: name}, d); err != nil {
		return err
	}
	patch := client.MergeFrom(d.DeepCopy())
	d.Spec.Replicas = &replicas
	return c.Patch(ctx, d, patch)
}

// watchScaleUp prints progress until every pod runs and returns when the first
// NodeClaim appeared and when the last pod started.
func watchScaleUp(ctx context.Context, c client.Client, since time.Time, want int) (firstClaim, allRunning time.Duration, err error) {
	lastLine := ""
	err = waitFor(ctx, 3*time.Minute, "pods to run", func() (bool, error) {
		var pods corev1.PodList
		var claims v1.NodeClaimList
		if err := c.List(ctx, &pods, client.InNamespace("default")); err != nil {
			return false, err
		}
		if err := c.List(ctx, &claims); err != nil {
			return false, err
		}
		if firstClaim == 0 && len(claims.Items) > 0 {
			firstClaim = time.Since(since)
		}
		running, pending := 0, 0
		for _, p := range pods.Items {
			switch p.Status.Phase {
			case corev1.PodRunning:
				running++
			case corev1.PodPending:
				pending++
			}
		}
		line := fmt.Sprintf("t=%4.1fs  pods: %3d running, %3d pending  nodeclaims: %d", time.Since(since).Seconds(), running, pending, len(claims.Items))
		if line[9:] != lastLine {
			note("%s", line)
			lastLine = line[9:]
		}
		if running == want {
			allRunning = time.Since(since)
			return true, nil
		}
		return false, nil
	})
	return firstClaim, allRunning, err
}

// describeNodes prints the launched nodes and returns their count and total price.
func describeNodes(ctx context.Context, c client.Client) (int, float64, error) {
	cat, err := catalog.EmbeddedAWS()
	if err != nil {
		return 0, 0, err
	}
	var nodes corev1.NodeList
	if err := c.List(ctx, &nodes); err != nil {
		return 0, 0, err
	}
	var pods corev1.PodList
	if err := c.List(ctx, &pods); err != nil {
		return 0, 0, err
	}
	perNode := map[string]int{}
	for _, p := range pods.Items {
		perNode[p.Spec.NodeName]++
	}
	sort.Slice(nodes.Items, func(i, j int) bool { return nodes.Items[i].Name < nodes.Items[j].Name })
	fmt.Println()
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "      NODE\tINSTANCE TYPE\tZONE\tCAPACITY\tARCH\t$/HOUR\tPODS")
	total := 0.0
	zones := map[string]int{}
	for _, n := range nodes.Items {
		l := n.Labels
		price := priceOf(cat, l[v1.LabelInstanceType], l[v1.LabelTopologyZone], l[v1.LabelCapacityType])
		total += price
		zones[l[v1.LabelTopologyZone]]++
		fmt.Fprintf(tw, "      %s\t%s\t%s\t%s\t%s\t%.4f\t%d\n", n.Name, l[v1.LabelInstanceType], l[v1.LabelTopologyZone], l[v1.LabelCapacityType], l[v1.LabelArch], price, perNode[n.Name])
	}
	if err := tw.Flush(); err != nil {
		return 0, 0, err
	}
	var spread []string
	for z, n := range zones {
		spread = append(spread, fmt.Sprintf("%s=%d", z, n))
	}
	sort.Strings(spread)
	note("%d nodes, $%.4f/hour; nodes per zone: %s", len(nodes.Items), total, strings.Join(spread, " "))
	return len(nodes.Items), total, nil
}

func priceOf(cat *catalog.File, name, zone, capacityType string) float64 {
	e, ok := cat.Find(name)
	if !ok {
		return 0
	}
	for _, o := range e.Offerings {
		if o.Zone == zone && o.CapacityType == capacityType {
			return o.Price
		}
	}
	return 0
}

func waitFor(ctx context.Context, timeout time.Duration, what string, done func() (bool, error)) error {
	deadline := time.Now().Add(timeout)
	for {
		ok, err := done()
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("timed out after %s waiting for %s", timeout, what)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("interrupted while waiting for %s", what)
		case <-time.After(100 * time.Millisecond):
		}
	}
}
