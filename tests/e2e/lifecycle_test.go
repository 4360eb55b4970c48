package e2e

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	awsv1 "github.com/dovetail-sh/dovetail/controller/apis/aws/v1"
	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/controller/catalog"
	"github.com/dovetail-sh/dovetail/controller/cloudprovider"
	"github.com/dovetail-sh/dovetail/controller/cloudprovider/kwok"
	"github.com/dovetail-sh/dovetail/controller/operator"
	"github.com/dovetail-sh/dovetail/controller/scheduling"
	"github.com/dovetail-sh/dovetail/tests/localstack"
	"github.com/dovetail-sh/dovetail/tests/testenv"
)

// testCloud wraps the kwok provider to misbehave as clouds do: refuse launches for
// lack of capacity, or launch instances that never become nodes.
type testCloud struct {
	cloudprovider.CloudProvider
	mu sync.Mutex
	// insufficient is how many launches to refuse.
	insufficient int
	// noNodes launches instances whose nodes never register.
	noNodes bool
	creates int
	deleted []string
}

func (c *testCloud) Create(ctx context.Context, nc *v1.NodeClaim) (*v1.NodeClaim, error) {
	c.mu.Lock()
	c.creates++
	refuse := c.insufficient > 0
	if refuse {
		c.insufficient--
	}
	c.mu.Unlock()
	if refuse {
		return nil, cloudprovider.NewInsufficientCapacityError(fmt.Errorf("InsufficientInstanceCapacity for every offering"))
	}
	if c.noNodes {
		launched := nc.DeepCopy()
		launched.Status.ProviderID = "test://" + nc.Name
		launched.Status.Capacity = corev1.ResourceList{corev1.ResourceCPU: *resourceQuantity("2")}
		launched.Status.Allocatable = launched.Status.Capacity
		return launched, nil
	}
	return c.CloudProvider.Create(ctx, nc)
}

func (c *testCloud) Delete(ctx context.Context, nc *v1.NodeClaim) error {
	c.mu.Lock()
	c.deleted = append(c.deleted, nc.Name)
	c.mu.Unlock()
	if c.noNodes {
		return nil
	}
	return c.CloudProvider.Delete(ctx, nc)
}

func (c *testCloud) counts() (int, []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.creates, append([]string(nil), c.deleted...)
}

func kwokFactory(t *testing.T, opts operator.Options, wrap func(cloudprovider.CloudProvider) cloudprovider.CloudProvider) operator.CloudProviderFactory {
	cat, err := catalog.Load(opts.KwokCatalog)
	if err != nil {
		t.Fatal(err)
	}
	return func(kube client.Client) (cloudprovider.CloudProvider, error) {
		return wrap(kwok.New(kube, cat, scheduling.DefaultAllocatableSettings(), 0)), nil
	}
}

func eventsFor(t *testing.T, c client.Client, namespace, name, reason string) []corev1.Event {
	t.Helper()
	var events corev1.EventList
	must(t, c.List(context.Background(), &events, client.InNamespace(namespace)))
	var out []corev1.Event
	for _, e := range events.Items {
		if (name == "" || e.InvolvedObject.Name == name) && e.Reason == reason {
			out = append(out, e)
		}
	}
	return out
}

func TestRegistrationTimeoutDeletesTheNodeClaim(t *testing.T) {
	if testing.Short() {
		t.Skip("starts kube-apiserver")
	}
	api := testenv.StartAPIServer(t)
	opts := testenv.DefaultOptions(t)
	opts.RegistrationTTL = 2 * time.Second
	cloud := &testCloud{noNodes: true}
	testenv.RunController(t, api.Config, t.TempDir(), opts, kwokFactory(t, opts, func(p cloudprovider.CloudProvider) cloudprovider.CloudProvider {
		cloud.CloudProvider = p
		return cloud
	}))
	c := api.Client
	ctx := context.Background()
	must(t, c.Create(ctx, localstack.NodeClass("default")))
	nc := &v1.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "lonely", Labels: map[string]string{v1.LabelNodePool: "default"}},
		Spec: v1.NodeClaimSpec{
			Requirements: []v1.NodeSelectorRequirementWithMinValues{{Key: v1.LabelInstanceType, RequirementBody: v1.RequirementBody{Operator: v1.OpIn, Values: []string{"m5.large"}}}},
			NodeClassRef: &v1.NodeClassReference{Group: awsv1.Group, Kind: "EC2NodeClass", Name: "default"},
		},
	}
	must(t, c.Create(ctx, nc))
	eventually(t, 20*time.Second, "launched", func() error {
		must(t, c.Get(ctx, client.ObjectKeyFromObject(nc), nc))
		if !meta.IsStatusConditionTrue(nc.Status.Conditions, v1.ConditionTypeLaunched) || nc.Status.ProviderID != "test://lonely" {
			return fmt.Errorf("conditions %v", nc.Status.Conditions)
		}
		return nil
	})
	eventually(t, 30*time.Second, "nodeclaim deleted after the registration timeout", func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(nc), nc); !apierrors.IsNotFound(err) {
			return fmt.Errorf("still there (%v)", err)
		}
		return nil
	})
	if _, deleted := cloud.counts(); len(deleted) != 1 || deleted[0] != "lonely" {
		t.Errorf("the instance was not terminated through the cloud provider: deleted %v", deleted)
	}
	if len(eventsFor(t, c, "default", "lonely", "RegistrationTimeout")) == 0 {
		t.Errorf("no RegistrationTimeout event")
	}
}

