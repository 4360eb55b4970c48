package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/tests/localstack"
)

// staticNodes counts the static pool's claims that are not being deleted, and
// how many of them have a Ready node.
func staticNodes(c client.Client, pool string) (claims, ready int, err error) {
	var list v1.NodeClaimList
	if err := c.List(context.Background(), &list, client.MatchingLabels{v1.LabelNodePool: pool}); err != nil {
		return 0, 0, err
	}
	for _, nc := range list.Items {
		if nc.DeletionTimestamp != nil {
			continue
		}
		claims++
		if nc.Status.NodeName == "" {
			continue
		}
		n := &corev1.Node{}
		if err := c.Get(context.Background(), client.ObjectKey{Name: nc.Status.NodeName}, n); err != nil {
			continue
		}
		for _, cond := range n.Status.Conditions {
			if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
				ready++
			}
		}
	}
	return claims, ready, nil
}

func waitStatic(t *testing.T, c client.Client, pool string, want int, what string) {
	t.Helper()
	eventually(t, 90*time.Second, what, func() error {
		claims, ready, err := staticNodes(c, pool)
		if err != nil {
			return err
		}
		if claims != want || ready != want {
			return fmt.Errorf("%d claims, %d ready nodes; want %d", claims, ready, want)
		}
		return nil
	})
}

// TestStaticNodePoolKeepsItsCount runs the controller with --feature-gates
// StaticCapacity=true, as the installed ServiceAccount. A static pool of 3 gets 3
// nodes with no pod asking; pending pods launch into the dynamic pool beside it,
// never the static one; `kubectl scale nodepool --replicas 1` (the scale
// subresource) takes it to 1; replicas 5 under limits.nodes 2 stops at 2.
func TestStaticNodePoolKeepsItsCount(t *testing.T) {
	c := startClusterWithGates(t, "StaticCapacity=true")
	ctx := context.Background()
	must(t, c.Create(ctx, localstack.GeneralNodePool("default")))
	static := localstack.NodePool("static", localstack.Requirement(v1.LabelInstanceType, v1.OpIn, "m5.large", "m7i.large"))
	replicas := int64(3)
	static.Spec.Replicas = &replicas
	static.Spec.Disruption.ConsolidateAfter = v1.MustParseNillableDuration("0s")
	static.Spec.Template.Spec.Taints = []corev1.Taint{{Key: "dedicated", Value: "ingress", Effect: corev1.TaintEffectNoSchedule}}
	must(t, c.Create(ctx, static))
	waitStatic(t, c, "static", 3, "three static nodes")
	n := &corev1.Node{}
	var list v1.NodeClaimList
	must(t, c.List(ctx, &list, client.MatchingLabels{v1.LabelNodePool: "static"}))
	must(t, c.Get(ctx, client.ObjectKey{Name: list.Items[0].Status.NodeName}, n))
	if it := n.Labels[v1.LabelInstanceType]; it != "m5.large" {
		t.Errorf("a static node is a %s; want the cheapest the template allows, m5.large", it)
	}

	must(t, c.Create(ctx, localstack.Deployment("web", 4, "1", "1Gi")))
	pods := allRunning(t, c, "web", 4, 90*time.Second)
	for _, p := range pods {
		must(t, c.Get(ctx, client.ObjectKey{Name: p.Spec.NodeName}, n))
		if pool := n.Labels[v1.LabelNodePool]; pool != "default" {
			t.Errorf("pod %s runs on %s of pool %q; pending pods launch into the dynamic pool", p.Name, n.Name, pool)
		}
	}
	if claims, _, err := staticNodes(c, "static"); err != nil || claims != 3 {
		t.Errorf("the static pool has %d claims (%v) after pods were placed; want its 3", claims, err)
	}

	scale := &autoscalingv1.Scale{}
	must(t, c.SubResource("scale").Get(ctx, static, scale))
	scale.Spec.Replicas = 1
	must(t, c.SubResource("scale").Update(ctx, static, client.WithSubResourceBody(scale)))
	waitStatic(t, c, "static", 1, "the static pool scaled to one node")

	must(t, c.Get(ctx, client.ObjectKeyFromObject(static), static))
	replicas = 5
	static.Spec.Replicas = &replicas
	static.Spec.Limits = v1.Limits{v1.ResourceNodes: resource.MustParse("2")}
	must(t, c.Update(ctx, static))
	waitStatic(t, c, "static", 2, "the static pool at its limit of two nodes")
	must(t, c.Get(ctx, client.ObjectKeyFromObject(static), static))
	if static.Status.Nodes == nil || *static.Status.Nodes != 2 {
		t.Errorf("status.nodes is %v; want 2", static.Status.Nodes)
	}

	// A template change drifts both nodes (the taint; the label alone would be
	// applied in place); with room for one more under the limit, each is replaced
	// one for one, the replacement first.
	must(t, c.List(ctx, &list, client.MatchingLabels{v1.LabelNodePool: "static"}))
	before := map[string]bool{}
	for _, nc := range list.Items {
		before[nc.Name] = true
	}
	replicas = 2
	static.Spec.Replicas = &replicas
	static.Spec.Limits = v1.Limits{v1.ResourceNodes: resource.MustParse("3")}
	static.Spec.Template.Labels = map[string]string{"generation": "two"}
	static.Spec.Template.Spec.Taints = []corev1.Taint{{Key: "dedicated", Value: "edge", Effect: corev1.TaintEffectNoSchedule}}
	must(t, c.Update(ctx, static))
	most := sample(func() (int, error) { claims, _, err := staticNodes(c, "static"); return claims, err })
	eventually(t, 120*time.Second, "both static nodes replaced from the new template", func() error {
		must(t, c.List(ctx, &list, client.MatchingLabels{v1.LabelNodePool: "static"}))
		fresh := 0
		for _, nc := range list.Items {
			if nc.DeletionTimestamp == nil && nc.Labels["generation"] == "two" && !before[nc.Name] {
				fresh++
			}
		}
		if fresh != 2 || len(list.Items) != 2 {
			return fmt.Errorf("%d claims, %d from the new template", len(list.Items), fresh)
		}
		return nil
	})
	waitStatic(t, c, "static", 2, "two static nodes after the drift")
	if _, highest := most.finish(); highest > 3 {
		t.Errorf("the static pool had %d claims during the drift; limits.nodes is 3", highest)
	}
}
