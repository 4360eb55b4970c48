package consolidation_test

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/controller/catalog"
	"github.com/dovetail-sh/dovetail/controller/consolidation"
	"github.com/dovetail-sh/dovetail/controller/engineinput"
	"github.com/dovetail-sh/dovetail/controller/scheduling"
	"github.com/dovetail-sh/dovetail/controller/scheduling/schedulingtest"
	"github.com/dovetail-sh/dovetail/controller/state"
)

var benchZones = []string{"us-east-1a", "us-east-1b", "us-east-1c"}

// BenchmarkConsolidationDecision times one consolidation decision on a cluster the
// engine built for the `make bench` workload mix, after half of every deployment's
// replicas were removed at random: the cluster after a large scale-in, where
// Karpenter's one-node-at-a-time consolidation takes hours. It reports the
// decision's time, the nodes before and after the plan, and the plan's $/h over the
// price lower bound for the pods left.
func BenchmarkConsolidationDecision(b *testing.B) {
	cat, err := catalog.EmbeddedAWS()
	if err != nil {
		b.Fatal(err)
	}
	types := cat.ForEngine(scheduling.DefaultAllocatableSettings())
	for _, nodes := range []int{500, 2000} {
		b.Run(fmt.Sprintf("nodes=%d", nodes), func(b *testing.B) {
			now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
			view, remaining := scaledInCluster(b, types, nodes, now)
			snap := engineinput.FromView(view, func(*v1.NodePool) []*scheduling.InstanceType { return types }, scheduling.DefaultNodeCosts())
			var plan *consolidation.Plan
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				cl := consolidation.Observe(view, snap, nil, now)
				allowed, _ := cl.Allowed(now)
				plan = consolidation.Decide(cl, allowed, consolidation.Options{Now: now})
			}
			b.StopTimer()
			before := 0.0
			for i := range view.Claims {
				nc := &view.Claims[i]
				before += consolidation.Price(types, nc.Labels[v1.LabelInstanceType], nc.Labels[v1.LabelTopologyZone], nc.Labels[v1.LabelCapacityType])
			}
			after := before - plan.Savings()
			bound := schedulingtest.PriceLowerBound(remaining, schedulingtest.PoolTypes(&view.Pools[0], types))
			b.ReportMetric(b.Elapsed().Seconds()/float64(b.N), "s/decision")
			b.ReportMetric(float64(len(view.Claims)), "nodes_before")
			b.ReportMetric(float64(len(view.Claims)-len(plan.Remove)+len(plan.Replacements)), "nodes_after")
			b.ReportMetric(before/bound, "cost_ratio_before")
			b.ReportMetric(after/bound, "cost_ratio")
			b.Logf("%d pods left; $%.2f/h before, $%.2f/h after, lower bound $%.2f/h; removes %d nodes, launches %d, %d blocked",
				len(remaining), before, after, bound, len(plan.Remove), len(plan.Replacements), len(plan.Blocked))
		})
	}
}

