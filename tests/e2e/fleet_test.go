package e2e

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/tests/localstack"
	"github.com/dovetail-sh/dovetail/tests/testenv"
)

// AnyLinuxNodePool is Karpenter's usual NodePool: any linux instance type, nothing
// else said. On the whole AWS catalog it once got a burstable 2-vCPU node per pod.
func anyLinuxNodePool() *v1.NodePool {
	return localstack.NodePool("default", localstack.Requirement(v1.LabelOS, v1.OpIn, "linux"))
}

// nodeAgent is a DaemonSet like the ones every real cluster runs (log shipper, CNI,
// node exporter): its pods take a share of every node.
func nodeAgent() *appsv1.DaemonSet {
	labels := map[string]string{"app": "node-agent"}
	zero := int64(0)
	return &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: "node-agent", Namespace: "default"},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{
				TerminationGracePeriodSeconds: &zero,
				Tolerations:                   []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
				Containers: []corev1.Container{{Name: "agent", Image: "registry.k8s.io/pause:3.10", Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("200m"), corev1.ResourceMemory: resource.MustParse("256Mi")},
				}}},
			}},
		},
	}
}

// TestFleetShapeOnAnyLinuxPool runs the kwok provider on the whole embedded AWS
// catalog with the "anything linux" pool and a DaemonSet, and checks the fleet a
// user would look at: few nodes for a Deployment of 1-cpu pods, and no node that a
// burst launched left without pods once the burst has settled.
func TestFleetShapeOnAnyLinuxPool(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the whole local stack")
	}
	stack := testenv.StartStack(t)
	opts := testenv.DefaultOptions(t)
	opts.KwokCatalog = "" // the embedded catalog: every AWS type
	stack.RunController(t, opts)
	c := stack.Client
	ctx := context.Background()
	must(t, c.Create(ctx, localstack.NodeClass("default")))
	must(t, c.Create(ctx, anyLinuxNodePool()))
	must(t, c.Create(ctx, nodeAgent()))
	must(t, c.Create(ctx, localstack.Deployment("inflate", 0, "1", "1Gi")))

	t.Run("100 pods on at most 4 nodes", func(t *testing.T) {
		scale(t, c, "inflate", 100)
		verifyPlacement(t, c, allRunning(t, c, "inflate", 100, 2*time.Minute), "default")
		fleet := settledFleet(t, c, "inflate")
		if len(fleet) > 4 {
			t.Errorf("100 pods run on %d nodes, want at most 4: %s", len(fleet), fleet)
		}
		fleet.mustHostPods(t)
	})

	t.Run("a burst of 300 more leaves no empty node", func(t *testing.T) {
		scale(t, c, "inflate", 400)
		verifyPlacement(t, c, allRunning(t, c, "inflate", 400, 3*time.Minute), "default")
		fleet := settledFleet(t, c, "inflate")
		fleet.mustHostPods(t)
		// 400 cpu of pods: the biggest types hold 190 of them, so 3 nodes at the very
		// least; more than 12 means capacity was fragmented.
		if len(fleet) > 12 {
			t.Errorf("400 pods run on %d nodes, want at most 12: %s", len(fleet), fleet)
		}
	})
}

// fleetNode is one NodeClaim and the workload pods on its node.
type fleetNode struct {
	claim, instanceType string
	pods                int
}

type fleet []fleetNode

func (f fleet) String() string {
	parts := make([]string, len(f))
	for i, n := range f {
		parts[i] = fmt.Sprintf("%s(%s, %d pods)", n.claim, n.instanceType, n.pods)
	}
	return strings.Join(parts, " ")
}

func (f fleet) mustHostPods(t *testing.T) {
	t.Helper()
	for _, n := range f {
		if n.pods == 0 {
			t.Errorf("nodeclaim %s (%s) hosts no pods once the burst settled; fleet: %s", n.claim, n.instanceType, f)
		}
	}
}

