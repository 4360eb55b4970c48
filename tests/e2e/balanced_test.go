package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/tests/localstack"
)

// TestBalancedConsolidationWeighsDisruption runs consolidationPolicy Balanced on the
// local stack. Two busy 4-vCPU nodes (one 3.5-cpu pod each) and a third holding a
// single 1-cpu pod that declares the highest pod-deletion-cost: replacing that node
// with a 2-vCPU one saves a sixth of the pool's $/h but evicts 11 of its 15 of
// disruption cost (score 0.23), so the node stays and says why. Once the pod's cost
// is lowered (0.5), the same move scores about 0.6: the node is replaced by a
// smaller one, with Karpenter's ConsolidationApproved event.
func TestBalancedConsolidationWeighsDisruption(t *testing.T) {
	c := startCluster(t)
	ctx := context.Background()
	pool := consolidatingPool("default", "1s")
	pool.Spec.Disruption.ConsolidationPolicy = v1.ConsolidationPolicyBalanced
	must(t, c.Create(ctx, pool))
	must(t, c.Create(ctx, localstack.Deployment("busy", 2, "3500m", "1Gi", onePerNode("busy"))))
	allRunning(t, c, "busy", 2, 60*time.Second)

	// A 1-cpu pod shares a 4-vCPU node with two others, then is left alone on it.
	sizer := localstack.Deployment("sizer", 2, "1", "1Gi")
	keepsake := localstack.Deployment("keepsake", 1, "1", "1Gi")
	keepsake.Spec.Template.Annotations = map[string]string{corev1.PodDeletionCost: "2147483647"}
	must(t, c.Create(ctx, sizer))
	must(t, c.Create(ctx, keepsake))
	pods := append(allRunning(t, c, "sizer", 2, 60*time.Second), allRunning(t, c, "keepsake", 1, 60*time.Second)...)
	if nodes := nodesHolding(pods); nodes != 1 {
		t.Fatalf("the three pods are on %d nodes, not one: the test needs the keepsake left on a node larger than it needs", nodes)
	}
	node := pods[2].Spec.NodeName
	scale(t, c, "sizer", 0)
	eventually(t, 60*time.Second, "the keepsake's node rejected by its Balanced score", func() error {
		for _, e := range eventsFor(t, c, "default", node, "Unconsolidatable") {
			if strings.Contains(e.Message, "consolidationPolicy Balanced") && strings.Contains(e.Message, "< threshold 0.50") {
				return nil
			}
		}
		return fmt.Errorf("no Unconsolidatable event with a Balanced score on %s", node)
	})
	keep := &corev1.Pod{}
	must(t, c.Get(ctx, client.ObjectKeyFromObject(&pods[2]), keep))
	if keep.Spec.NodeName != node || keep.DeletionTimestamp != nil {
		t.Fatalf("the keepsake moved (to %q, deleting %v) though its move was rejected", keep.Spec.NodeName, keep.DeletionTimestamp != nil)
	}
	n := &corev1.Node{}
	must(t, c.Get(ctx, client.ObjectKey{Name: node}, n))
	if state := taintedForDisruption(n); state {
		t.Fatalf("node %s is tainted for disruption though its move was rejected", node)
	}

	// Lowered to an eviction cost of 0.5, the move is worth it.
	keep.Annotations[corev1.PodDeletionCost] = "-67108864"
	must(t, c.Update(ctx, keep))
	eventually(t, 120*time.Second, "the keepsake's node replaced by a smaller one", func() error {
		if err := c.Get(ctx, client.ObjectKey{Name: node}, &corev1.Node{}); client.IgnoreNotFound(err) != nil || err == nil {
			return fmt.Errorf("node %s is still there (%v)", node, err)
		}
		running, err := podsOf(c, "keepsake")
		if err != nil {
			return err
		}
		if len(running) != 1 || running[0].Status.Phase != corev1.PodRunning {
			return fmt.Errorf("%d keepsake pods, want 1 running", len(running))
		}
		n := &corev1.Node{}
		if err := c.Get(ctx, client.ObjectKey{Name: running[0].Spec.NodeName}, n); err != nil {
			return err
		}
		if cpu := n.Status.Capacity.Cpu().Value(); cpu >= 4 {
			return fmt.Errorf("the keepsake runs on %s with %d vCPU, want a smaller node", n.Name, cpu)
		}
		return nil
	})
	approved := false
	for _, e := range eventsFor(t, c, "default", node, "ConsolidationApproved") {
		approved = approved || strings.Contains(e.Message, ">= threshold 0.50 (k: 2")
	}
	if !approved {
		t.Errorf("no ConsolidationApproved event with the score on %s", node)
	}
}

func taintedForDisruption(n *corev1.Node) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == v1.DisruptedNoScheduleTaint.Key {
			return true
		}
	}
	return false
}
