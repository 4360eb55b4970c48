package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/controller/scheduling"
	"github.com/dovetail-sh/dovetail/tests/localstack"
	"github.com/dovetail-sh/dovetail/tests/testenv"
)

// With kwok's stock stages (what kwokctl and Karpenter's kwok provider users run),
// the node-initialize stage writes "cpu: 1k, memory: 1Ti, pods: 1M" over a Node that
// has no resources when it reads it. A burst of 1000 pods must still end on Nodes of
// exactly their instance type's size, each holding no more than it can: the kwok
// provider registers the Node with its status, as a kubelet does.
func TestBurstOnKwokStockStagesKeepsNodesTheirSize(t *testing.T) {
	stack := startClusterOn(t, testenv.StartStackWithStockKwokStages)
	c := stack.Client
	ctx := context.Background()
	must(t, c.Create(ctx, localstack.GeneralNodePool("default")))
	must(t, c.Create(ctx, localstack.Deployment("burst", 1000, "250m", "256Mi")))
	pods := allRunning(t, c, "burst", 1000, 5*time.Minute)

	var claims v1.NodeClaimList
	must(t, c.List(ctx, &claims))
	byNode := map[string]*v1.NodeClaim{}
	for i := range claims.Items {
		if nc := &claims.Items[i]; nc.Status.NodeName != "" {
			byNode[nc.Status.NodeName] = nc
		}
	}
	requested := map[string]scheduling.Resources{}
	for i := range pods {
		requested[pods[i].Spec.NodeName] = requested[pods[i].Spec.NodeName].Add(scheduling.PodRequests(&pods[i]))
	}
	for name, used := range requested {
		nc, ok := byNode[name]
		if !ok {
			t.Errorf("pods run on node %s, which no NodeClaim launched", name)
			continue
		}
		node := &corev1.Node{}
		must(t, c.Get(ctx, client.ObjectKey{Name: name}, node))
		for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourcePods} {
			got, want := node.Status.Capacity[r], nc.Status.Capacity[r]
			if got.Cmp(want) != 0 {
				t.Errorf("node %s (%s) has %s capacity %s, its instance type %s", name, nc.Labels[v1.LabelInstanceType], r, got.String(), want.String())
			}
		}
		if allocatable := scheduling.FromResourceList(nc.Status.Allocatable); !used.Fits(allocatable) {
			t.Errorf("node %s (%s) runs pods requesting %s, more than its instance's allocatable %s", name, nc.Labels[v1.LabelInstanceType], used, allocatable)
		}
	}
	if len(requested) < 2 {
		t.Errorf("1000 pods of 250m ran on %d node(s): %s", len(requested), fmt.Sprint(len(byNode)))
	}
}
