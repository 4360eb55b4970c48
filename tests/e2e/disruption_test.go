package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/tests/localstack"
)

// sampler runs probe every 100ms until stopped and keeps the worst value seen.
type sampler struct {
	stop chan struct{}
	done chan struct{}
	mu   sync.Mutex
	min  int
	max  int
}

func sample(probe func() (int, error)) *sampler {
	s := &sampler{stop: make(chan struct{}), done: make(chan struct{}), min: 1 << 30, max: -1}
	go func() {
		defer close(s.done)
		for {
			if v, err := probe(); err == nil {
				s.mu.Lock()
				s.min, s.max = min(s.min, v), max(s.max, v)
				s.mu.Unlock()
			}
			select {
			case <-s.stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	return s
}

func (s *sampler) finish() (lowest, highest int) {
	close(s.stop)
	<-s.done
	return s.min, s.max
}

func runningPods(c client.Client, app string) (int, error) {
	pods, err := podsOf(c, app)
	n := 0
	for _, p := range pods {
		if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
			n++
		}
	}
	return n, err
}

// disrupting counts the claims being disrupted: deleting, or on a node tainted for it.
func disrupting(c client.Client) (int, error) {
	var claims v1.NodeClaimList
	var nodes corev1.NodeList
	if err := c.List(context.Background(), &claims); err != nil {
		return 0, err
	}
	if err := c.List(context.Background(), &nodes); err != nil {
		return 0, err
	}
	tainted := map[string]bool{}
	for _, n := range nodes.Items {
		for _, t := range n.Spec.Taints {
			if t.MatchTaint(&v1.DisruptedNoScheduleTaint) {
				tainted[n.Name] = true
			}
		}
	}
	count := 0
	for _, nc := range claims.Items {
		if nc.DeletionTimestamp != nil || tainted[nc.Status.NodeName] {
			count++
		}
	}
	return count, nil
}

func nodeCPU(c client.Client) (nodes int, cpu int64, err error) {
	var list corev1.NodeList
	if err := c.List(context.Background(), &list); err != nil {
		return 0, 0, err
	}
	for _, n := range list.Items {
		cpu += n.Status.Capacity.Cpu().Value()
	}
	return len(list.Items), cpu, nil
}

// onePerNode gives a Deployment's pods hostname anti-affinity: each needs a node.
func onePerNode(app string) func(*corev1.PodSpec) {
	return func(s *corev1.PodSpec) {
		s.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
			TopologyKey: v1.LabelHostname, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}}}}}
	}
}

// noNodesLeft waits for every empty node to be removed.
func noNodesLeft(t *testing.T, c client.Client) {
	t.Helper()
	eventually(t, 90*time.Second, "every empty node removed", func() error {
		if nodes, _, err := nodeCPU(c); err != nil || nodes > 0 {
			return fmt.Errorf("%d nodes remain (%v)", nodes, err)
		}
		return nil
	})
}

func consolidatingPool(name string, after string) *v1.NodePool {
	np := localstack.GeneralNodePool(name)
	np.Spec.Disruption.ConsolidateAfter = v1.MustParseNillableDuration(after)
	return np
}

// TestConsolidation scales 100 pods down to 10: empty nodes go, the rest consolidate
// into fewer, smaller nodes, and a PodDisruptionBudget holds throughout.
func TestConsolidation(t *testing.T) {
	c := startCluster(t)
	ctx := context.Background()
	must(t, c.Create(ctx, consolidatingPool("default", "2s")))
	must(t, c.Create(ctx, localstack.Deployment("inflate", 100, "1", "1Gi")))
	allRunning(t, c, "inflate", 100, 120*time.Second)
	nodesBefore, cpuBefore, err := nodeCPU(c)
	must(t, err)

	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "inflate", Namespace: "default"},
		Spec:       policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr(intstr.FromInt32(9)), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "inflate"}}},
	}
	must(t, c.Create(ctx, pdb))
	scale(t, c, "inflate", 10)
	allRunning(t, c, "inflate", 10, 60*time.Second)
	running := sample(func() (int, error) { return runningPods(c, "inflate") })
	eventually(t, 180*time.Second, "empty nodes removed and the rest consolidated", func() error {
		nodes, cpu, err := nodeCPU(c)
		if err != nil {
			return err
		}
		busy, err := disrupting(c)
		if err != nil {
			return err
		}
		// Ten 1-cpu pods fit in 16 cpus; c6g/m/r prices are linear in size, so
		// fewer, larger nodes would not be cheaper than that.
		if nodes*2 > nodesBefore || cpu > 16 || busy > 0 {
			return fmt.Errorf("%d nodes with %d cpus (%d disrupting); before: %d nodes, %d cpus", nodes, cpu, busy, nodesBefore, cpuBefore)
		}
		return nil
	})
	allRunning(t, c, "inflate", 10, 30*time.Second)
	if lowest, _ := running.finish(); lowest < 9 {
		t.Errorf("only %d of 10 pods were Running at one point; the PDB allows one at a time", lowest)
	}
	if len(eventsFor(t, c, "default", "", "DisruptionTerminating")) == 0 {
		t.Error("no DisruptionTerminating events")
	}
}

