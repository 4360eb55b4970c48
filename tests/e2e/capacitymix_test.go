package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/controller/capacitymix"
	"github.com/dovetail-sh/dovetail/tests/localstack"
)

// TestCapacityMixOnEC2 holds a pool's spot/on-demand mix (on-demand base 2, at
// most 50% spot beyond it) on EC2 (moto, where spot is far cheaper than on-demand,
// so every plan would be spot): a burst of 6 one-node pods comes up 4 on-demand
// and 2 spot; a spot node interrupted is replaced within the mix, not on-demand
// (it counts as gone); a drift of every node is replaced within the mix; after
// a scale-in to 3 pods consolidation moves the pods
// off spot and leaves 3 on-demand nodes, all 3 nodes allow. The controller's
// metric reports the mix it holds.
func TestCapacityMixOnEC2(t *testing.T) {
	ctx := context.Background()
	cluster := startAWSCluster(t)
	c := cluster.client
	pool := localstack.NodePool("mixed",
		localstack.Requirement(v1.LabelCapacityType, v1.OpIn, v1.CapacityTypeSpot, v1.CapacityTypeOnDemand),
		localstack.Requirement(v1.LabelInstanceType, v1.OpIn, "m5.xlarge", "m5a.xlarge", "m6i.xlarge"))
	pool.Annotations = map[string]string{capacitymix.OnDemandBaseAnnotationKey: "2", capacitymix.SpotPercentAnnotationKey: "50"}
	pool.Spec.Disruption.ConsolidateAfter = v1.MustParseNillableDuration("0s")
	pool.Spec.Disruption.Budgets = []v1.Budget{{Nodes: "100%"}}
	must(t, c.Create(ctx, pool))
	// One pod a node: 3 of a 4-vCPU type's 3.92.
	must(t, c.Create(ctx, localstack.Deployment("inflate", 6, "3", "1Gi")))

	counted := func(t *testing.T) (capacitymix.Counts, []v1.NodeClaim) {
		t.Helper()
		var list v1.NodeClaimList
		must(t, c.List(ctx, &list, client.MatchingLabels{v1.LabelNodePool: "mixed"}))
		var live []v1.NodeClaim
		for _, nc := range list.Items {
			if nc.DeletionTimestamp == nil {
				live = append(live, nc)
			}
		}
		return capacitymix.CountPool(list.Items, "mixed"), live
	}
	launchedAs := func(t *testing.T, want capacitymix.Counts) []v1.NodeClaim {
		t.Helper()
		var live []v1.NodeClaim
		eventually(t, 3*time.Minute, fmt.Sprintf("the pool's claims launched as %s", want), func() error {
			var got capacitymix.Counts
			got, live = counted(t)
			for _, nc := range live {
				if !meta.IsStatusConditionTrue(nc.Status.Conditions, v1.ConditionTypeLaunched) {
					return fmt.Errorf("%s not launched yet", nc.Name)
				}
			}
			if got != want {
				return fmt.Errorf("%s", got)
			}
			return nil
		})
		return live
	}

	t.Run("a burst comes up within the mix", func(t *testing.T) {
		allRunning(t, c, "inflate", 6, 3*time.Minute)
		launchedAs(t, capacitymix.Counts{OnDemand: 4, Spot: 2})
		eventually(t, time.Minute, "the metric reports 4 on-demand and 2 spot", func() error {
			if od, spot := mixMetric(t, "mixed", v1.CapacityTypeOnDemand), mixMetric(t, "mixed", v1.CapacityTypeSpot); od != 4 || spot != 2 {
				return fmt.Errorf("%v on-demand, %v spot", od, spot)
			}
			return nil
		})
	})

	t.Run("an interrupted spot node is replaced within the mix", func(t *testing.T) {
		_, live := counted(t)
		var victim *v1.NodeClaim
		for i := range live {
			if live[i].Labels[v1.LabelCapacityType] == v1.CapacityTypeSpot {
				victim = &live[i]
				break
			}
		}
		if victim == nil {
			t.Fatal("no spot claim to interrupt")
		}
		id := victim.Status.ProviderID[strings.LastIndex(victim.Status.ProviderID, "/")+1:]
		interrupt(t, cluster.events, id)
		eventually(t, 2*time.Minute, "the interrupted claim gone", func() error {
			if err := c.Get(ctx, client.ObjectKeyFromObject(victim), &v1.NodeClaim{}); err == nil {
				return fmt.Errorf("%s still there", victim.Name)
			}
			return nil
		})
		allRunning(t, c, "inflate", 6, 3*time.Minute)
		launchedAs(t, capacitymix.Counts{OnDemand: 4, Spot: 2})
	})

	t.Run("drift replaces every node within the mix", func(t *testing.T) {
		// A new expireAfter drifts every node (the pool's hash). Spot is far
		// cheaper, so without the mix each replacement would be spot.
		_, before := counted(t)
		np := &v1.NodePool{}
		must(t, c.Get(ctx, client.ObjectKey{Name: "mixed"}, np))
		patch := client.MergeFrom(np.DeepCopy())
		np.Spec.Template.Spec.ExpireAfter = v1.MustParseNillableDuration("721h")
		must(t, c.Patch(ctx, np, patch))
		eventually(t, 5*time.Minute, "every drifted claim replaced", func() error {
			for _, old := range before {
				if err := c.Get(ctx, client.ObjectKeyFromObject(&old), &v1.NodeClaim{}); err == nil {
					return fmt.Errorf("%s still there", old.Name)
				}
			}
			return nil
		})
		launchedAs(t, capacitymix.Counts{OnDemand: 4, Spot: 2})
		allRunning(t, c, "inflate", 6, 3*time.Minute)
	})

	t.Run("after a scale-in consolidation keeps the mix", func(t *testing.T) {
		// The ReplicaSet deletes the pods of least deletion cost first: the two on
		// spot nodes stay, as in the scale-in that once left empty on-demand nodes
		// the mix needed beside spot nodes holding the pods.
		onSpot := 0
		for _, p := range allRunning(t, c, "inflate", 6, time.Minute) {
			var node corev1.Node
			must(t, c.Get(ctx, client.ObjectKey{Name: p.Spec.NodeName}, &node))
			if node.Labels[v1.LabelCapacityType] != v1.CapacityTypeSpot {
				continue
			}
			patch := client.MergeFrom(p.DeepCopy())
			if p.Annotations == nil {
				p.Annotations = map[string]string{}
			}
			p.Annotations["controller.kubernetes.io/pod-deletion-cost"] = "100"
			must(t, c.Patch(ctx, &p, patch))
			onSpot++
		}
		if onSpot != 2 {
			t.Fatalf("%d pods on spot nodes; want 2", onSpot)
		}
		// 3 pods need 3 nodes, and 3 nodes allow no spot (base 2, 50% of 1): the
		// pods left on spot nodes move to on-demand ones and the spot nodes go.
		scale(t, c, "inflate", 3)
		launchedAs(t, capacitymix.Counts{OnDemand: 3})
		allRunning(t, c, "inflate", 3, 3*time.Minute)
	})
}

// mixMetric reads dovetail_nodepool_capacity_mix_nodes from the controller's
// registry (the controller runs in this process).
func mixMetric(t *testing.T, pool, capacityType string) float64 {
	t.Helper()
	families, err := crmetrics.Registry.Gather()
	must(t, err)
	for _, f := range families {
		if f.GetName() != "dovetail_nodepool_capacity_mix_nodes" {
			continue
		}
		for _, m := range f.GetMetric() {
			if labelsAre(m, map[string]string{"nodepool": pool, "capacity_type": capacityType}) {
				return m.GetGauge().GetValue()
			}
		}
	}
	return -1
}

func labelsAre(m *dto.Metric, want map[string]string) bool {
	n := 0
	for _, l := range m.GetLabel() {
		if want[l.GetName()] == l.GetValue() {
			n++
		}
	}
	return n == len(want)
}