// settledFleet waits until every NodeClaim has an initialized node and the set of
// claims stays the same for a few seconds (the provisioner has nothing left in
// flight), then returns each claim with the number of app's pods on its node.
func settledFleet(t *testing.T, c client.Client, app string) fleet {
	t.Helper()
	var out fleet
	var last string
	stableSince := time.Now()
	eventually(t, 90*time.Second, "the fleet settled", func() error {
		var claims v1.NodeClaimList
		if err := c.List(context.Background(), &claims); err != nil {
			return err
		}
		pods, err := podsOf(c, app)
		if err != nil {
			return err
		}
		perNode := map[string]int{}
		for _, p := range pods {
			if p.Spec.NodeName != "" && p.DeletionTimestamp == nil {
				perNode[p.Spec.NodeName]++
			}
		}
		out = out[:0]
		names := make([]string, 0, len(claims.Items))
		for _, nc := range claims.Items {
			if nc.Status.NodeName == "" || !initialized(&nc) {
				return fmt.Errorf("nodeclaim %s is not initialized yet", nc.Name)
			}
			out = append(out, fleetNode{claim: nc.Name, instanceType: nc.Labels[v1.LabelInstanceType], pods: perNode[nc.Status.NodeName]})
			names = append(names, nc.Name)
		}
		sort.Strings(names)
		if key := strings.Join(names, ","); key != last {
			last, stableSince = key, time.Now()
		}
		if time.Since(stableSince) < 5*time.Second {
			return fmt.Errorf("the set of nodeclaims changed less than 5s ago")
		}
		return nil
	})
	sort.Slice(out, func(i, j int) bool { return out[i].claim < out[j].claim })
	return out
}

func initialized(nc *v1.NodeClaim) bool {
	for _, c := range nc.Status.Conditions {
		if c.Type == v1.ConditionTypeInitialized {
			return c.Status == metav1.ConditionTrue
		}
	}
	return false
}

// TestAWSFleetShape is the same on the AWS provider against moto: the "anything
// linux" pool on every type moto offers, instances registered by the kubelet
// stand-in. The pool asks for on-demand because moto prices every spot offering
// at $0.00001, which would make every type equally cheap.
func TestAWSFleetShape(t *testing.T) {
	cluster := startAWSCluster(t)
	c, ctx := cluster.client, context.Background()
	pool := anyLinuxNodePool()
	pool.Spec.Template.Spec.Requirements = append(pool.Spec.Template.Spec.Requirements,
		localstack.Requirement(v1.LabelCapacityType, v1.OpIn, v1.CapacityTypeOnDemand))
	must(t, c.Create(ctx, pool))
	must(t, c.Create(ctx, nodeAgent()))
	must(t, c.Create(ctx, localstack.Deployment("inflate", 0, "1", "1Gi")))

	t.Run("100 pods on at most 4 instances", func(t *testing.T) {
		scale(t, c, "inflate", 100)
		verifyPlacement(t, c, allRunning(t, c, "inflate", 100, 3*time.Minute), "default")
		fleet := settledFleet(t, c, "inflate")
		if len(fleet) > 4 {
			t.Errorf("100 pods run on %d nodes, want at most 4: %s", len(fleet), fleet)
		}
		fleet.mustHostPods(t)
	})

	t.Run("a burst of 300 more leaves no empty instance", func(t *testing.T) {
		scale(t, c, "inflate", 400)
		verifyPlacement(t, c, allRunning(t, c, "inflate", 400, 4*time.Minute), "default")
		fleet := settledFleet(t, c, "inflate")
		fleet.mustHostPods(t)
		if len(fleet) > 12 {
			t.Errorf("400 pods run on %d nodes, want at most 12: %s", len(fleet), fleet)
		}
		if n := cluster.standIn.Registered(); n != len(fleet) {
			t.Errorf("%d instances registered for %d nodeclaims: every launched instance should be a node with pods", n, len(fleet))
		}
	})
}