// TestBudgetsAndDrift: a budget of 0 inside its cron window holds empty nodes, the
// same budget outside its window does not, and a template change replaces nodes one
// budget at a time.
func TestBudgetsAndDrift(t *testing.T) {
	c := startCluster(t)
	ctx := context.Background()
	now := time.Now().UTC()
	inWindow := fmt.Sprintf("%d %d * * *", now.Add(-time.Minute).Minute(), now.Add(-time.Minute).Hour())
	outOfWindow := fmt.Sprintf("%d %d * * *", now.Add(3*time.Hour).Minute(), now.Add(3*time.Hour).Hour())
	np := consolidatingPool("default", "1s")
	np.Spec.Disruption.Budgets = []v1.Budget{{Nodes: "1"}, {Nodes: "0", Schedule: &inWindow, Duration: &metav1.Duration{Duration: 2 * time.Hour}}}
	must(t, c.Create(ctx, np))
	must(t, c.Create(ctx, localstack.Deployment("spread", 4, "500m", "512Mi", onePerNode("spread"))))
	allRunning(t, c, "spread", 4, 60*time.Second)
	must(t, c.Delete(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "spread", Namespace: "default"}}))

	t.Run("a budget of 0 inside its window holds empty nodes", func(t *testing.T) {
		eventually(t, 30*time.Second, "status shows no room for Empty", func() error {
			must(t, c.Get(ctx, client.ObjectKeyFromObject(np), np))
			for _, a := range np.Status.AllowedDisruptions {
				if a.Reason == v1.DisruptionReasonEmpty && a.Nodes == 0 {
					return nil
				}
			}
			return fmt.Errorf("allowedDisruptions = %+v", np.Status.AllowedDisruptions)
		})
		time.Sleep(5 * time.Second)
		if nodes, _, err := nodeCPU(c); err != nil || nodes != 4 {
			t.Fatalf("%d nodes (%v) while the budget allows none to go; want 4", nodes, err)
		}
	})

	t.Run("outside its window the nodes go, one at a time", func(t *testing.T) {
		must(t, c.Get(ctx, client.ObjectKeyFromObject(np), np))
		patch := client.MergeFrom(np.DeepCopy())
		np.Spec.Disruption.Budgets[1].Schedule = &outOfWindow
		np.Spec.Disruption.Budgets[1].Duration = &metav1.Duration{Duration: time.Hour}
		must(t, c.Patch(ctx, np, patch))
		busy := sample(func() (int, error) { return disrupting(c) })
		noNodesLeft(t, c)
		if _, most := busy.finish(); most > 1 {
			t.Errorf("%d nodes were disrupted at once under a budget of 1", most)
		}
	})

	t.Run("a template change drifts and replaces nodes one at a time", func(t *testing.T) {
		must(t, c.Create(ctx, localstack.Deployment("spread", 3, "500m", "512Mi", onePerNode("spread"))))
		allRunning(t, c, "spread", 3, 60*time.Second)
		must(t, c.Get(ctx, client.ObjectKeyFromObject(np), np))
		patch := client.MergeFrom(np.DeepCopy())
		// Labels alone are applied in place; a taint is drift.
		np.Spec.Template.Labels = map[string]string{"team": "search"}
		np.Spec.Template.Spec.Taints = []corev1.Taint{{Key: "search", Effect: corev1.TaintEffectPreferNoSchedule}}
		must(t, c.Patch(ctx, np, patch))
		busy := sample(func() (int, error) { return disrupting(c) })
		eventually(t, 30*time.Second, "a waiting claim shows it drifted", func() error {
			var claims v1.NodeClaimList
			if err := c.List(ctx, &claims); err != nil {
				return err
			}
			for _, nc := range claims.Items {
				if cond := meta.FindStatusCondition(nc.Status.Conditions, v1.ConditionTypeDrifted); cond != nil && cond.Reason == "NodePoolDrift" {
					return nil
				}
			}
			return fmt.Errorf("no nodeclaim has Drifted=NodePoolDrift")
		})
		eventually(t, 120*time.Second, "every node replaced by one with the new template", func() error {
			var nodes corev1.NodeList
			if err := c.List(ctx, &nodes); err != nil {
				return err
			}
			if len(nodes.Items) != 3 {
				return fmt.Errorf("%d nodes", len(nodes.Items))
			}
			for _, n := range nodes.Items {
				if n.Labels["team"] != "search" {
					return fmt.Errorf("node %s has not been replaced", n.Name)
				}
			}
			return nil
		})
		allRunning(t, c, "spread", 3, 30*time.Second)
		if _, most := busy.finish(); most > 1 {
			t.Errorf("%d drifted nodes were replaced at once under a budget of 1", most)
		}
	})
}

