package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dovetail-sh/dovetail/controller/apis/autoscaling/v1beta1"
	awsv1 "github.com/dovetail-sh/dovetail/controller/apis/aws/v1"
	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/controller/apis/v1alpha1"
	"github.com/dovetail-sh/dovetail/controller/catalog"
	"github.com/dovetail-sh/dovetail/controller/simulate"
	"github.com/dovetail-sh/dovetail/tests/localstack"
	"github.com/dovetail-sh/dovetail/tests/testenv"
)

// TestPredictionIsWhatTheControllerDoes: a burst of pending pods is read from the
// live cluster as a snapshot (as `dovetail simulate` reads one), planned by
// simulate under the controller's settings, and then the controller starts and
// launches for it. The NodeClaims launched are the predicted ones: as many, of the
// predicted instance types, every pod running. The cluster holds a NodeOverlay
// pricing m5 at $5/h. With the NodeOverlay gate off (the default) the controller
// ignores it and launches m5, and the prediction says so; with the gate on it
// launches m7i, and so does the prediction. With the CapacityBuffer gate on, a
// buffer's room is launched with the burst, as predicted. With the class's
// kubelet.maxPods at 3, a burst of eight small pods is predicted on three nodes of
// at most 3 pods, and the nodes launched are those and hold 3. Then, the controller stopped, the
// burst shrinks to one small pod and the pool consolidates: `simulate
// --consolidate` on a snapshot says which nodes go and what replaces them, and the
// controller, started again, leaves the cluster with exactly the nodes predicted.
func TestPredictionIsWhatTheControllerDoes(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the whole local stack")
	}
	stack := testenv.StartStack(t)
	c := stack.Client
	ctx := context.Background()
	must(t, c.Create(ctx, localstack.NodeClass("default")))
	created := localstack.NodePool("default",
		localstack.Requirement(v1.LabelInstanceType, v1.OpIn, "m5.large", "m7i.large", "m5.2xlarge", "m7i.2xlarge"),
		localstack.Requirement(v1.LabelCapacityType, v1.OpIn, v1.CapacityTypeOnDemand))
	noConsolidation := *created.Spec.Disruption.DeepCopy()
	must(t, c.Create(ctx, created))
	price := "5"
	must(t, c.Create(ctx, &v1alpha1.NodeOverlay{ObjectMeta: metav1.ObjectMeta{Name: "m5-dear"}, Spec: v1alpha1.NodeOverlaySpec{
		Requirements: []v1alpha1.NodeSelectorRequirement{{Key: v1.LabelInstanceFamily, Operator: corev1.NodeSelectorOpIn, Values: []string{"m5"}}}, Price: &price}}))

	for _, tc := range []struct {
		name, gates, family string
		// buffer is a CapacityBuffer's replicas of a 2-cpu PodTemplate, 0 for none.
		buffer int32
		// maxPods is the class's kubelet.maxPods, 0 for none.
		maxPods int32
		// The burst: web pods of webCPU, and 3-cpu db pods.
		web, db int32
		webCPU  string
	}{
		{"overlay gate off", "", "m5", 0, 0, 6, 2, "1"},
		{"overlay gate on", "NodeOverlay=true", "m7i", 0, 0, 6, 2, "1"},
		{"capacity buffer", "CapacityBuffer=true", "m5", 3, 0, 6, 2, "1"},
		// Pods of one size, so that every node of the plan is alike: with 3 pods a
		// node, which pods kube-scheduler binds where (it does not follow
		// nominations) decides whether a mixed burst fits its nodes, which neither
		// this prediction nor the controller's plan can know.
		{"class kubelet.maxPods", "", "m5", 0, 3, 8, 0, "250m"},
	} {
		// Each scenario starts from the empty cluster the last one leaves; after a
		// failure it is not empty, and the scenarios after it would say nothing.
		if !t.Run(tc.name, func(t *testing.T) {
			opts := testenv.DefaultOptions(t)
			must(t, opts.FeatureGates.Set(tc.gates))
			cat, err := catalog.Load(opts.KwokCatalog)
			must(t, err)
			pool := &v1.NodePool{}
			must(t, c.Get(ctx, client.ObjectKey{Name: "default"}, pool))
			pool.Spec.Disruption = noConsolidation
			must(t, c.Update(ctx, pool))

			if tc.maxPods > 0 {
				class := &awsv1.EC2NodeClass{}
				must(t, c.Get(ctx, client.ObjectKey{Name: "default"}, class))
				class.Spec.Kubelet = &awsv1.KubeletConfiguration{MaxPods: &tc.maxPods}
				must(t, c.Update(ctx, class))
			}
			if tc.buffer > 0 {
				spare := localstack.Deployment("spare", 0, "2", "2Gi")
				must(t, c.Create(ctx, &corev1.PodTemplate{ObjectMeta: metav1.ObjectMeta{Name: "spare", Namespace: "default"}, Template: spare.Spec.Template}))
				must(t, c.Create(ctx, &v1beta1.CapacityBuffer{ObjectMeta: metav1.ObjectMeta{Name: "spare", Namespace: "default"},
					Spec: v1beta1.CapacityBufferSpec{PodTemplateRef: &v1beta1.LocalObjectRef{Name: "spare"}, Replicas: &tc.buffer}}))
			}
			// The burst is pending before the controller starts: the snapshot is
			// the cluster the controller will first see.
			must(t, c.Create(ctx, localstack.Deployment("web", tc.web, tc.webCPU, "1Gi")))
			must(t, c.Create(ctx, localstack.Deployment("db", tc.db, "3", "6Gi")))
			eventually(t, 30*time.Second, "the burst's 8 pods created", func() error {
				n := 0
				for _, app := range []string{"web", "db"} {
					pods, err := podsOf(c, app)
					if err != nil {
						return err
					}
					n += len(pods)
				}
				if n != 8 {
					return fmt.Errorf("%d pods", n)
				}
				return nil
			})
			in := &simulate.Inputs{}
			must(t, simulate.ReadLive(ctx, stack.Config, in))
			plan, err := simulate.Run(in, cat, &opts, clock.RealClock{})
			must(t, err)
			if len(plan.Unschedulable) != 0 || plan.Summary.Scheduled != 8 {
				t.Fatalf("predicted %d of 8 pods placed, unschedulable %+v", plan.Summary.Scheduled, plan.Unschedulable)
			}
			if tc.buffer > 0 && (len(plan.Buffers) != 1 || plan.Buffers[0].Replicas != tc.buffer || plan.Buffers[0].Failed != 0) {
				t.Fatalf("buffers %+v; want the buffer's %d pods placed", plan.Buffers, tc.buffer)
			}
			var predicted []string
			for _, nc := range plan.NodeClaims {
				predicted = append(predicted, nc.InstanceType)
				if tc.maxPods > 0 && len(nc.Pods) > int(tc.maxPods) {
					t.Errorf("predicted %d pods on a %s; the class's kubelet.maxPods is %d", len(nc.Pods), nc.InstanceType, tc.maxPods)
				}
			}
			if tc.maxPods > 0 && len(plan.NodeClaims) < 8/int(tc.maxPods)+1 {
				t.Errorf("predicted %d claims for 8 pods at most %d a node", len(plan.NodeClaims), tc.maxPods)
			}
			slices.Sort(predicted)
			t.Logf("predicted launch: %v", predicted)

			// Each nested run is one life of the controller: it stops when the run ends.
			withController := func(name string, f func(t *testing.T)) {
				t.Run(name, func(t *testing.T) {
					stack.RunController(t, opts)
					f(t)
				})
			}
			withController("burst", func(t *testing.T) {
				allRunning(t, c, "web", int(tc.web), 90*time.Second)
				allRunning(t, c, "db", int(tc.db), 30*time.Second)
				var claims v1.NodeClaimList
				must(t, c.List(ctx, &claims))
				var launched []string
				for _, nc := range claims.Items {
					launched = append(launched, nc.Labels[v1.LabelInstanceType])
				}
				slices.Sort(launched)
				if !slices.Equal(predicted, launched) {
					t.Errorf("predicted %v, launched %v", predicted, launched)
				}
				for _, it := range launched {
					if family := it[:len(tc.family)]; family != tc.family {
						t.Errorf("launched %s; with gates %q the %s family is the cheaper", it, tc.gates, tc.family)
					}
				}
				if tc.maxPods > 0 {
					var nodes corev1.NodeList
					must(t, c.List(ctx, &nodes, client.HasLabels{v1.LabelNodePool}))
					for _, n := range nodes.Items {
						if pods := n.Status.Capacity.Pods().Value(); pods != int64(tc.maxPods) {
							t.Errorf("node %s holds %d pods; the class's kubelet.maxPods is %d", n.Name, pods, tc.maxPods)
						}
					}
				}
			})
			if t.Failed() {
				return
			}

			must(t, c.Get(ctx, client.ObjectKey{Name: "default"}, pool))
			pool.Spec.Disruption.ConsolidationPolicy = v1.ConsolidationPolicyWhenEmptyOrUnderutilized
			pool.Spec.Disruption.ConsolidateAfter = v1.MustParseNillableDuration("0s")
			pool.Spec.Disruption.Budgets = []v1.Budget{{Nodes: "100%"}}
			must(t, c.Update(ctx, pool))
			must(t, c.Delete(ctx, localstack.Deployment("db", 0, "1", "1Gi")))
			scale(t, c, "web", 1)
			eventually(t, 60*time.Second, "the burst down to one web pod", func() error {
				db, err := podsOf(c, "db")
				if err != nil {
					return err
				}
				web, err := podsOf(c, "web")
				if err != nil {
					return err
				}
				if len(db) != 0 || len(web) != 1 || web[0].Status.Phase != corev1.PodRunning {
					return fmt.Errorf("%d db pods, %d web pods", len(db), len(web))
				}
				return nil
			})
			in = &simulate.Inputs{}
			must(t, simulate.ReadLive(ctx, stack.Config, in))
			report, err := simulate.Consolidate(in, cat, &opts, time.Now())
			must(t, err)
			if len(report.Remove) == 0 {
				t.Fatalf("consolidation predicts no node removed: %+v", report.Kept)
			}
			removed := map[string]bool{}
			for _, r := range report.Remove {
				removed[r.Node] = true
			}
			var after []string
			var before corev1.NodeList
			must(t, c.List(ctx, &before, client.HasLabels{v1.LabelNodePool}))
			for _, n := range before.Items {
				if !removed[n.Name] {
					after = append(after, n.Labels[v1.LabelInstanceType])
				}
			}
			for _, l := range report.Launch {
				after = append(after, l.InstanceType)
			}
			slices.Sort(after)
			t.Logf("predicted consolidation: remove %d node(s), launch %d, leaving %v", len(report.Remove), len(report.Launch), after)
			// The pods that move are the ones predicted: each is evicted (its
			// ReplicaSet makes another, under a new name), and every other pod stays
			// where it runs.
			moved := map[string]bool{}
			for _, m := range report.PodsMoved {
				moved[m.Pod] = true
			}
			var running corev1.PodList
			must(t, c.List(ctx, &running, client.InNamespace("default")))
			stays := map[string]string{}
			for _, p := range running.Items {
				if p.Spec.NodeName == "" {
					continue
				}
				key := p.Namespace + "/" + p.Name
				if removed[p.Spec.NodeName] != moved[key] {
					t.Fatalf("pod %s on %s: predicted moved %v, its node predicted removed %v", key, p.Spec.NodeName, moved[key], removed[p.Spec.NodeName])
				}
				if !moved[key] {
					stays[key] = p.Spec.NodeName
				}
			}
			t.Logf("predicted: %d pod(s) moved, %d staying where they run", len(moved), len(stays))

			withController("consolidate", func(t *testing.T) {
				eventually(t, 90*time.Second, "the cluster consolidated as predicted", func() error {
					var nodes corev1.NodeList
					if err := c.List(ctx, &nodes, client.HasLabels{v1.LabelNodePool}); err != nil {
						return err
					}
					var types []string
					for _, n := range nodes.Items {
						if removed[n.Name] {
							return fmt.Errorf("%s, predicted removed, is still there", n.Name)
						}
						types = append(types, n.Labels[v1.LabelInstanceType])
					}
					slices.Sort(types)
					if !slices.Equal(types, after) {
						return fmt.Errorf("nodes %v, predicted %v", types, after)
					}
					var pods corev1.PodList
					if err := c.List(ctx, &pods, client.InNamespace("default")); err != nil {
						return err
					}
					on := map[string]string{}
					for _, p := range pods.Items {
						on[p.Namespace+"/"+p.Name] = p.Spec.NodeName
					}
					for pod := range moved {
						if _, ok := on[pod]; ok {
							return fmt.Errorf("pod %s, predicted moved, is still there", pod)
						}
					}
					for pod, node := range stays {
						if on[pod] != node {
							return fmt.Errorf("pod %s, predicted to stay on %s, is on %q", pod, node, on[pod])
						}
					}
					return nil
				})
				allRunning(t, c, "web", 1, 60*time.Second)

				// The next scenario starts from an empty cluster; the controller of this
				// one takes its nodes down, the buffer first so none is kept for it.
				must(t, client.IgnoreNotFound(c.Delete(ctx, &v1beta1.CapacityBuffer{ObjectMeta: metav1.ObjectMeta{Name: "spare", Namespace: "default"}})))
				must(t, client.IgnoreNotFound(c.Delete(ctx, &corev1.PodTemplate{ObjectMeta: metav1.ObjectMeta{Name: "spare", Namespace: "default"}})))
				class := &awsv1.EC2NodeClass{}
				must(t, c.Get(ctx, client.ObjectKey{Name: "default"}, class))
				class.Spec.Kubelet = nil
				must(t, c.Update(ctx, class))
				for _, app := range []string{"web", "db"} {
					must(t, client.IgnoreNotFound(c.Delete(ctx, localstack.Deployment(app, 0, "1", "1Gi"))))
				}
				must(t, c.DeleteAllOf(ctx, &v1.NodeClaim{}))
				eventually(t, 90*time.Second, "every NodeClaim and Node gone", func() error {
					var claims v1.NodeClaimList
					var nodes corev1.NodeList
					if err := c.List(ctx, &claims); err != nil {
						return err
					}
					if err := c.List(ctx, &nodes, client.HasLabels{v1.LabelNodePool}); err != nil {
						return err
					}
					if len(claims.Items)+len(nodes.Items) > 0 {
						return fmt.Errorf("%d nodeclaims, %d nodes left", len(claims.Items), len(nodes.Items))
					}
					for _, app := range []string{"web", "db"} {
						if pods, err := podsOf(c, app); err != nil || len(pods) > 0 {
							return fmt.Errorf("%d pods of %s left (%v)", len(pods), app, err)
						}
					}
					return nil
				})
			})
		}) {
			break
		}
	}
}