func TestInsufficientCapacityIsReplanned(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the whole local stack")
	}
	stack := testenv.StartStack(t)
	opts := testenv.DefaultOptions(t)
	opts.BindAddress, opts.MetricsPort, opts.HealthProbePort = "127.0.0.1", freePort(t), freePort(t)
	cloud := &testCloud{insufficient: 1}
	testenv.RunController(t, stack.Config, stack.Dir, opts, kwokFactory(t, opts, func(p cloudprovider.CloudProvider) cloudprovider.CloudProvider {
		cloud.CloudProvider = p
		return cloud
	}))
	c := stack.Client
	ctx := context.Background()
	t.Cleanup(func() {
		if t.Failed() {
			dumpCluster(t, c)
		}
	})
	must(t, c.Create(ctx, localstack.NodeClass("default")))
	must(t, c.Create(ctx, localstack.GeneralNodePool("default")))
	metricsURL := fmt.Sprintf("http://127.0.0.1:%d/metrics", opts.MetricsPort)
	// Counters are per process and earlier tests share it: compare before and after.
	before := httpGet(t, metricsURL)
	must(t, c.Create(ctx, localstack.Deployment("retry", 3, "1", "1Gi")))
	verifyPlacement(t, c, allRunning(t, c, "retry", 3, 60*time.Second), "default")
	if creates, _ := cloud.counts(); creates < 2 {
		t.Errorf("want a refused launch and a successful one, got %d launches", creates)
	}
	var events corev1.EventList
	must(t, c.List(ctx, &events))
	found := false
	for _, e := range events.Items {
		found = found || (e.Reason == "InsufficientCapacityError" && e.InvolvedObject.Kind == "NodeClaim")
	}
	if !found {
		t.Errorf("no InsufficientCapacityError event on the refused NodeClaim")
	}
	for _, probe := range []string{"healthz", "readyz"} {
		if body := httpGet(t, fmt.Sprintf("http://127.0.0.1:%d/%s", opts.HealthProbePort, probe)); !strings.Contains(body, "ok") {
			t.Errorf("/%s answered %q", probe, body)
		}
	}
	after := httpGet(t, metricsURL)
	for series, want := range map[string]float64{
		`karpenter_nodeclaims_created_total{min_values_relaxed="false",nodepool="default",reason="provisioning"}`: 2, // refused, then launched
		`karpenter_scheduler_unschedulable_pods_count{controller="provisioner"}`:                                  0,
	} {
		if got := metricValue(after, series) - metricValue(before, series); got != want {
			t.Errorf("%s rose by %v, want %v", series, got, want)
		}
	}
	for _, series := range []string{`karpenter_scheduler_scheduling_duration_seconds_count{controller="provisioner"}`, "karpenter_pods_scheduling_decision_duration_seconds_count"} {
		if metricValue(after, series) <= metricValue(before, series) {
			t.Errorf("%s did not rise: no solve was recorded", series)
		}
	}
	if got := metricValue(after, `karpenter_nodepools_usage{nodepool="default",resource_type="nodes"}`); got != 1 {
		t.Errorf("karpenter_nodepools_usage nodes = %v, want 1", got)
	}
}