// TestDoNotDisruptAndExpiration: a do-not-disrupt pod keeps consolidation off its
// node, but not expiration, whose drain deletes it once the grace period is over.
func TestDoNotDisruptAndExpiration(t *testing.T) {
	c := startCluster(t)
	ctx := context.Background()
	np := consolidatingPool("default", "1s")
	np.Spec.Template.Spec.ExpireAfter = v1.MustParseNillableDuration("45s")
	np.Spec.Template.Spec.TerminationGracePeriod = &metav1.Duration{Duration: 5 * time.Second}
	must(t, c.Create(ctx, np))
	d := localstack.Deployment("precious", 8, "1", "1Gi")
	d.Spec.Template.Annotations = map[string]string{v1.DoNotDisruptAnnotationKey: "true"}
	must(t, c.Create(ctx, d))
	allRunning(t, c, "precious", 8, 60*time.Second)
	// Down to one pod, its node is far larger than it needs: consolidation would
	// replace it with a cheaper one, were the pod not do-not-disrupt.
	scale(t, c, "precious", 1)
	// The pod left running, not one of the seven still terminating: their nodes
	// empty out and rightly go.
	kept := allRunning(t, c, "precious", 1, 30*time.Second)
	claim := claimOfNode(t, c, kept[0].Spec.NodeName)
	eventually(t, 30*time.Second, "a DisruptionBlocked event naming the annotation", func() error {
		for _, e := range eventsFor(t, c, "default", claim.Name, "DisruptionBlocked") {
			if strings.Contains(e.Message, v1.DoNotDisruptAnnotationKey) {
				return nil
			}
		}
		return fmt.Errorf("no such event on %s yet", claim.Name)
	})
	must(t, c.Get(ctx, client.ObjectKeyFromObject(claim), claim))
	if claim.DeletionTimestamp != nil {
		t.Fatalf("the do-not-disrupt pod's node is being deleted before it expired")
	}
	expiresAt := claim.CreationTimestamp.Add(45 * time.Second)
	eventually(t, time.Until(expiresAt)+60*time.Second, "the node expired and was drained despite do-not-disrupt", func() error {
		err := c.Get(ctx, client.ObjectKeyFromObject(claim), claim)
		if err == nil {
			return fmt.Errorf("nodeclaim %s still exists (deleting: %v)", claim.Name, claim.DeletionTimestamp != nil)
		}
		return nil
	})
	if time.Now().Before(expiresAt) {
		t.Errorf("the nodeclaim went before it expired")
	}
	allRunning(t, c, "precious", 1, 60*time.Second)
}

