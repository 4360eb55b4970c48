package e2e

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/controller/metrics"
	"github.com/dovetail-sh/dovetail/tests/localstack"
	"github.com/dovetail-sh/dovetail/tests/testenv"
)

// consolidationPasses counts the disruption passes that got as far as weighing
// consolidation (a pass that acts on drift stops before): in this process, so
// compare before and after.
func consolidationPasses(t *testing.T) uint64 {
	t.Helper()
	m := &dto.Metric{}
	must(t, metrics.DecisionEvaluationDuration.WithLabelValues("underutilized", "multi").(prometheus.Metric).Write(m))
	return m.GetHistogram().GetSampleCount()
}

func claimNames(t *testing.T, c client.Client, pool string) []string {
	t.Helper()
	claims, err := claimsOf(c, pool)
	must(t, err)
	var names []string
	for _, nc := range claims {
		names = append(names, nc.Name)
	}
	slices.Sort(names)
	return names
}

// startInPlaceCluster runs a pool whose template has labels team=a, tier=web and
// annotation owner=x, with three pods on its nodes, and returns the pool's
// claims.
func startInPlaceCluster(t *testing.T, driftOnMetadata bool) (client.Client, []string) {
	if testing.Short() {
		t.Skip("starts the whole local stack")
	}
	stack := testenv.StartStack(t)
	opts := testenv.DefaultOptions(t)
	opts.DriftOnMetadata = driftOnMetadata
	stack.RunController(t, opts)
	c := stack.Client
	ctx := context.Background()
	must(t, c.Create(ctx, localstack.NodeClass("default")))
	pool := localstack.GeneralNodePool("default")
	pool.Spec.Template.Labels = map[string]string{"team": "a", "tier": "web"}
	pool.Spec.Template.Annotations = map[string]string{"owner": "x"}
	pool.Spec.Disruption.Budgets = []v1.Budget{{Nodes: "100%"}}
	must(t, c.Create(ctx, pool))
	must(t, c.Create(ctx, localstack.Deployment("web", 3, "1500m", "1Gi")))
	allRunning(t, c, "web", 3, 90*time.Second)
	return c, claimNames(t, c, "default")
}

// relabel changes the template's metadata: team=b, tier dropped, cost-center
// added, the annotation dropped.
func relabel(t *testing.T, c client.Client) {
	np := &v1.NodePool{}
	must(t, c.Get(context.Background(), client.ObjectKey{Name: "default"}, np))
	np.Spec.Template.Labels = map[string]string{"team": "b", "cost-center": "42"}
	np.Spec.Template.Annotations = nil
	must(t, c.Update(context.Background(), np))
}

// TestInPlaceMetadataUpdatesNodesWithoutReplacing: changing only a NodePool
// template's labels and annotations updates every NodeClaim and Node in place;
// several disruption passes later the same claims run, none replaced. A taint
// change afterwards still drifts them.
func TestInPlaceMetadataUpdatesNodesWithoutReplacing(t *testing.T) {
	c, before := startInPlaceCluster(t, false)
	ctx := context.Background()
	relabel(t, c)
	want := map[string]string{"team": "b", "cost-center": "42"}
	eventually(t, 60*time.Second, "the new labels on every node and claim, the dropped ones gone", func() error {
		claims, err := claimsOf(c, "default")
		if err != nil {
			return err
		}
		for _, nc := range claims {
			node := &corev1.Node{}
			if err := c.Get(ctx, client.ObjectKey{Name: nc.Status.NodeName}, node); err != nil {
				return err
			}
			for what, obj := range map[string]client.Object{"claim " + nc.Name: &nc, "node " + node.Name: node} {
				labels, annotations := obj.GetLabels(), obj.GetAnnotations()
				if labels["team"] != want["team"] || labels["cost-center"] != want["cost-center"] || labels["tier"] != "" || annotations["owner"] != "" {
					return fmt.Errorf("%s: labels %v, owner annotation %q", what, labels, annotations["owner"])
				}
			}
		}
		return nil
	})
	passes := consolidationPasses(t)
	eventually(t, 60*time.Second, "three disruption passes after the change", func() error {
		if n := consolidationPasses(t) - passes; n < 3 {
			return fmt.Errorf("%d passes", n)
		}
		return nil
	})
	if after := claimNames(t, c, "default"); !slices.Equal(before, after) {
		t.Fatalf("claims %v became %v; a metadata change replaced nodes", before, after)
	}

	np := &v1.NodePool{}
	must(t, c.Get(ctx, client.ObjectKey{Name: "default"}, np))
	np.Spec.Template.Spec.Taints = []corev1.Taint{{Key: "dedicated", Value: "web", Effect: corev1.TaintEffectPreferNoSchedule}}
	must(t, c.Update(ctx, np))
	eventually(t, 120*time.Second, "a taint change drifts and replaces the nodes", func() error {
		after := claimNames(t, c, "default")
		for _, name := range after {
			if slices.Contains(before, name) {
				return fmt.Errorf("claims %v; %s is still there", after, name)
			}
		}
		return nil
	})
	allRunning(t, c, "web", 3, 60*time.Second)
}

// TestInPlaceMetadataOffDriftsAsKarpenter: with --drift-on-metadata the same
// change replaces every node, as Karpenter does, and the replacements carry the
// new labels.
func TestInPlaceMetadataOffDriftsAsKarpenter(t *testing.T) {
	c, before := startInPlaceCluster(t, true)
	relabel(t, c)
	eventually(t, 120*time.Second, "every node replaced", func() error {
		claims, err := claimsOf(c, "default")
		if err != nil {
			return err
		}
		for _, nc := range claims {
			if slices.Contains(before, nc.Name) {
				return fmt.Errorf("%s is still there", nc.Name)
			}
			if got := map[string]string{"team": nc.Labels["team"], "cost-center": nc.Labels["cost-center"]}; !maps.Equal(got, map[string]string{"team": "b", "cost-center": "42"}) {
				return fmt.Errorf("replacement %s has labels %v", nc.Name, nc.Labels)
			}
		}
		return nil
	})
	allRunning(t, c, "web", 3, 60*time.Second)
}
