package e2e

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/controller/scheduling/defaultspread"
	"github.com/dovetail-sh/dovetail/tests/localstack"
	"github.com/dovetail-sh/dovetail/tests/testenv"
)

// TestClusterDefaultTopologySpread is Karpenter v1.15's regression suite for
// --scheduler-config on the local stack: kube-scheduler runs a profile with default
// hostname and zone spread constraints, the controller (as its ServiceAccount) gets
// the same defaults, and each workload has a pool of its own, so its NodeClaims are
// evidence of how it was planned. The pods kube-scheduler defaults are planned one a
// node from the first batch (each is nominated to a NodeClaim of its own, not
// stacked on one that kube-scheduler would leave them pending beside); pods it
// cannot deduce a selector for are packed.
func TestClusterDefaultTopologySpread(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the whole local stack")
	}
	defaults := []corev1.TopologySpreadConstraint{
		{MaxSkew: 1, TopologyKey: corev1.LabelHostname, WhenUnsatisfiable: corev1.DoNotSchedule},
		{MaxSkew: 1, TopologyKey: corev1.LabelTopologyZone, WhenUnsatisfiable: corev1.DoNotSchedule},
	}
	stack := testenv.StartStackWithDefaultSpread(t, defaults)
	opts := testenv.DefaultOptions(t)
	config, err := yaml.Marshal(defaultspread.Config{PodTopologySpread: &defaultspread.PodTopologySpread{DefaultConstraints: defaults}})
	must(t, err)
	opts.SchedulerConfig = string(config)
	stack.RunController(t, opts)
	c, ctx := stack.Client, context.Background()
	must(t, c.Create(ctx, localstack.NodeClass("default")))
	for _, role := range []string{"owner", "service", "packed"} {
		np := localstack.GeneralNodePool(role)
		np.Spec.Template.Labels = map[string]string{"role": role}
		must(t, c.Create(ctx, np))
	}
	spec := func(role string) corev1.PodSpec {
		zero := int64(0)
		return corev1.PodSpec{SchedulerName: localstack.DefaultSpreadScheduler, NodeSelector: map[string]string{"role": role}, TerminationGracePeriodSeconds: &zero,
			Containers: []corev1.Container{{Name: "pause", Image: "registry.k8s.io/pause:3.10", Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("64Mi")}}}}}
	}

	t.Run("a workload its ReplicaSet is the selector for gets a node per pod", func(t *testing.T) {
		d := localstack.Deployment("web", 3, "100m", "64Mi")
		d.Spec.Template.Spec = spec("owner")
		must(t, c.Create(ctx, d))
		expectOnePodANode(t, c, "web", "owner", 3)
	})

	t.Run("a workload a Service is the selector for gets a node per pod", func(t *testing.T) {
		must(t, c.Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "api", Namespace: "default"},
			Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "api"}, Ports: []corev1.ServicePort{{Port: 80}}}}))
		for i := range 3 {
			must(t, c.Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("api-%d", i), Namespace: "default", Labels: map[string]string{"app": "api"}}, Spec: spec("service")}))
		}
		expectOnePodANode(t, c, "api", "service", 3)
	})

	t.Run("pods the defaults do not apply to are packed", func(t *testing.T) {
		// Owned and selected by nothing: no selector can be deduced, so neither
		// kube-scheduler nor the controller defaults them.
		for i := range 3 {
			must(t, c.Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("batch-%d", i), Namespace: "default", Labels: map[string]string{"app": "batch"}}, Spec: spec("packed")}))
		}
		pods := allRunning(t, c, "batch", 3, 90*time.Second)
		if nodes := nodesOf(pods); nodes.Len() != 1 {
			t.Errorf("the pods run on %v; with no selector to deduce they take no default spread and fit on 1 node", sets.List(nodes))
		}
		if claims := poolClaims(t, c, "packed"); len(claims) != 1 {
			t.Errorf("pool packed has NodeClaims %v; want 1", claims)
		}
	})
}

// expectOnePodANode waits for n Running pods of app on n nodes in n zones of the
// pool, and checks the controller planned them so: each pod's first nomination is to
// a NodeClaim of its own, and the pool has n NodeClaims, no more.
func expectOnePodANode(t *testing.T, c client.Client, app, pool string, n int) {
	t.Helper()
	pods := allRunning(t, c, app, n, 90*time.Second)
	zones := sets.New[string]()
	for _, p := range pods {
		node := &corev1.Node{}
		must(t, c.Get(context.Background(), client.ObjectKey{Name: p.Spec.NodeName}, node))
		zones.Insert(node.Labels[corev1.LabelTopologyZone])
	}
	if nodes := nodesOf(pods); nodes.Len() != n || zones.Len() != n {
		t.Errorf("%s runs on nodes %v in zones %v; the default spread puts each pod on a node and in a zone of its own", app, sets.List(nodes), sets.List(zones))
	}
	first := sets.New[string]()
	for _, p := range pods {
		events := eventsFor(t, c, "default", p.Name, "Nominated")
		if len(events) == 0 {
			t.Fatalf("pod %s was never nominated", p.Name)
		}
		sort.Slice(events, func(i, j int) bool { return events[i].FirstTimestamp.Before(&events[j].FirstTimestamp) })
		first.Insert(strings.TrimPrefix(events[0].Message, "Pod should schedule on: "))
	}
	if first.Len() != n {
		t.Errorf("the controller first nominated %s's %d pods to %v; planned under the defaults, each has a NodeClaim of its own", app, n, sets.List(first))
	}
	if claims := poolClaims(t, c, pool); len(claims) != n {
		t.Errorf("pool %s has NodeClaims %v; want %d", pool, claims, n)
	}
}

func nodesOf(pods []corev1.Pod) sets.Set[string] {
	out := sets.New[string]()
	for _, p := range pods {
		out.Insert(p.Spec.NodeName)
	}
	return out
}

func poolClaims(t *testing.T, c client.Client, pool string) []string {
	t.Helper()
	var list v1.NodeClaimList
	must(t, c.List(context.Background(), &list, client.MatchingLabels{v1.LabelNodePool: pool}))
	var out []string
	for _, nc := range list.Items {
		out = append(out, nc.Name)
	}
	return out
}