// TestDoNotDisruptForAWhile: karpenter.sh/do-not-disrupt set to a duration keeps
// consolidation off the pod's node for that long after the pod started (the event
// says until when), and not after: then the oversized node is consolidated away.
func TestDoNotDisruptForAWhile(t *testing.T) {
	c := startCluster(t)
	ctx := context.Background()
	must(t, c.Create(ctx, consolidatingPool("default", "1s")))
	// Three 1-cpu pods share one 4-vCPU node (cheaper than three 2-vCPU ones); the
	// one left needs only a 2-vCPU node, so replacing its node saves.
	d := localstack.Deployment("warming", 3, "1", "1Gi")
	d.Spec.Template.Annotations = map[string]string{v1.DoNotDisruptAnnotationKey: "40s"}
	must(t, c.Create(ctx, d))
	if nodes := nodesHolding(allRunning(t, c, "warming", 3, 60*time.Second)); nodes != 1 {
		t.Fatalf("the three pods are on %d nodes, not one: the test needs the one left on a node larger than it needs", nodes)
	}
	scale(t, c, "warming", 1)
	kept := allRunning(t, c, "warming", 1, 30*time.Second)
	claim := claimOfNode(t, c, kept[0].Spec.NodeName)
	eventually(t, 30*time.Second, "a DisruptionBlocked event saying until when", func() error {
		for _, e := range eventsFor(t, c, "default", claim.Name, "DisruptionBlocked") {
			if strings.Contains(e.Message, v1.DoNotDisruptAnnotationKey+" annotation, until ") {
				return nil
			}
		}
		return fmt.Errorf("no such event on %s yet", claim.Name)
	})
	protectedUntil := kept[0].Status.StartTime.Add(40 * time.Second)
	eventually(t, time.Until(protectedUntil)+90*time.Second, "the node consolidated once the protection ended", func() error {
		err := c.Get(ctx, client.ObjectKeyFromObject(claim), claim)
		if err == nil {
			var why []string
			for _, e := range eventsFor(t, c, "default", claim.Name, "DisruptionBlocked") {
				why = append(why, e.Message)
			}
			return fmt.Errorf("nodeclaim %s (%s) still exists (deleting: %v; blocked: %s)", claim.Name, claim.Labels[v1.LabelInstanceType], claim.DeletionTimestamp != nil, strings.Join(why, "; "))
		}
		return client.IgnoreNotFound(err)
	})
	// The claim's deletion started after the protection ended: its events say when
	// it was chosen.
	for _, e := range eventsFor(t, c, "default", claim.Name, "DisruptionTerminating") {
		if e.FirstTimestamp.Time.Add(time.Second).Before(protectedUntil) {
			t.Errorf("the node was chosen for disruption at %s, before its pod's protection ended at %s", e.FirstTimestamp, protectedUntil)
		}
	}
	allRunning(t, c, "warming", 1, 60*time.Second)
}

// nodesHolding counts the nodes the pods run on.
func nodesHolding(pods []corev1.Pod) int {
	nodes := map[string]bool{}
	for _, p := range pods {
		nodes[p.Spec.NodeName] = true
	}
	return len(nodes)
}

// TestUnschedulablePodDoesNotStopConsolidation: a pod no node and no pool can take
// (more cpu than any instance type has) stays pending for good; empty and
// underutilized nodes still go around it.
func TestUnschedulablePodDoesNotStopConsolidation(t *testing.T) {
	c := startCluster(t)
	ctx := context.Background()
	must(t, c.Create(ctx, consolidatingPool("default", "2s")))
	must(t, c.Create(ctx, localstack.Deployment("inflate", 30, "1", "1Gi")))
	allRunning(t, c, "inflate", 30, 120*time.Second)
	nodesBefore, _, err := nodeCPU(c)
	must(t, err)
	must(t, c.Create(ctx, localstack.Deployment("impossible", 1, "1000", "1Gi")))
	eventually(t, 30*time.Second, "the impossible pod is reported unschedulable", func() error {
		pods, err := podsOf(c, "impossible")
		if err != nil || len(pods) != 1 {
			return fmt.Errorf("pods %d, %v", len(pods), err)
		}
		for _, e := range eventsFor(t, c, "default", pods[0].Name, "FailedScheduling") {
			if e.Source.Component == "dovetail" {
				return nil
			}
		}
		return fmt.Errorf("no FailedScheduling event from dovetail yet")
	})
	scale(t, c, "inflate", 3)
	allRunning(t, c, "inflate", 3, 60*time.Second)
	eventually(t, 120*time.Second, "empty and underutilized nodes consolidated beside a pending pod", func() error {
		nodes, cpu, err := nodeCPU(c)
		if err != nil {
			return err
		}
		busy, err := disrupting(c)
		if err != nil {
			return err
		}
		if nodes >= nodesBefore || cpu > 8 || busy > 0 {
			return fmt.Errorf("%d nodes with %d cpus (%d disrupting); before: %d nodes", nodes, cpu, busy, nodesBefore)
		}
		return nil
	})
	allRunning(t, c, "inflate", 3, 30*time.Second)
	pods, err := podsOf(c, "impossible")
	must(t, err)
	if len(pods) != 1 || pods[0].Spec.NodeName != "" {
		t.Errorf("the impossible pod was placed: %+v", pods)
	}
}

