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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/controller/catalog"
	"github.com/dovetail-sh/dovetail/controller/scheduling"
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
	return localstack.DaemonSet("node-agent", "200m", "256Mi", func(s *corev1.PodSpec) {
		s.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
	})
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
	agent := nodeAgent()
	must(t, c.Create(ctx, agent))
	inflate := localstack.Deployment("inflate", 0, "1", "1Gi")
	must(t, c.Create(ctx, inflate))
	embedded, err := catalog.EmbeddedAWS()
	must(t, err)
	types := embedded.ForEngine(scheduling.AllocatableSettings{VMMemoryOverheadPercent: opts.VMMemoryOverheadPercent})
	var first fleet

	t.Run("100 pods on at most 4 nodes", func(t *testing.T) {
		scale(t, c, "inflate", 100)
		verifyPlacement(t, c, allRunning(t, c, "inflate", 100, 2*time.Minute), "default")
		fleet := settledFleet(t, c, "inflate")
		if len(fleet) > 4 {
			t.Errorf("100 pods run on %d nodes, want at most 4: %s", len(fleet), fleet)
		}
		fleet.mustHostPods(t)
		fleet.mustMatchPlan(t, nil, planFleet(anyLinuxNodePool(), types, inflate, agent, nil, 100), types)
		first = fleet
	})

	t.Run("a burst of 300 more leaves no empty node", func(t *testing.T) {
		scale(t, c, "inflate", 400)
		verifyPlacement(t, c, allRunning(t, c, "inflate", 400, 3*time.Minute), "default")
		fleet := settledFleet(t, c, "inflate")
		fleet.mustHostPods(t)
		fleet.mustMatchPlan(t, first, planFleet(anyLinuxNodePool(), types, inflate, agent, first, 300), types)
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

// replicas counts the workload pods on the fleet.
func (f fleet) replicas() int {
	n := 0
	for _, node := range f {
		n += node.pods
	}
	return n
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
// linux" pool on every type moto offers in us-west-2, instances registered by the
// kubelet stand-in. The pool asks for on-demand because moto prices every spot
// offering at $0.00001, which would make every type equally cheap. There the
// cheapest capacity per pod is a1.4xlarge (16 vCPUs; no larger type comes within
// 25% of its price per pod), so the fleet is checked against what the engine plans
// for the same pods on the instance types the provider reports: what `dovetail
// simulate` predicts is what launches, within one node and 5% of the price.
func TestAWSFleetShape(t *testing.T) {
	cluster := startAWSCluster(t)
	c, ctx := cluster.client, context.Background()
	pool := anyLinuxNodePool()
	pool.Spec.Template.Spec.Requirements = append(pool.Spec.Template.Spec.Requirements,
		localstack.Requirement(v1.LabelCapacityType, v1.OpIn, v1.CapacityTypeOnDemand))
	must(t, c.Create(ctx, pool))
	agent := nodeAgent()
	must(t, c.Create(ctx, agent))
	inflate := localstack.Deployment("inflate", 0, "1", "1Gi")
	must(t, c.Create(ctx, inflate))
	types := cluster.instanceTypes(t, pool)

	var before fleet
	for _, step := range []struct {
		name     string
		replicas int32
	}{{"100 pods", 100}, {"a burst of 300 more", 400}} {
		t.Run(step.name+" launch the planned fleet and leave no empty instance", func(t *testing.T) {
			scale(t, c, "inflate", step.replicas)
			verifyPlacement(t, c, allRunning(t, c, "inflate", int(step.replicas), 4*time.Minute), "default")
			fleet := settledFleet(t, c, "inflate")
			fleet.mustHostPods(t)
			fleet.mustMatchPlan(t, before, planFleet(pool, types, inflate, agent, before, int(step.replicas)-before.replicas()), types)
			before = fleet
			if n := cluster.standIn.Registered(); n != len(fleet) {
				t.Errorf("%d instances registered for %d nodeclaims: every launched instance should be a node with pods", n, len(fleet))
			}
		})
	}
}

// planFleet is the engine's plan for n more replicas of d, with ds on every node,
// on a cluster that already runs the fleet before: what `dovetail simulate` prints
// for the same input.
func planFleet(pool *v1.NodePool, types []*scheduling.InstanceType, d *appsv1.Deployment, ds *appsv1.DaemonSet, before fleet, n int) *scheduling.Results {
	replica := func(name string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: d.Namespace, Labels: d.Spec.Template.Labels}, Spec: d.Spec.Template.Spec}
	}
	daemon := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: ds.Name, Namespace: ds.Namespace, Labels: ds.Spec.Template.Labels}, Spec: ds.Spec.Template.Spec}
	var existing []*scheduling.ExistingNode
	for _, node := range before {
		for _, it := range types {
			if it.Name != node.instanceType {
				continue
			}
			en := &scheduling.ExistingNode{Name: node.claim, NodePool: pool.Name, Capacity: it.Capacity, Allocatable: it.Allocatable,
				Labels: map[string]string{v1.LabelNodePool: pool.Name, v1.LabelInstanceType: it.Name, v1.LabelHostname: node.claim}, Pods: []*corev1.Pod{daemon}}
			for i := 0; i < node.pods; i++ {
				en.Pods = append(en.Pods, replica(fmt.Sprintf("%s-running-%d", node.claim, i)))
			}
			existing = append(existing, en)
		}
	}
	pods := make([]*corev1.Pod, n)
	for i := range pods {
		pods[i] = replica(fmt.Sprintf("%s-%d", d.Name, i))
	}
	return scheduling.Solve(scheduling.Input{Pods: pods, Nodes: existing, NodePools: []*v1.NodePool{pool},
		InstanceTypes: map[string][]*scheduling.InstanceType{pool.Name: types}, DaemonSetPods: []*corev1.Pod{daemon}})
}

// mustMatchPlan checks the fleet against the fleet before plus the engine's plan
// for the pods added since: what `dovetail simulate` predicts is what launched,
// within one node and 5% of the price.
func (f fleet) mustMatchPlan(t *testing.T, before fleet, plan *scheduling.Results, types []*scheduling.InstanceType) {
	t.Helper()
	if len(plan.Unschedulable) > 0 {
		t.Fatalf("the engine cannot place %d pods: %s", len(plan.Unschedulable), plan.Unschedulable[0].Reason)
	}
	want := len(before) + len(plan.NodeClaims)
	if d := len(f) - want; d > 1 || d < -1 {
		t.Errorf("%d nodes launched; the engine plans %d for the same pods: %s", len(f), want, f)
	}
	if got, want := f.pricePerHour(types), before.pricePerHour(types)+plan.PricePerHour(); got > want*1.05 || got < want*0.95 {
		t.Errorf("the fleet costs $%.3f/h; the engine plans $%.3f/h: %s", got, want, f)
	}
}

// pricePerHour is the fleet's on-demand list price from the provider's types.
func (f fleet) pricePerHour(types []*scheduling.InstanceType) float64 {
	total := 0.0
	for _, n := range f {
		for _, it := range types {
			if it.Name != n.instanceType {
				continue
			}
			if o, ok := scheduling.CheapestOffering(it, scheduling.Requirements{v1.LabelCapacityType: scheduling.MustRequirement(v1.LabelCapacityType, v1.OpIn, v1.CapacityTypeOnDemand)}); ok {
				total += o.Price
			}
		}
	}
	return total
}
