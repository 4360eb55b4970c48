package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/controller/catalog"
	"github.com/dovetail-sh/dovetail/controller/scheduling"
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

	// The latest Unconsolidatable reason on each node (a reason is reported once
	// while it holds).
	said, at := map[string]string{}, map[string]time.Time{}
	eventually(t, 60*time.Second, "an Unconsolidatable event naming the budget", func() error {
		var events corev1.EventList
		if err := c.List(ctx, &events); err != nil {
			return err
		}
		budget := false
		for _, e := range events.Items {
			if when := e.CreationTimestamp.Time; e.Reason == "Unconsolidatable" && e.InvolvedObject.Kind == "Node" && !when.Before(at[e.InvolvedObject.Name]) {
				said[e.InvolvedObject.Name], at[e.InvolvedObject.Name] = e.Message, when
				budget = budget || strings.Contains(e.Message, "budget: nodepool default allows 0")
			}
		}
		if !budget {
			return fmt.Errorf("events on nodes: %v", said)
		}
		return nil
	})

	in := &simulate.Inputs{}
	must(t, simulate.ReadLive(ctx, stack.Config, in))
	cat, err := catalog.Load(opts.KwokCatalog)
	must(t, err)
	for node, reason := range said {
		e, err := simulate.Explain(in, cat.ForEngine(scheduling.DefaultAllocatableSettings()), opts.NodeCosts, time.Now(), false, node)
		must(t, err)
		if e.Consolidated || !strings.HasSuffix(e.Why, reason) {
			t.Errorf("%s: explain says consolidated %v, why %q; the controller says %q", node, e.Consolidated, e.Why, reason)
		}
		if e.IfRemoved == nil || e.NodePool != "default" || e.PricePerHour == nil {
			t.Errorf("%s: explain %+v; want the node's pool, price and what removing it would do", node, e)
		}
	}
}
