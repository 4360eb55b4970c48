package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/tests/localstack"
	"github.com/dovetail-sh/dovetail/tests/testenv"
)

func ptr[T any](v T) *T { return &v }

func scale(t *testing.T, c client.Client, name string, replicas int32) {
	t.Helper()
	d := &appsv1.Deployment{}
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: "default", Name: name}, d); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(d.DeepCopy())
	d.Spec.Replicas = &replicas
	if err := c.Patch(context.Background(), d, patch); err != nil {
		t.Fatal(err)
	}
}

// eventually polls cond until it returns nil or the timeout passes.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() error) {
	t.Helper()
	testenv.Eventually(t, timeout, what, cond)
}

func podsOf(c client.Client, app string) ([]corev1.Pod, error) {
	var pods corev1.PodList
	if err := c.List(context.Background(), &pods, client.InNamespace("default"), client.MatchingLabels{"app": app}); err != nil {
		return nil, err
	}
	return pods.Items, nil
}

// allRunning waits for exactly n Running pods of app and returns them.
func allRunning(t *testing.T, c client.Client, app string, n int, timeout time.Duration) []corev1.Pod {
	t.Helper()
	var running []corev1.Pod
	eventually(t, timeout, fmt.Sprintf("%d pods of %s Running", n, app), func() error {
		pods, err := podsOf(c, app)
		if err != nil {
			return err
		}
		running = running[:0]
		var waiting []string
		for _, p := range pods {
			if p.DeletionTimestamp != nil {
				continue
			}
			if p.Status.Phase == corev1.PodRunning {
				running = append(running, p)
			} else {
				waiting = append(waiting, p.Name+"="+string(p.Status.Phase))
			}
		}
		if len(running) != n || len(waiting) > 0 {
			if len(waiting) > 5 {
				waiting = append(waiting[:5], "...")
			}
			return fmt.Errorf("%d Running, not yet: %s", len(running), strings.Join(waiting, ", "))
		}
		return nil
	})
	return running
}

// verifyPlacement checks, with Kubernetes' own matchers, that each pod's node
// satisfies the pod's node affinity and taints, and that the node is one Dovetail
// launched with the labels a Karpenter user relies on.
func verifyPlacement(t *testing.T, c client.Client, pods []corev1.Pod, wantPool string) {
	t.Helper()
	for i := range pods {
		p := &pods[i]
		node := &corev1.Node{}
		if err := c.Get(context.Background(), client.ObjectKey{Name: p.Spec.NodeName}, node); err != nil {
			t.Fatalf("pod %s: node %s: %v", p.Name, p.Spec.NodeName, err)
		}
		if ok, err := nodeaffinity.GetRequiredNodeAffinity(p).Match(node); !ok || err != nil {
			t.Errorf("pod %s runs on %s whose labels do not satisfy its affinity", p.Name, node.Name)
		}
		for _, taint := range node.Spec.Taints {
			if taint.Effect == corev1.TaintEffectPreferNoSchedule {
				continue
			}
			tolerated := false
			for _, tol := range p.Spec.Tolerations {
				tolerated = tolerated || tol.ToleratesTaint(&taint)
			}
			if !tolerated {
				t.Errorf("pod %s runs on %s despite untolerated taint %s", p.Name, node.Name, taint.ToString())
			}
		}
		for _, key := range []string{v1.LabelInstanceType, v1.LabelTopologyZone, v1.LabelArch, v1.LabelCapacityType, v1.LabelNodePool, v1.LabelNodeRegistered} {
			if node.Labels[key] == "" {
				t.Errorf("node %s has no %s label", node.Name, key)
			}
		}
		// kube-scheduler binds to a Ready node without waiting for the initialized
		// label (nor does it under Karpenter): the lifecycle controller sets it on its
		// next pass, so a running pod may briefly be ahead of it.
		eventually(t, 30*time.Second, "node "+node.Name+" labelled "+v1.LabelNodeInitialized, func() error {
			n := &corev1.Node{}
			if err := c.Get(context.Background(), client.ObjectKeyFromObject(node), n); err != nil {
				return err
			}
			if n.Labels[v1.LabelNodeInitialized] != "true" {
				return fmt.Errorf("labels %v", n.Labels)
			}
			return nil
		})
		if wantPool != "" && node.Labels[v1.LabelNodePool] != wantPool {
			t.Errorf("pod %s runs on nodepool %s, want %s", p.Name, node.Labels[v1.LabelNodePool], wantPool)
		}
		alloc := node.Status.Allocatable
		if alloc.Cpu().IsZero() || alloc.Memory().IsZero() {
			t.Errorf("node %s advertises no allocatable resources", node.Name)
		}
	}
}

func resourceQuantity(s string) *resource.Quantity {
	q := resource.MustParse(s)
	return &q
}

// startCluster starts the local stack with the controller and the default
// EC2NodeClass, and returns a client to it.
func startCluster(t *testing.T) client.Client { return startClusterWithGates(t, "") }

// startClusterOn is startCluster on a stack start makes, for tests that need the
// stack itself (its rest config, its processes) or a variant of it.
func startClusterOn(t *testing.T, start func(testing.TB) *testenv.Stack) *testenv.Stack {
	t.Helper()
	if testing.Short() {
		t.Skip("starts the whole local stack")
	}
	stack := start(t)
	stack.RunController(t, testenv.DefaultOptions(t))
	must(t, stack.Client.Create(context.Background(), localstack.NodeClass("default")))
	return stack
}

// startClusterWithGates is startCluster with the controller's --feature-gates.
func startClusterWithGates(t *testing.T, gates string) client.Client {
	t.Helper()
	if testing.Short() {
		t.Skip("starts the whole local stack")
	}
	stack := testenv.StartStack(t)
	opts := testenv.DefaultOptions(t)
	must(t, opts.FeatureGates.Set(gates))
	stack.RunController(t, opts)
	must(t, stack.Client.Create(context.Background(), localstack.NodeClass("default")))
	return stack.Client
}

// standIn runs step every 200 ms until the test ends, as a node agent a test stands
// in for would keep at its work.
func standIn(t *testing.T, step func(ctx context.Context)) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for {
			step(ctx)
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
}