// metricValue reads one series from Prometheus text; 0 when absent.
func metricValue(text, series string) float64 {
	for _, line := range strings.Split(text, "\n") {
		if rest, ok := strings.CutPrefix(line, series+" "); ok {
			v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
			if err == nil {
				return v
			}
		}
	}
	return 0
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func httpGet(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	must(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	must(t, err)
	return string(body)
}

func TestStartupTaintsGateInitialization(t *testing.T) {
	c := startCluster(t)
	ctx := context.Background()
	pool := localstack.GeneralNodePool("default")
	agent := corev1.Taint{Key: "example.com/agent-not-ready", Effect: corev1.TaintEffectNoSchedule}
	pool.Spec.Template.Spec.StartupTaints = []corev1.Taint{agent}
	must(t, c.Create(ctx, pool))
	must(t, c.Create(ctx, localstack.Deployment("gated", 2, "500m", "512Mi")))
	impossible := localstack.Deployment("impossible", 1, "1000", "1Gi")
	must(t, c.Create(ctx, impossible))

	var claim v1.NodeClaim
	eventually(t, 30*time.Second, "a registered nodeclaim", func() error {
		var claims v1.NodeClaimList
		must(t, c.List(ctx, &claims))
		for _, nc := range claims.Items {
			if meta.IsStatusConditionTrue(nc.Status.Conditions, v1.ConditionTypeRegistered) {
				claim = nc
				return nil
			}
		}
		return fmt.Errorf("%d nodeclaims, none registered", len(claims.Items))
	})
	// The daemon that would remove the taint is absent: the node must not count as
	// initialized, its pods must wait, and no further capacity may be launched.
	time.Sleep(3 * time.Second)
	must(t, c.Get(ctx, client.ObjectKeyFromObject(&claim), &claim))
	if meta.IsStatusConditionTrue(claim.Status.Conditions, v1.ConditionTypeInitialized) {
		t.Fatalf("nodeclaim initialized while its startup taint is on the node")
	}
	var claims v1.NodeClaimList
	must(t, c.List(ctx, &claims))
	if len(claims.Items) != 1 {
		t.Errorf("pods waiting on a startup taint launched %d nodeclaims, want 1", len(claims.Items))
	}
	node := &corev1.Node{}
	must(t, c.Get(ctx, client.ObjectKey{Name: claim.Status.NodeName}, node))
	patch := client.MergeFrom(node.DeepCopy())
	var kept []corev1.Taint
	for _, taint := range node.Spec.Taints {
		if !taint.MatchTaint(&agent) {
			kept = append(kept, taint)
		}
	}
	node.Spec.Taints = kept
	must(t, c.Patch(ctx, node, patch))
	eventually(t, 30*time.Second, "nodeclaim initialized", func() error {
		must(t, c.Get(ctx, client.ObjectKeyFromObject(&claim), &claim))
		if !meta.IsStatusConditionTrue(claim.Status.Conditions, v1.ConditionTypeInitialized) {
			return fmt.Errorf("conditions %v", claim.Status.Conditions)
		}
		return nil
	})
	verifyPlacement(t, c, allRunning(t, c, "gated", 2, 30*time.Second), "default")

	pods, err := podsOf(c, "impossible")
	must(t, err)
	eventually(t, 30*time.Second, "a FailedScheduling event naming the cause", func() error {
		for _, e := range eventsFor(t, c, "default", pods[0].Name, "FailedScheduling") {
			if e.Source.Component == "dovetail" && strings.Contains(e.Message, "no instance type has enough resources") {
				return nil
			}
		}
		return fmt.Errorf("no such event yet")
	})
	if len(eventsFor(t, c, "default", pods[0].Name, "Nominated")) != 0 {
		t.Errorf("an unschedulable pod was nominated")
	}
}

func TestLeaderElection(t *testing.T) {
	if testing.Short() {
		t.Skip("starts kube-apiserver")
	}
	api := testenv.StartAPIServer(t)
	opts := testenv.DefaultOptions(t)
	opts.LeaderElect, opts.LeaderElectionNamespace = true, testenv.InstallNamespace
	testenv.RunController(t, api.Config, t.TempDir(), opts, nil)
	testenv.RunController(t, api.Config, t.TempDir(), opts, nil)
	lease := &coordinationv1.Lease{}
	eventually(t, 30*time.Second, "a leader holds the lease", func() error {
		if err := api.Client.Get(context.Background(), client.ObjectKey{Namespace: testenv.InstallNamespace, Name: "dovetail-leader-election"}, lease); err != nil {
			return err
		}
		if lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity == "" {
			return fmt.Errorf("no holder yet")
		}
		return nil
	})
}