// scaledInCluster has the engine plan a cluster of about n nodes for the bench
// workload, binds the pods there, then deletes half of every deployment's replicas.
func scaledInCluster(b *testing.B, catalogTypes []*scheduling.InstanceType, n int, now time.Time) (*state.View, []*corev1.Pod) {
	b.Helper()
	// Nodes of at most 16 vCPUs, as many pools ask for: the cluster of 2,000
	// nodes then holds about 30,000 pods, the size the decision must handle.
	pool := schedulingtest.BenchPool()
	pool.Spec.Template.Spec.Requirements = append(pool.Spec.Template.Spec.Requirements, v1.NodePoolRequirement{Key: v1.LabelInstanceCPU,
		RequirementBody: v1.RequirementBody{Operator: v1.OpLt, Values: []string{"49"}}})
	pool.Spec.Disruption.ConsolidationPolicy = v1.ConsolidationPolicyWhenEmptyOrUnderutilized
	pool.Spec.Disruption.ConsolidateAfter = v1.MustParseNillableDuration("0s")
	pool.Spec.Disruption.Budgets = []v1.Budget{{Nodes: "10%"}}
	input := func(pods []*corev1.Pod) scheduling.Input {
		return scheduling.Input{Pods: pods, NodePools: []*v1.NodePool{pool}, InstanceTypes: map[string][]*scheduling.InstanceType{pool.Name: catalogTypes}}
	}
	count := 15 * n
	pods := schedulingtest.GenerateWorkload(count, benchZones, 42)
	planned := scheduling.Solve(input(pods))
	if len(planned.NodeClaims) != n {
		count = count * n / len(planned.NodeClaims)
		pods = schedulingtest.GenerateWorkload(count, benchZones, 42)
		planned = scheduling.Solve(input(pods))
	}
	if len(planned.Unschedulable) > 0 {
		b.Fatalf("%d pods unschedulable: %s", len(planned.Unschedulable), planned.Unschedulable[0].Reason)
	}
	controller := true
	var podList []corev1.Pod
	var nodes []corev1.Node
	var claims []v1.NodeClaim
	for i, nc := range planned.NodeClaims {
		name := fmt.Sprintf("node-%d", i)
		labels := nc.InstanceType.Requirements.Labels()
		for k, v := range map[string]string{v1.LabelNodePool: pool.Name, v1.LabelInstanceType: nc.InstanceType.Name, v1.LabelTopologyZone: nc.Offering.Zone,
			v1.LabelCapacityType: nc.Offering.CapacityType, v1.LabelHostname: name} {
			labels[k] = v
		}
		providerID := "kwok://" + name
		claims = append(claims, v1.NodeClaim{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, CreationTimestamp: metav1.NewTime(now.Add(-2 * time.Hour))},
			Status: v1.NodeClaimStatus{ProviderID: providerID, NodeName: name, Capacity: nc.InstanceType.Capacity.ToResourceList(), Allocatable: nc.InstanceType.Allocatable.ToResourceList(),
				Conditions: []metav1.Condition{{Type: v1.ConditionTypeInitialized, Status: metav1.ConditionTrue, LastTransitionTime: metav1.NewTime(now.Add(-time.Hour))}}},
		})
		nodes = append(nodes, corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}, Spec: corev1.NodeSpec{ProviderID: providerID},
			Status: corev1.NodeStatus{Capacity: nc.InstanceType.Capacity.ToResourceList(), Allocatable: nc.InstanceType.Allocatable.ToResourceList()}})
		for _, p := range nc.Pods {
			bound := *p.DeepCopy()
			bound.UID = types.UID(p.Name)
			bound.Spec.NodeName = name
			bound.Status.Phase = corev1.PodRunning
			bound.OwnerReferences = []metav1.OwnerReference{{Kind: "ReplicaSet", Name: p.Labels["app"], Controller: &controller}}
			podList = append(podList, bound)
		}
	}
	// Half of every deployment's replicas go, chosen at random.
	rng := rand.New(rand.NewPCG(7, 11))
	byApp := map[string][]int{}
	for i := range podList {
		byApp[podList[i].Labels["app"]] = append(byApp[podList[i].Labels["app"]], i)
	}
	gone := map[int]bool{}
	apps := make([]string, 0, len(byApp))
	for app := range byApp {
		apps = append(apps, app)
	}
	sort.Strings(apps)
	for _, app := range apps {
		idx := byApp[app]
		rng.Shuffle(len(idx), func(i, j int) { idx[i], idx[j] = idx[j], idx[i] })
		for _, i := range idx[:len(idx)/2] {
			gone[i] = true
		}
	}
	var kept []corev1.Pod
	var remaining []*corev1.Pod
	for i := range podList {
		if !gone[i] {
			kept = append(kept, podList[i])
		}
	}
	for i := range kept {
		remaining = append(remaining, &kept[i])
	}
	return state.NewView(kept, nodes, claims, []v1.NodePool{*pool}, nil, nil), remaining
}
