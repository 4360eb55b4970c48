package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/tests/localstack"
)

// TestNodeRepairReplacesAnUnhealthyNode runs the controller with --feature-gates
// NodeRepair=true, as the installed ServiceAccount. A node reports the node
// monitoring agent's KernelReady=False since 31 minutes ago (past the 30 its
// policy tolerates): its claim is deleted at once, though a budget of 0 nodes
// without reasons holds every graceful disruption, and its pod runs again on a
// new node.
func TestNodeRepairReplacesAnUnhealthyNode(t *testing.T) {
	c := startClusterWithGates(t, "NodeRepair=true")
	ctx := context.Background()
	pool := localstack.GeneralNodePool("default")
	pool.Spec.Disruption.Budgets = []v1.Budget{{Nodes: "0"}}
	must(t, c.Create(ctx, pool))
	must(t, c.Create(ctx, localstack.Deployment("web", 1, "1", "1Gi")))
	sick := allRunning(t, c, "web", 1, 90*time.Second)[0].Spec.NodeName

	node := &corev1.Node{}
	must(t, c.Get(ctx, client.ObjectKey{Name: sick}, node))
	node.Status.Conditions = append(node.Status.Conditions, corev1.NodeCondition{Type: "KernelReady", Status: corev1.ConditionFalse,
		Reason: "KernelDeadlock", Message: "task blocked for more than 120 seconds", LastTransitionTime: metav1.NewTime(time.Now().Add(-31 * time.Minute)),
		LastHeartbeatTime: metav1.Now()})
	must(t, c.Status().Update(ctx, node))

	eventually(t, 90*time.Second, "the unhealthy node replaced and its pod running elsewhere", func() error {
		if err := c.Get(ctx, client.ObjectKey{Name: sick}, &corev1.Node{}); client.IgnoreNotFound(err) != nil || err == nil {
			return fmt.Errorf("node %s is still there (%v)", sick, err)
		}
		pods, err := podsOf(c, "web")
		if err != nil {
			return err
		}
		if len(pods) != 1 || pods[0].Status.Phase != corev1.PodRunning || pods[0].Spec.NodeName == sick {
			return fmt.Errorf("%d web pods, want one running on another node", len(pods))
		}
		return nil
	})
	repaired := false
	for _, e := range eventsFor(t, c, "default", sick, "NodeRepair") {
		repaired = repaired || strings.Contains(e.Message, "has been KernelReady=False since")
	}
	if !repaired {
		t.Errorf("no NodeRepair event on %s", sick)
	}
}
