package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	dtaws "github.com/dovetail-sh/dovetail/controller/cloudprovider/aws"
	"github.com/dovetail-sh/dovetail/controller/metrics"
	"github.com/dovetail-sh/dovetail/tests/localstack"
	"github.com/dovetail-sh/dovetail/tests/testenv"
)

// TestNodeRepairReplacesAnUnhealthyNode runs the controller with --feature-gates
// NodeRepair=true and --legacy-node-repair (the standalone repair controller
// Karpenter v1.15 keeps behind that flag), as the installed ServiceAccount. A node
// reports the node monitoring agent's KernelReady=False since 31 minutes ago (past
// the 30 its policy tolerates): its claim is deleted at once, though a budget of 0
// nodes without reasons holds every graceful disruption, and its pod runs again on
// a new node.
func TestNodeRepairReplacesAnUnhealthyNode(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the whole local stack")
	}
	stack := testenv.StartStack(t)
	opts := testenv.DefaultOptions(t)
	must(t, opts.FeatureGates.Set("NodeRepair=true"))
	opts.LegacyNodeRepair = true
	stack.RunController(t, opts)
	c, ctx := stack.Client, context.Background()
	must(t, c.Create(ctx, localstack.NodeClass("default")))
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

// TestNodeRepairAsADisruptionMethod runs node repair as Karpenter v1.15's disruption
// method (the default, --legacy-node-repair=false, as in v1.15), as the
// installed ServiceAccount, with AWS's policies tolerating 5 seconds. A node
// reporting KernelReady=False is replaced first: its claim is deleted only once its
// replacement has initialized, with its drain bounded by the policy's 10 minutes,
// and its pod runs again on the replacement.
func TestNodeRepairAsADisruptionMethod(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the whole local stack")
	}
	stack := testenv.StartStack(t)
	opts := testenv.DefaultOptions(t)
	must(t, opts.FeatureGates.Set("NodeRepair=true"))
	must(t, opts.AWSFeatureGates.Set("RebootForRepair=true"))
	// AWS's policies but for the toleration: a condition counts from no earlier than
	// its Node's creation, and the test cannot wait out 30 minutes.
	for _, p := range dtaws.RepairPolicies(true) {
		p.Toleration = 5 * time.Second
		opts.RepairPolicies = append(opts.RepairPolicies, p)
	}
	stack.RunController(t, opts)
	c, ctx := stack.Client, context.Background()
	must(t, c.Create(ctx, localstack.NodeClass("default")))
	must(t, c.Create(ctx, localstack.GeneralNodePool("default")))
	must(t, c.Create(ctx, localstack.Deployment("web", 1, "1", "1Gi")))
	pod := allRunning(t, c, "web", 1, 90*time.Second)[0]
	sick := pod.Spec.NodeName
	node := &corev1.Node{}
	must(t, c.Get(ctx, client.ObjectKey{Name: sick}, node))
	sickClaim := claimOfNode(t, c, sick).Name
	// A finalizer of the test's keeps the claim readable once deleted, so when it
	// was deleted can be checked against when its replacement initialized.
	const observing = "e2e.dovetail.sh/observe"
	held := claimOfNode(t, c, sick)
	patch := client.MergeFrom(held.DeepCopy())
	held.Finalizers = append(held.Finalizers, observing)
	must(t, c.Patch(ctx, held, patch))
	release := func() {
		nc := &v1.NodeClaim{}
		if err := c.Get(ctx, client.ObjectKey{Name: sickClaim}, nc); err == nil {
			patch := client.MergeFrom(nc.DeepCopy())
			nc.Finalizers = slices.DeleteFunc(nc.Finalizers, func(f string) bool { return f == observing })
			must(t, c.Patch(ctx, nc, patch))
		}
	}
	defer release()
	// The node monitoring agent keeps reporting the condition; kwok's heartbeat
	// would otherwise rewrite the node's conditions within 45 seconds.
	kernelDeadlock := corev1.NodeCondition{Type: "KernelReady", Status: corev1.ConditionFalse,
		Reason: "KernelDeadlock", Message: "task blocked for more than 120 seconds", LastTransitionTime: metav1.NewTime(time.Now().Truncate(time.Second))}
	nodeMonitoringAgent(t, c, sick, func(*corev1.Node) corev1.NodeCondition { return kernelDeadlock })

	eventually(t, 90*time.Second, "the unhealthy node's claim deleted once its replacement initialized", func() error {
		nc := &v1.NodeClaim{}
		if err := c.Get(ctx, client.ObjectKey{Name: sickClaim}, nc); err != nil {
			return err
		}
		if nc.DeletionTimestamp == nil {
			return fmt.Errorf("nodeclaim %s not deleting yet", sickClaim)
		}
		var claims v1.NodeClaimList
		if err := c.List(ctx, &claims); err != nil {
			return err
		}
		for _, other := range claims.Items {
			if initialized := meta.FindStatusCondition(other.Status.Conditions, v1.ConditionTypeInitialized); other.Name != sickClaim && initialized != nil &&
				initialized.Status == metav1.ConditionTrue && !initialized.LastTransitionTime.After(nc.DeletionTimestamp.Time) {
				deadline, err := time.Parse(time.RFC3339, nc.Annotations[v1.NodeClaimTerminationTimestampAnnotationKey])
				if err != nil || deadline.Sub(nc.DeletionTimestamp.Time) > 10*time.Minute+time.Second || deadline.Before(nc.DeletionTimestamp.Time) {
					t.Errorf("termination deadline %q for a claim deleted at %s; want the policy's 10-minute drain bound", nc.Annotations[v1.NodeClaimTerminationTimestampAnnotationKey], nc.DeletionTimestamp)
				}
				return nil
			}
		}
		t.Errorf("nodeclaim %s was deleted before any replacement initialized", sickClaim)
		return nil
	})
	eventually(t, 90*time.Second, "the pod running on another node", func() error {
		pods, err := podsOf(c, "web")
		if err != nil {
			return err
		}
		if len(pods) != 1 || pods[0].Status.Phase != corev1.PodRunning || pods[0].Spec.NodeName == sick {
			return fmt.Errorf("%d web pods, want one running on another node", len(pods))
		}
		return nil
	})

	// The replaced node goes; until then it counts against the Unhealthy budget.
	release()
	eventually(t, 60*time.Second, "the replaced claim gone", func() error {
		if err := c.Get(ctx, client.ObjectKey{Name: sickClaim}, &v1.NodeClaim{}); err == nil {
			return fmt.Errorf("nodeclaim %s still there", sickClaim)
		}
		return nil
	})

	t.Run("RebootForRepair: a GPU fault a reboot clears is rebooted in place", func(t *testing.T) {
		pod := allRunning(t, c, "web", 1, 60*time.Second)[0]
		gpu := pod.Spec.NodeName
		claim := claimOfNode(t, c, gpu)
		var before v1.NodeClaimList
		must(t, c.List(ctx, &before))
		succeeded := testutil.ToFloat64(metrics.NodesReboots.WithLabelValues("succeeded"))
		must(t, c.Get(ctx, client.ObjectKey{Name: gpu}, node))
		firstBoot := node.Status.NodeInfo.BootID
		// The agent reports XID 48 until the instance boots again, which clears it.
		since := metav1.NewTime(time.Now().Truncate(time.Second))
		nodeMonitoringAgent(t, c, gpu, func(n *corev1.Node) corev1.NodeCondition {
			if n.Status.NodeInfo.BootID != firstBoot {
				return corev1.NodeCondition{Type: "AcceleratedHardwareReady", Status: corev1.ConditionTrue, Reason: "AcceleratedHardwareIsReady", LastTransitionTime: since}
			}
			return corev1.NodeCondition{Type: "AcceleratedHardwareReady", Status: corev1.ConditionFalse, Reason: "NvidiaXID48Error", LastTransitionTime: since}
		})
		sawRebooting := false
		eventually(t, 120*time.Second, "the claim's reboot succeeded", func() error {
			nc := &v1.NodeClaim{}
			if err := c.Get(ctx, client.ObjectKeyFromObject(claim), nc); err != nil {
				return err
			}
			cond := meta.FindStatusCondition(nc.Status.Conditions, v1.ConditionTypeRebooting)
			if cond == nil {
				return fmt.Errorf("no Rebooting condition yet")
			}
			sawRebooting = sawRebooting || cond.Status == metav1.ConditionTrue
			if cond.Status != metav1.ConditionFalse {
				return fmt.Errorf("Rebooting %s/%s", cond.Status, cond.Reason)
			}
			if cond.Reason != v1.RebootSucceeded || nc.DeletionTimestamp != nil {
				t.Fatalf("the reboot ended %s (%s), claim deleting %v", cond.Reason, cond.Message, nc.DeletionTimestamp != nil)
			}
			return nil
		})
		must(t, c.Get(ctx, client.ObjectKey{Name: gpu}, node))
		if node.Status.NodeInfo.BootID == firstBoot || !strings.HasPrefix(node.Status.NodeInfo.BootID, "kwok-") || slices.ContainsFunc(node.Spec.Taints, func(tn corev1.Taint) bool { return tn.Key == v1.RebootingNoScheduleTaint.Key }) {
			t.Errorf("node %s after its reboot: boot id %q (was %q), taints %v; want a new boot and no fence", gpu, node.Status.NodeInfo.BootID, firstBoot, node.Spec.Taints)
		}
		if got := testutil.ToFloat64(metrics.NodesReboots.WithLabelValues("succeeded")) - succeeded; got != 1 {
			t.Errorf("karpenter_nodes_reboots_total{result=succeeded} rose by %v, want 1", got)
		}
		// The pod was drained and waited for its node: nothing was bought meanwhile.
		var after v1.NodeClaimList
		must(t, c.List(ctx, &after))
		for _, nc := range after.Items {
			if !slices.ContainsFunc(before.Items, func(b v1.NodeClaim) bool { return b.Name == nc.Name }) {
				t.Errorf("nodeclaim %s launched during an in-place reboot", nc.Name)
			}
		}
		allRunning(t, c, "web", 1, 60*time.Second)
	})
	t.Run("RebootForRepair: a fault that outlives two reboots in a day is replaced the third time", func(t *testing.T) {
		// The previous subtest's reboot is the first of the day; the fault now
		// survives every boot.
		pod := allRunning(t, c, "web", 1, 60*time.Second)[0]
		gpu := pod.Spec.NodeName
		claim := claimOfNode(t, c, gpu)
		succeeded := testutil.ToFloat64(metrics.NodesReboots.WithLabelValues("succeeded"))
		since := metav1.NewTime(time.Now().Truncate(time.Second))
		nodeMonitoringAgent(t, c, gpu, func(*corev1.Node) corev1.NodeCondition {
			return corev1.NodeCondition{Type: "AcceleratedHardwareReady", Status: corev1.ConditionFalse, Reason: "NvidiaXID48Error", LastTransitionTime: since}
		})
		eventually(t, 120*time.Second, "the second reboot succeeded", func() error {
			if got := testutil.ToFloat64(metrics.NodesReboots.WithLabelValues("succeeded")) - succeeded; got != 1 {
				return fmt.Errorf("%v more reboots succeeded", got)
			}
			return nil
		})
		eventually(t, 120*time.Second, "the node replaced and its pod running on the replacement", func() error {
			nc := &v1.NodeClaim{}
			if err := c.Get(ctx, client.ObjectKeyFromObject(claim), nc); client.IgnoreNotFound(err) != nil {
				return err
			} else if err == nil {
				return fmt.Errorf("claim %s is still there (rebooting %v)", claim.Name, nc.Rebooting())
			}
			pods := allRunning(t, c, "web", 1, 60*time.Second)
			if pods[0].Spec.NodeName == gpu {
				return fmt.Errorf("the pod still runs on %s", gpu)
			}
			return nil
		})
		if got := testutil.ToFloat64(metrics.NodesReboots.WithLabelValues("succeeded")) - succeeded; got != 1 {
			t.Errorf("%v reboots succeeded after the first of the day; want 1 before the replacement", got)
		}
		// Replaced by repair's third decision, not because a reboot failed.
		if failed := eventsFor(t, c, "default", claim.Name, "RebootFailed"); len(failed) != 0 {
			t.Errorf("the claim's reboot failed: %s", failed[0].Message)
		}
	})
}

// nodeMonitoringAgent stands in for the EKS node monitoring agent on one node: it
// keeps the condition report gives for the node on its status, as the agent
// reports it, until the test ends or the node is gone.
func nodeMonitoringAgent(t *testing.T, c client.Client, name string, report func(*corev1.Node) corev1.NodeCondition) {
	standIn(t, func(ctx context.Context) {
		node := &corev1.Node{}
		if err := c.Get(ctx, client.ObjectKey{Name: name}, node); err != nil {
			return
		}
		condition := report(node)
		i := slices.IndexFunc(node.Status.Conditions, func(nc corev1.NodeCondition) bool { return nc.Type == condition.Type })
		if i >= 0 && node.Status.Conditions[i].Status == condition.Status && node.Status.Conditions[i].LastTransitionTime.Equal(&condition.LastTransitionTime) {
			return
		}
		condition.LastHeartbeatTime = metav1.Now()
		if i < 0 {
			node.Status.Conditions = append(node.Status.Conditions, condition)
		} else {
			node.Status.Conditions[i] = condition
		}
		_ = c.Status().Update(ctx, node)
	})
}
