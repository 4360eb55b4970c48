package e2e

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/controller/catalog"
	"github.com/dovetail-sh/dovetail/controller/simulate"
	"github.com/dovetail-sh/dovetail/tests/localstack"
	"github.com/dovetail-sh/dovetail/tests/testenv"
)

// TestExplainNodeSaysWhatTheControllerSays: a pool whose budget allows no
// disruption keeps an underused node; the controller puts an Unconsolidatable
// event on it, and `dovetail explain node` read from the live cluster (as the
// CLI reads it, with the ServiceAccount-free admin kubeconfig) gives the same
// reason and where the node's pods would go.
func TestExplainNodeSaysWhatTheControllerSays(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the whole local stack")
	}
	stack := testenv.StartStack(t)
	opts := testenv.DefaultOptions(t)
	stack.RunController(t, opts)
	c := stack.Client
	ctx := context.Background()
	must(t, c.Create(ctx, localstack.NodeClass("default")))
	pool := localstack.GeneralNodePool("default")
	pool.Spec.Disruption.ConsolidateAfter = v1.MustParseNillableDuration("0s")
	pool.Spec.Disruption.Budgets = []v1.Budget{{Nodes: "0"}}
	must(t, c.Create(ctx, pool))
	must(t, c.Create(ctx, localstack.Deployment("web", 8, "1", "1Gi")))
	allRunning(t, c, "web", 8, 90*time.Second)
	scale(t, c, "web", 1)
	allRunning(t, c, "web", 1, 60*time.Second)

	// The latest Unconsolidatable reason on each node: the event written last
	// (highest resourceVersion; timestamps are whole seconds), and a reason is
	// reported once while it holds.
	latest := func() (map[string]string, error) {
		var events corev1.EventList
		if err := c.List(ctx, &events); err != nil {
			return nil, err
		}
		said, at := map[string]string{}, map[string]uint64{}
		for _, e := range events.Items {
			rv, _ := strconv.ParseUint(e.ResourceVersion, 10, 64)
			if e.Reason == "Unconsolidatable" && e.InvolvedObject.Kind == "Node" && rv >= at[e.InvolvedObject.Name] {
				said[e.InvolvedObject.Name], at[e.InvolvedObject.Name] = e.Message, rv
			}
		}
		return said, nil
	}
	eventually(t, 60*time.Second, "an Unconsolidatable event naming the budget", func() error {
		said, err := latest()
		if err != nil {
			return err
		}
		for _, reason := range said {
			if strings.Contains(reason, "budget: nodepool default allows 0") {
				return nil
			}
		}
		return fmt.Errorf("events on nodes: %v", said)
	})

	cat, err := catalog.Load(opts.KwokCatalog)
	must(t, err)
	// The scale-down settles (pods terminate, a node empties) while this reads:
	// explain and the controller must agree on every node once they look at the
	// same cluster.
	eventually(t, 60*time.Second, "explain giving every node the controller's reason", func() error {
		said, err := latest()
		if err != nil {
			return err
		}
		in := &simulate.Inputs{}
		if err := simulate.ReadLive(ctx, stack.Config, in); err != nil {
			return err
		}
		for node, reason := range said {
			e, err := simulate.Explain(in, cat, &opts, time.Now(), node)
			if err != nil {
				return err
			}
			if e.Consolidated || !strings.HasSuffix(e.Why, reason) {
				return fmt.Errorf("%s: explain says consolidated %v, why %q; the controller says %q", node, e.Consolidated, e.Why, reason)
			}
			if e.IfRemoved == nil || e.NodePool != "default" || e.PricePerHour == nil {
				return fmt.Errorf("%s: explain %+v; want the node's pool, price and what removing it would do", node, e)
			}
		}
		return nil
	})

	// A user who may read nodes, pools and pods but no workloads (a viewer role
	// that leaves out apps) still gets a prediction, told what it lacks.
	must(t, c.Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "reads-no-workloads"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{"", "karpenter.sh", "karpenter.k8s.aws", "policy", "storage.k8s.io", "dovetail.sh"}, Resources: []string{"*"}, Verbs: []string{"get", "list"}},
		{APIGroups: []string{"apps"}, Resources: []string{"daemonsets"}, Verbs: []string{"get", "list"}}}}))
	must(t, c.Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "reads-no-workloads"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "reads-no-workloads"},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: "viewer"}}}))
	viewer := rest.CopyConfig(stack.Config)
	viewer.Impersonate = rest.ImpersonationConfig{UserName: "viewer"}
	in := &simulate.Inputs{}
	must(t, simulate.ReadLive(ctx, viewer, in))
	lacks := strings.Join(in.Unreadable, "; ")
	for _, kind := range []string{"Deployment", "ReplicaSet", "StatefulSet"} {
		if !strings.Contains(lacks, kind) {
			t.Errorf("read without the right to list %ss, the prediction says it lacks %q", kind, lacks)
		}
	}
	if len(in.Nodes) == 0 || len(in.NodePools) == 0 {
		t.Errorf("the viewer read %d nodes and %d pools; it may list both", len(in.Nodes), len(in.NodePools))
	}
	if _, err := simulate.Consolidate(in, cat, &opts, time.Now()); err != nil {
		t.Errorf("consolidation of what the viewer reads: %v", err)
	}
}