// TestScaleDownInBudgetSizedBatches: four nodes left empty by a scale-down, under a
// budget of 50%, go two at a time in one plan each (Karpenter goes one node per
// validation period), never more than the budget at once.
func TestScaleDownInBudgetSizedBatches(t *testing.T) {
	c := startCluster(t)
	ctx := context.Background()
	np := consolidatingPool("default", "1s")
	np.Spec.Disruption.Budgets = []v1.Budget{{Nodes: "50%"}}
	must(t, c.Create(ctx, np))
	must(t, c.Create(ctx, localstack.Deployment("spread", 4, "500m", "512Mi", onePerNode("spread"))))
	allRunning(t, c, "spread", 4, 60*time.Second)
	if nodes, _, err := nodeCPU(c); err != nil || nodes != 4 {
		t.Fatalf("%d nodes (%v) for four pods that each need their own; want 4", nodes, err)
	}
	busy := sample(func() (int, error) { return disrupting(c) })
	must(t, c.Delete(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "spread", Namespace: "default"}}))
	noNodesLeft(t, c)
	if _, most := busy.finish(); most > 2 {
		t.Errorf("%d nodes were disrupted at once under a budget of 50%% of 4", most)
	}
	perPlan := map[string]int{}
	for _, e := range eventsFor(t, c, "default", "", "DisruptionTerminating") {
		if e.InvolvedObject.Kind != "Node" {
			continue
		}
		_, rest, named := strings.Cut(e.Message, "plan ")
		id, _, ok := strings.Cut(rest, ":")
		if !named || !ok {
			t.Fatalf("a DisruptionTerminating event does not name its plan: %q", e.Message)
		}
		perPlan[id]++
	}
	if len(perPlan) == 0 {
		t.Fatal("no DisruptionTerminating events on the nodes")
	}
	largest := 0
	for _, n := range perPlan {
		largest = max(largest, n)
	}
	if largest != 2 {
		t.Errorf("nodes per disruption: %v; want the first two together (50%% of 4)", perPlan)
	}
}

// TestPodWithoutAControllerIsEvicted: a pod no controller owns does not keep its node,
// as in Karpenter v1. Once the pods that sized its node are gone, the node is
// consolidated: the pod is evicted, gets a Warning event saying it will not come
// back, is not recreated, and no node is left.
func TestPodWithoutAControllerIsEvicted(t *testing.T) {
	c := startCluster(t)
	ctx := context.Background()
	must(t, c.Create(ctx, consolidatingPool("default", "1s")))
	// Three 1-cpu pods share one 4-vCPU node; the bare pod left alone on it needs
	// only a 2-vCPU node, so replacing the node saves.
	sizer := localstack.Deployment("sizer", 2, "1", "1Gi")
	scratch := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "scratch", Namespace: "default", Labels: map[string]string{"app": "scratch"}},
		Spec: *sizer.Spec.Template.Spec.DeepCopy()}
	must(t, c.Create(ctx, sizer))
	must(t, c.Create(ctx, scratch))
	pods := append(allRunning(t, c, "sizer", 2, 60*time.Second), allRunning(t, c, "scratch", 1, 60*time.Second)...)
	if nodes := nodesHolding(pods); nodes != 1 {
		t.Fatalf("the three pods are on %d nodes, not one: the test needs the bare pod left on a node larger than it needs", nodes)
	}
	scale(t, c, "sizer", 0)
	eventually(t, 120*time.Second, "the bare pod evicted and every node removed", func() error {
		err := c.Get(ctx, client.ObjectKeyFromObject(scratch), scratch)
		if err == nil {
			return fmt.Errorf("pod scratch is still on %s (deleting: %v)", scratch.Spec.NodeName, scratch.DeletionTimestamp != nil)
		}
		if client.IgnoreNotFound(err) != nil {
			return err
		}
		var claims v1.NodeClaimList
		if err := c.List(ctx, &claims); err != nil {
			return err
		}
		if len(claims.Items) > 0 {
			return fmt.Errorf("%d nodeclaims left", len(claims.Items))
		}
		return nil
	})
	warned := false
	for _, e := range eventsFor(t, c, "default", "scratch", "Disrupted") {
		warned = warned || (e.Type == corev1.EventTypeWarning && strings.Contains(e.Message, "with no controller to recreate it, not come back"))
	}
	if !warned {
		t.Error("no Warning event told the bare pod's owner it would not come back")
	}
}
