package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/tests/localstack"
	"github.com/dovetail-sh/dovetail/tests/testenv"
)

// A PodDisruptionBudget that never allows an eviction holds a drain only until the
// NodeClaim's terminationGracePeriod: then the controller deletes the pod itself.
// That delete is what the shipped ClusterRole must allow, and the controller here
// runs as the installed ServiceAccount with nothing else.
func TestTerminationGracePeriodBoundsABlockedDrain(t *testing.T) {
	c := startCluster(t)
	ctx := context.Background()
	np := consolidatingPool("default", "Never")
	np.Spec.Template.Spec.TerminationGracePeriod = &metav1.Duration{Duration: 10 * time.Second}
	must(t, c.Create(ctx, np))
	d := localstack.Deployment("guarded", 1, "1", "1Gi")
	must(t, c.Create(ctx, d))
	pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "guarded"},
		Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr(intstr.FromInt32(1)),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "guarded"}}}}
	must(t, c.Create(ctx, pdb))
	pods := allRunning(t, c, "guarded", 1, 60*time.Second)
	claim := claimOfNode(t, c, pods[0].Spec.NodeName)
	eventually(t, 30*time.Second, "the PDB allows no disruption", func() error {
		must(t, c.Get(ctx, client.ObjectKeyFromObject(pdb), pdb))
		if pdb.Status.ObservedGeneration != pdb.Generation || pdb.Status.CurrentHealthy != 1 {
			return fmt.Errorf("PDB status not current yet: %+v", pdb.Status)
		}
		return nil
	})

	must(t, c.Delete(ctx, claim))
	deleted := time.Now()
	eventually(t, 90*time.Second, "the claim and its node are gone", func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(claim), &v1.NodeClaim{}); err == nil {
			return fmt.Errorf("nodeclaim %s still exists", claim.Name)
		}
		if err := c.Get(ctx, client.ObjectKey{Name: pods[0].Spec.NodeName}, &corev1.Node{}); err == nil {
			return fmt.Errorf("node %s still exists", pods[0].Spec.NodeName)
		}
		return nil
	})
	if gone := time.Since(deleted); gone < 10*time.Second {
		t.Errorf("the node went after %s, before its terminationGracePeriod: the PDB was not respected", gone.Round(time.Second))
	}
	running := allRunning(t, c, "guarded", 1, 60*time.Second)
	if running[0].Spec.NodeName == pods[0].Spec.NodeName {
		t.Errorf("the pod runs on the terminated node %s", running[0].Spec.NodeName)
	}
}

// A drain asks pods to go in Karpenter's order, each group once every pod of the
// one before has been asked: workloads, then DaemonSet pods, then critical
// workloads, then critical DaemonSet pods. A DaemonSet pod that tolerates the
// drain's taint is not evicted: it goes with the node. The order is read from a
// watch, which delivers the API server's changes in the order it made them.
func TestDrainEvictsInKarpentersOrder(t *testing.T) {
	stack, c := startDrainCluster(t, testenv.StartStackWithDaemonSets)
	ctx := context.Background()

	// One node holds the workload and the critical workload (bound to it by pod
	// affinity), and a pod of each DaemonSet.
	must(t, c.Create(ctx, localstack.Deployment("web", 1, "1", "1Gi")))
	must(t, c.Create(ctx, localstack.Deployment("dns", 1, "500m", "512Mi", func(s *corev1.PodSpec) {
		s.PriorityClassName = "system-cluster-critical"
		s.Affinity = &corev1.Affinity{PodAffinity: &corev1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
			TopologyKey: corev1.LabelHostname, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}}}}
	})))
	critical := func(s *corev1.PodSpec) { s.PriorityClassName = "system-node-critical" }
	must(t, c.Create(ctx, localstack.DaemonSet("logs", "50m", "64Mi")))
	must(t, c.Create(ctx, localstack.DaemonSet("cni", "50m", "64Mi", critical)))
	must(t, c.Create(ctx, localstack.DaemonSet("proxy", "50m", "64Mi", critical, func(s *corev1.PodSpec) {
		s.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
	})))
	web := allRunning(t, c, "web", 1, 60*time.Second)[0]
	node := web.Spec.NodeName
	for _, app := range []string{"dns", "logs", "cni", "proxy"} {
		if pods := allRunning(t, c, app, 1, 60*time.Second); pods[0].Spec.NodeName != node {
			t.Fatalf("%s runs on %s, not on the workload's node %s", app, pods[0].Spec.NodeName, node)
		}
	}

	pods := watchPods(t, stack, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
	must(t, c.Delete(ctx, claimOfNode(t, c, node)))

	// Each app in the order its pod began to go, until the node is gone.
	var order []string
	seen := map[string]bool{}
	deadline := time.After(2 * time.Minute)
	for {
		err := c.Get(ctx, client.ObjectKey{Name: node}, &corev1.Node{})
		if apierrors.IsNotFound(err) && len(seen) >= 4 {
			break
		}
		select {
		case ev, ok := <-pods.ResultChan():
			if !ok {
				t.Fatalf("the pod watch ended; went so far: %v", order)
			}
			p, isPod := ev.Object.(*corev1.Pod)
			if !isPod || (ev.Type != watch.Deleted && p.DeletionTimestamp == nil) || seen[p.Labels["app"]] {
				continue
			}
			seen[p.Labels["app"]] = true
			order = append(order, p.Labels["app"])
		case <-time.After(time.Second):
		case <-deadline:
			t.Fatalf("after 2 minutes %v had begun to go from node %s (node lookup: %v)", order, node, err)
		}
	}
	// The pod that tolerates every taint was never asked: it goes with the node.
	if got := strings.Join(order, ","); got != "web,logs,dns,cni" {
		t.Errorf("pods went in the order %v before the node did, want web, logs, dns, cni", order)
	}
}