// TestStaticPoolPredictionIsWhatTheControllerDoes: a static NodePool of 4 replicas
// whose limits.nodes leaves room for two (Karpenter's schema allows static pools
// no other limit, a spend limit included). Read from the cluster
// before the controller starts, simulate says what the static controller launches
// (how many, of which type) and which limit holds the rest; the controller,
// started, launches exactly that; read again, simulate says nothing more launches.
func TestStaticPoolPredictionIsWhatTheControllerDoes(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the whole local stack")
	}
	stack := testenv.StartStack(t)
	c := stack.Client
	ctx := context.Background()
	opts := testenv.DefaultOptions(t)
	must(t, opts.FeatureGates.Set("StaticCapacity=true"))
	cat, err := catalog.Load(opts.KwokCatalog)
	must(t, err)
	must(t, c.Create(ctx, localstack.NodeClass("default")))
	static := localstack.NodePool("static", localstack.Requirement(v1.LabelInstanceType, v1.OpIn, "m5.large", "m7i.large"),
		localstack.Requirement(v1.LabelCapacityType, v1.OpIn, v1.CapacityTypeOnDemand))
	replicas := int64(4)
	static.Spec.Replicas = &replicas
	static.Spec.Limits = v1.Limits{"nodes": resource.MustParse("2")}
	must(t, c.Create(ctx, static))

	predict := func() simulate.StaticPoolPlan {
		in := &simulate.Inputs{}
		must(t, simulate.ReadLive(ctx, stack.Config, in))
		plan, err := simulate.Run(in, cat, &opts, clock.RealClock{})
		must(t, err)
		if len(plan.StaticPools) != 1 {
			t.Fatalf("static pools predicted: %+v; want the one", plan.StaticPools)
		}
		return plan.StaticPools[0]
	}
	before := predict()
	t.Logf("predicted: %+v", before)
	if before.Launch != 2 || before.InstanceType != "m5.large" || !strings.Contains(before.Problem, "limits.nodes") {
		t.Fatalf("predicted %+v; want 2 m5.large launched and limits.nodes named as holding the rest", before)
	}

	stack.RunController(t, opts)
	waitStatic(t, c, "static", before.Launch, "the predicted static nodes")
	var nodes corev1.NodeList
	must(t, c.List(ctx, &nodes, client.MatchingLabels{v1.LabelNodePool: "static"}))
	for _, n := range nodes.Items {
		if it := n.Labels[v1.LabelInstanceType]; it != before.InstanceType {
			t.Errorf("static node %s is a %s; predicted %s", n.Name, it, before.InstanceType)
		}
	}
	if after := predict(); after.Existing != before.Launch || after.Launch != 0 {
		t.Errorf("read again: %+v; want the %d launched counted and nothing more launched", after, before.Launch)
	}
	must(t, c.Delete(ctx, static))
	eventually(t, 90*time.Second, "the static nodes gone", func() error {
		claims, _, err := staticNodes(c, "static")
		if err != nil || claims > 0 {
			return fmt.Errorf("%d claims left (%v)", claims, err)
		}
		return nil
	})
}