// Two nodes drained together, one of large pods and one of small: the small pods
// are evicted only once kube-scheduler has tried every replacement the large pods'
// ReplicaSet made, so the large replacements reach the scheduler first and the
// small ones cannot take the room meant for them. Read from one pod watch, whose
// events come in the API server's order.
func TestDrainSendsTheLargePodsToTheSchedulerFirst(t *testing.T) {
	stack, c := startDrainCluster(t, testenv.StartStack)
	ctx := context.Background()
	must(t, c.Create(ctx, localstack.Deployment("small", 4, "200m", "256Mi")))
	small := allRunning(t, c, "small", 4, 90*time.Second)
	apart := func(s *corev1.PodSpec) {
		s.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
			TopologyKey: corev1.LabelHostname, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "small"}}}}}}
	}
	must(t, c.Create(ctx, localstack.Deployment("large", 2, "1500m", "6Gi", apart)))
	large := allRunning(t, c, "large", 2, 90*time.Second)
	smallNodes := map[string]bool{}
	for _, p := range small {
		smallNodes[p.Spec.NodeName] = true
	}
	if len(smallNodes) != 1 || large[0].Spec.NodeName != large[1].Spec.NodeName || smallNodes[large[0].Spec.NodeName] {
		t.Fatalf("want the small pods on one node and the large on another; small on %v, large on %s and %s", smallNodes, large[0].Spec.NodeName, large[1].Spec.NodeName)
	}
	original := map[string]bool{large[0].Name: true, large[1].Name: true}

	pods := watchPods(t, stack, metav1.ListOptions{})
	// kube-scheduler falls behind for 3 seconds, as it does behind a batch of a
	// hundred nodes: the small pods must wait for it, not for a fixed second.
	scheduler := stack.Process("kube-scheduler")
	if scheduler == nil {
		t.Fatal("the stack runs no kube-scheduler")
	}
	resume, err := scheduler.Pause()
	must(t, err)
	defer resume()
	time.AfterFunc(3*time.Second, resume)
	must(t, c.Delete(ctx, claimOfNode(t, c, large[0].Spec.NodeName)))
	must(t, c.Delete(ctx, claimOfNode(t, c, small[0].Spec.NodeName)))
	deleted := time.Now()

	// tried names the large pods' replacements kube-scheduler has bound or found no
	// node for, as the first small pod begins to go.
	replacements, tried := map[string]bool{}, map[string]bool{}
	deadline := time.After(2 * time.Minute)
	for {
		select {
		case ev, ok := <-pods.ResultChan():
			if !ok {
				t.Fatal("the pod watch ended before a small pod was evicted")
			}
			p, isPod := ev.Object.(*corev1.Pod)
			if !isPod {
				continue
			}
			switch app := p.Labels["app"]; {
			case app == "large" && !original[p.Name]:
				replacements[p.Name] = true
				for _, cond := range p.Status.Conditions {
					if cond.Type == corev1.PodScheduled {
						tried[p.Name] = true
					}
				}
			case app == "small" && p.DeletionTimestamp != nil:
				if len(replacements) < 2 || len(tried) < len(replacements) {
					t.Errorf("small pod %s was evicted when %d of the large pods' %d replacement(s) had been tried by the scheduler; want both replacements made and tried first", p.Name, len(tried), len(replacements))
				}
				// Released by the replacements' scheduling, not by the drain's
				// bound on the wait (10 s from the first pass).
				if waited := time.Since(deleted); waited >= 9*time.Second {
					t.Errorf("small pod %s was evicted %s after the nodes were deleted; the replacements were tried after about 3 s", p.Name, waited.Round(time.Second))
				}
				return
			}
		case <-deadline:
			t.Fatalf("no small pod was evicted within 2 minutes; large replacements %v, tried %v", replacements, tried)
		}
	}
}

// startDrainCluster starts the cluster with a pool that never consolidates: only
// the test's deletions drain nodes.
func startDrainCluster(t *testing.T, start func(testing.TB) *testenv.Stack) (*testenv.Stack, client.Client) {
	t.Helper()
	stack := startClusterOn(t, start)
	must(t, stack.Client.Create(context.Background(), consolidatingPool("default", "Never")))
	return stack, stack.Client
}

// watchPods watches the default namespace's pods until the test ends. A watch
// delivers the API server's changes in the order it made them.
func watchPods(t *testing.T, stack *testenv.Stack, opts metav1.ListOptions) watch.Interface {
	t.Helper()
	clientset, err := kubernetes.NewForConfig(stack.Config)
	must(t, err)
	w, err := clientset.CoreV1().Pods("default").Watch(context.Background(), opts)
	must(t, err)
	t.Cleanup(w.Stop)
	return w
}
