package consolidation

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
)

// suiteCase is one behaviour Karpenter's disruption suite (kubernetes-sigs/karpenter
// pkg/controllers/disruption/*_test.go) checks, as our own scenario.
type suiteCase struct {
	// area is the suite's context: Emptiness, Delete, Replace, Multi-NodeClaim,
	// Budgets, Topology, PDB, do-not-disrupt.
	area, name string
	// differs says where Dovetail differs from Karpenter on purpose, and why;
	// docs/controller.md lists the same. "" when the outcome is Karpenter's.
	differs string
	budget  string
	build   func(tc *testCluster)
	check   func(t *testing.T, plan *Plan, cl *Cluster)
}

// Helpers of the scenarios.

func removes(want ...string) func(*testing.T, *Plan, *Cluster) {
	return func(t *testing.T, plan *Plan, _ *Cluster) {
		t.Helper()
		got := names(plan.Remove)
		if strings.Join(got, ",") != strings.Join(want, ",") {
			t.Errorf("removes %v, launches %s; want %v", got, typeNames(plan.Replacements), want)
		}
	}
}

func keeps(node, reason string) func(*testing.T, *Plan, *Cluster) {
	return func(t *testing.T, plan *Plan, _ *Cluster) {
		t.Helper()
		for _, c := range plan.Remove {
			if c.Node.Name == node {
				t.Errorf("%s is removed; want it kept because %q", node, reason)
			}
		}
		for _, b := range plan.Blocked {
			if b.Candidate.Node.Name == node {
				if !strings.Contains(b.Reason, reason) {
					t.Errorf("%s kept because %q; want %q", node, b.Reason, reason)
				}
				return
			}
		}
		t.Errorf("%s is not reported kept; want %q", node, reason)
	}
}

// held checks that the node is in the target but held back now, for reason.
func held(node, reason string) func(*testing.T, *Plan, *Cluster) {
	return func(t *testing.T, plan *Plan, _ *Cluster) {
		t.Helper()
		for _, b := range plan.Batches {
			for _, c := range b.Candidates {
				if c.Node.Name == node {
					t.Errorf("%s starts now in %s/%s; want it held because %q", node, b.Reason, b.Type, reason)
				}
			}
		}
		for _, b := range plan.Blocked {
			if b.Candidate.Node.Name == node && strings.Contains(b.Reason, reason) {
				return
			}
		}
		t.Errorf("%s is not reported held because %q: %v", node, reason, plan.Blocked)
	}
}

func all(checks ...func(*testing.T, *Plan, *Cluster)) func(*testing.T, *Plan, *Cluster) {
	return func(t *testing.T, plan *Plan, cl *Cluster) {
		t.Helper()
		for _, c := range checks {
			c(t, plan, cl)
		}
	}
}

func batchOf(reason v1.DisruptionReason, kind string, nodes int) func(*testing.T, *Plan, *Cluster) {
	return func(t *testing.T, plan *Plan, _ *Cluster) {
		t.Helper()
		for _, b := range plan.Batches {
			if b.Reason == reason && b.Type == kind {
				if len(b.Candidates) != nodes {
					t.Errorf("the %s/%s batch takes %v; want %d node(s)", reason, kind, names(b.Candidates), nodes)
				}
				return
			}
		}
		t.Errorf("batches %v; want a %s/%s batch of %d node(s)", plan.Batches, reason, kind, nodes)
	}
}

func launches(n int) func(*testing.T, *Plan, *Cluster) {
	return func(t *testing.T, plan *Plan, _ *Cluster) {
		t.Helper()
		if len(plan.Replacements) != n {
			t.Errorf("launches %s; want %d node(s)", typeNames(plan.Replacements), n)
		}
	}
}

func daemonSetPod(tc *testCluster, node string, annotations map[string]string) {
	p := tc.addPod(node, "100m", "64Mi", map[string]string{"app": "agent"})
	p.OwnerReferences[0].Kind, p.OwnerReferences[0].Name = "DaemonSet", "agent"
	p.Annotations = annotations
}

func guardingPDB(tc *testCluster, app string, allowed int32) *policyv1.PodDisruptionBudget {
	tc.pdbs = append(tc.pdbs, policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: app, Namespace: "default"},
		Spec:   policyv1.PodDisruptionBudgetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}},
		Status: policyv1.PodDisruptionBudgetStatus{DisruptionsAllowed: allowed}})
	return &tc.pdbs[len(tc.pdbs)-1]
}

// TestKarpenterDisruptionSuite holds Dovetail's consolidation to the behaviours
// Karpenter's disruption suite checks. Each case is a cluster of our test types
// (m.large 2 cpu $0.10, m.xlarge 4 cpu $0.20, m.2xlarge 8 cpu $0.40, one zone,
// on-demand) unless it says otherwise, consolidateAfter 0s, and the decision's
// outcome. The metrics cases are in the disruption controller's tests
// (TestDecisionMetrics), and spot-to-spot in TestSpotNodeReplacementRules.
func TestKarpenterDisruptionSuite(t *testing.T) {
	cases := []suiteCase{
		// Emptiness.
		{area: "Emptiness", name: "can delete empty nodes",
			build: func(tc *testCluster) { tc.addNode("m.xlarge", 0, "") },
			check: all(removes("node-0"), batchOf(v1.DisruptionReasonEmpty, TypeEmpty, 1))},
		{area: "Emptiness", name: "can delete multiple empty nodes",
			build: func(tc *testCluster) {
				for i := 0; i < 3; i++ {
					tc.addNode("m.xlarge", 0, "")
				}
			},
			check: batchOf(v1.DisruptionReasonEmpty, TypeEmpty, 3)},
		{area: "Emptiness", name: "will consider a node with a DaemonSet pod as empty",
			build: func(tc *testCluster) { daemonSetPod(tc, tc.addNode("m.xlarge", 0, "").Name, nil) },
			check: batchOf(v1.DisruptionReasonEmpty, TypeEmpty, 1)},
		{area: "Emptiness", name: "will consider a node with terminating Deployment pods as empty",
			build: func(tc *testCluster) {
				tc.addNode("m.xlarge", 1, "1")
				tc.pods[0].DeletionTimestamp = &metav1.Time{Time: testNow}
			},
			check: batchOf(v1.DisruptionReasonEmpty, TypeEmpty, 1)},
		{area: "Emptiness", name: "will not consider a node with a terminating StatefulSet pod as empty",
			build: func(tc *testCluster) {
				tc.addNode("m.large", 1, "1")
				tc.pods[0].OwnerReferences[0].Kind = "StatefulSet"
				tc.pods[0].DeletionTimestamp = &metav1.Time{Time: testNow}
			},
			check: keeps("node-0", "no cheaper fit")},
		{area: "Emptiness", name: "should ignore nodes with the karpenter.sh/do-not-disrupt annotation",
			build: func(tc *testCluster) {
				tc.addNode("m.xlarge", 0, "").Annotations = map[string]string{v1.DoNotDisruptAnnotationKey: "true"}
			},
			check: keeps("node-0", "node has the karpenter.sh/do-not-disrupt annotation")},
		{area: "Emptiness", name: "should delete nodes with the karpenter.sh/do-not-disrupt annotation set to false",
			build: func(tc *testCluster) {
				tc.addNode("m.xlarge", 0, "").Annotations = map[string]string{v1.DoNotDisruptAnnotationKey: "false"}
			},
			check: removes("node-0")},
		{area: "Emptiness", name: "should wait for consolidateAfter for empty nodes before consolidating",
			differs: "Karpenter waits for a Consolidatable condition its own controller sets; Dovetail reads consolidateAfter from the claim's times (status.lastPodEventTime, initialization), so a cluster taken over from Karpenter needs no condition of ours",
			build: func(tc *testCluster) {
				tc.pool.Spec.Disruption.ConsolidateAfter = v1.MustParseNillableDuration("30m")
				tc.addNode("m.xlarge", 0, "")
				tc.claims[0].Status.LastPodEventTime = metav1.NewTime(testNow.Add(-10 * time.Minute))
			},
			check: keeps("node-0", "consolidateAfter has not passed since its last pod change (until 2026-11-23T12:20:00Z)")},
		{area: "Emptiness", name: "WhenEmpty ignores nodes that have pods",
			build: func(tc *testCluster) {
				tc.pool.Spec.Disruption.ConsolidationPolicy = v1.ConsolidationPolicyWhenEmpty
				tc.addNode("m.2xlarge", 1, "500m")
				tc.addNode("m.xlarge", 0, "")
			},
			check: all(removes("node-1"), keeps("node-0", "consolidates only empty nodes (WhenEmpty)"))},
		{area: "Emptiness", name: "consolidateAfter Never keeps even empty nodes",
			build: func(tc *testCluster) {
				tc.pool.Spec.Disruption.ConsolidateAfter = v1.MustParseNillableDuration("Never")
				tc.addNode("m.xlarge", 0, "")
			},
			check: keeps("node-0", "consolidateAfter: Never")},

		// Consolidation: Delete.
		{area: "Delete", name: "can delete nodes",
			build: func(tc *testCluster) {
				tc.addNode("m.xlarge", 2, "1")
				tc.addNode("m.xlarge", 1, "1")
			},
			check: all(removes("node-1"), launches(0), batchOf(v1.DisruptionReasonUnderutilized, TypeSingle, 1))},
		{area: "Delete", name: "can delete nodes, when capacity no NodePool manages can fit pods",
			build: func(tc *testCluster) {
				tc.addNode("m.xlarge", 1, "1")
				tc.addNodeIn("m.xlarge", "a", v1.CapacityTypeOnDemand)
				// The second node's claim is not ours: a node group's node.
				tc.claims = tc.claims[:1]
			},
			check: all(removes("node-0"), launches(0))},
		{area: "Delete", name: "can delete nodes, evicts pods without an ownerRef",
			build: func(tc *testCluster) {
				tc.addNode("m.xlarge", 2, "1")
				tc.addNode("m.xlarge", 1, "1")
				tc.pods[2].OwnerReferences = nil
			},
			check: all(removes("node-1"), func(t *testing.T, plan *Plan, _ *Cluster) {
				if len(plan.Moves) != 1 || !plan.Moves[0].NotRecreated {
					t.Errorf("moves %+v; want the ownerless pod marked not recreated", plan.Moves)
				}
			})},
		{area: "Delete", name: "won't delete nodes if it would make a non-pending pod go pending",
			build: func(tc *testCluster) {
				tc.addNode("m.large", 1, "1500m")
				tc.addNode("m.large", 1, "1500m")
			},
			check: all(removes(), keeps("node-0", "no cheaper fit"), keeps("node-1", "no cheaper fit"))},
		{area: "Delete", name: "can delete nodes with a permanently pending pod",
			build: func(tc *testCluster) {
				tc.addNode("m.xlarge", 0, "")
				huge := tc.addPod("", "64", "1Gi", map[string]string{"app": "huge"})
				huge.Status.Phase = corev1.PodPending
			},
			check: all(removes("node-0"), func(t *testing.T, _ *Plan, cl *Cluster) {
				if n := cl.PlaceablePending(); n != 0 {
					t.Errorf("%d placeable pending pods; the 64-cpu pod fits no type", n)
				}
			})},
		{area: "Delete", name: "considers pending pods when consolidating",
			differs: "Karpenter plans the pending pods with the candidates' pods; Dovetail starts no disruption while pending pods the cluster or its pools can place wait (the provisioner places them first), and the controller's gate is TestUnplaceablePendingPodDoesNotBlockConsolidation's pair",
			build: func(tc *testCluster) {
				tc.addNode("m.xlarge", 0, "")
				tc.addPod("", "1", "1Gi", map[string]string{"app": "new"}).Status.Phase = corev1.PodPending
			},
			check: func(t *testing.T, _ *Plan, cl *Cluster) {
				if n := cl.PlaceablePending(); n != 1 {
					t.Errorf("%d placeable pending pods, want 1: the controller holds disruption for it", n)
				}
			}},
		{area: "Delete", name: "won't delete node if it would require pods to schedule on an uninitialized node",
			differs: "Karpenter refuses the move; Dovetail plans it and the batch waits until the node initializes (Batch.Awaits), so a node launched for pods that are coming is used as soon as it is ready",
			build: func(tc *testCluster) {
				tc.addNode("m.xlarge", 1, "1")
				tc.addNodeIn("m.xlarge", "a", v1.CapacityTypeOnDemand)
				tc.claims[1].Status.Conditions = nil
			},
			check: func(t *testing.T, plan *Plan, _ *Cluster) {
				if len(plan.Batches) != 1 || strings.Join(plan.Batches[0].Awaits, ",") != "node-1" {
					t.Errorf("batches %v; want node-0's batch waiting for node-1 to initialize", plan.Batches)
				}
			}},

		// Consolidation: Replace.
		{area: "Replace", name: "can replace node with a cheaper one",
			build: func(tc *testCluster) { tc.addNode("m.2xlarge", 2, "500m") },
			check: all(removes("node-0"), launches(1), func(t *testing.T, plan *Plan, _ *Cluster) {
				if len(plan.Replacements) == 1 && plan.Replacements[0].InstanceType.Name != "m.large" {
					t.Errorf("replaced by %s, want m.large", plan.Replacements[0].InstanceType.Name)
				}
			})},
		{area: "Replace", name: "won't replace on-demand node if on-demand replacement is more expensive",
			build: func(tc *testCluster) { tc.addNode("m.large", 1, "1500m") },
			check: all(removes(), keeps("node-0", "no cheaper fit"))},
		{area: "Replace", name: "cannot replace spot with spot if the spotToSpotConsolidation is disabled",
			build: func(tc *testCluster) {
				tc.types = spotTypes(20)
				tc.addPod(tc.addNodeIn("big", "a", v1.CapacityTypeSpot).Name, "1", "1Gi", map[string]string{"app": "web"})
			},
			check: all(removes(), keeps("node-0", "no cheaper fit"))},

		// Consolidation: Multi-NodeClaim.
		{area: "Multi-NodeClaim", name: "can merge 3 nodes into 1",
			build: func(tc *testCluster) {
				for i := 0; i < 3; i++ {
					tc.addNode("m.xlarge", 1, "1")
				}
			},
			check: func(t *testing.T, plan *Plan, _ *Cluster) {
				if after := 0.6 - plan.Savings(); after > 0.2+1e-9 || len(plan.Replacements) > 1 {
					t.Errorf("removes %v, launches %s, leaving $%.2f/h; want one 4-cpu node's $0.20/h", names(plan.Remove), typeNames(plan.Replacements), after)
				}
			}},

		// Budgets.
		{area: "Budgets", name: "should only allow 3 empty nodes to be disrupted", budget: "3",
			build: func(tc *testCluster) {
				for i := 0; i < 10; i++ {
					tc.addNode("m.xlarge", 0, "")
				}
			},
			check: batchOf(v1.DisruptionReasonEmpty, TypeEmpty, 3)},
		{area: "Budgets", name: "should allow no empty nodes to be disrupted", budget: "0",
			build: func(tc *testCluster) { tc.addNode("m.xlarge", 0, "") },
			check: all(func(t *testing.T, plan *Plan, _ *Cluster) {
				if len(plan.Batches) != 0 {
					t.Errorf("batches %v under a budget of 0", plan.Batches)
				}
			}, held("node-0", "budget: nodepool default allows 0 more node(s) disrupted for Empty now"))},
		{area: "Budgets", name: "should only allow 3 nodes to be deleted in multi node consolidation delete", budget: "3",
			build: func(tc *testCluster) {
				tc.addNode("m.2xlarge", 0, "")
				for i := 0; i < 6; i++ {
					tc.addNode("m.large", 1, "250m")
				}
				// The big node is not empty: it has room for the others' pods.
				tc.addPod("node-0", "4", "1Gi", map[string]string{"app": "big"})
			},
			check: batchOf(v1.DisruptionReasonUnderutilized, TypeMulti, 3)},
		{area: "Budgets", name: "a budget for one reason leaves the others",
			build: func(tc *testCluster) {
				tc.pool.Spec.Disruption.Budgets = []v1.Budget{{Nodes: "0", Reasons: []v1.DisruptionReason{v1.DisruptionReasonEmpty}}}
				tc.addNode("m.xlarge", 0, "")
				tc.addNode("m.xlarge", 2, "1")
				tc.addNode("m.xlarge", 1, "1")
			},
			check: all(held("node-0", "allows 0 more node(s) disrupted for Empty"), batchOf(v1.DisruptionReasonUnderutilized, TypeSingle, 1))},

		// Topology.
		{area: "Topology", name: "can replace node maintaining zonal topology spread",
			build: func(tc *testCluster) {
				tc.types = onDemandTypes(t)
				for _, zone := range threeZones {
					tc.addPod(tc.addNodeIn("m6i.2xlarge", zone, v1.CapacityTypeOnDemand).Name, "1", "2Gi", map[string]string{"app": "web"})
				}
				for i := range tc.pods {
					tc.pods[i].Spec.TopologySpreadConstraints = zoneSpreadOfWeb
				}
			},
			check: func(t *testing.T, plan *Plan, _ *Cluster) {
				zones := map[string]int{}
				for _, r := range plan.Replacements {
					zones[r.Requirements.Get(v1.LabelTopologyZone).Values()[0]] += len(r.Pods)
				}
				if len(plan.Remove) != 3 || len(zones) != 3 {
					t.Errorf("removes %v, replacements' pods by zone %v; want each node replaced in its zone", names(plan.Remove), zones)
				}
			}},
		{area: "Topology", name: "won't delete node if it would violate pod anti-affinity",
			build: func(tc *testCluster) {
				tc.addNode("m.large", 1, "500m")
				tc.addNode("m.large", 1, "500m")
				for i := range tc.pods {
					tc.pods[i].Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
						TopologyKey: v1.LabelHostname, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}}}}
				}
			},
			check: all(removes(), keeps("node-0", "no cheaper fit"), keeps("node-1", "no cheaper fit"))},

		// PodDisruptionBudgets.
		{area: "PDB", name: "can delete nodes, considers PDB",
			build: func(tc *testCluster) {
				tc.addNode("m.xlarge", 2, "1")
				tc.addNode("m.xlarge", 1, "1")
				tc.pods[2].Labels = map[string]string{"app": "guarded"}
				guardingPDB(tc, "guarded", 0)
			},
			check: all(removes("node-0"), keeps("node-1", "pdb default/guarded prevents evicting pod"))},
		{area: "PDB", name: "should not consider candidates that have multiple PDBs on the same pod",
			build: func(tc *testCluster) {
				tc.addNode("m.xlarge", 2, "1")
				tc.addNode("m.xlarge", 1, "1")
				guardingPDB(tc, "web", 5)
				guardingPDB(tc, "web", 5).Name = "web-too"
			},
			check: keeps("node-1", "is selected by 2 PodDisruptionBudgets")},
		{area: "PDB", name: "should not consider candidates that have fully blocking PDBs on daemonset pods",
			build: func(tc *testCluster) {
				daemonSetPod(tc, tc.addNode("m.xlarge", 0, "").Name, nil)
				guardingPDB(tc, "agent", 0)
			},
			check: keeps("node-0", "pdb default/agent prevents evicting pod")},
		{area: "PDB", name: "should consider candidates that have fully blocking PDBs on terminating pods",
			build: func(tc *testCluster) {
				tc.addNode("m.xlarge", 1, "1")
				tc.pods[0].DeletionTimestamp = &metav1.Time{Time: testNow}
				guardingPDB(tc, "web", 0)
			},
			check: removes("node-0")},
		{area: "PDB", name: "unhealthyPodEvictionPolicy AlwaysAllow lets pods that are not Ready go",
			build: func(tc *testCluster) {
				tc.addNode("m.xlarge", 2, "1")
				tc.addNode("m.xlarge", 1, "1")
				tc.pods[2].Labels = map[string]string{"app": "guarded"}
				tc.pods[2].Status.Conditions = nil
				always := policyv1.AlwaysAllow
				guardingPDB(tc, "guarded", 0).Spec.UnhealthyPodEvictionPolicy = &always
			},
			check: removes("node-1")},

		// do-not-disrupt.
		{area: "do-not-disrupt", name: "can delete nodes, considers karpenter.sh/do-not-disrupt set to true on pods",
			build: func(tc *testCluster) {
				tc.addNode("m.xlarge", 2, "1")
				tc.addNode("m.xlarge", 1, "1")
				tc.pods[2].Annotations = map[string]string{v1.DoNotDisruptAnnotationKey: "true"}
			},
			check: all(removes("node-0"), keeps("node-1", "has the karpenter.sh/do-not-disrupt annotation"))},
		{area: "do-not-disrupt", name: "does not consolidate nodes with pods that have a duration-based do-not-disrupt annotation that is still active",
			build: func(tc *testCluster) {
				tc.addNode("m.xlarge", 2, "1")
				tc.addNode("m.xlarge", 1, "1")
				tc.pods[2].Annotations = map[string]string{v1.DoNotDisruptAnnotationKey: "1h"}
				tc.pods[2].Status.StartTime = &metav1.Time{Time: testNow.Add(-30 * time.Minute)}
			},
			check: keeps("node-1", "until 2026-11-23T12:30:00Z")},
		{area: "do-not-disrupt", name: "can consolidate nodes after duration-based do-not-disrupt annotation expires",
			build: func(tc *testCluster) {
				tc.addNode("m.xlarge", 2, "1")
				tc.addNode("m.xlarge", 1, "1")
				tc.pods[2].Annotations = map[string]string{v1.DoNotDisruptAnnotationKey: "1h"}
				tc.pods[2].Status.StartTime = &metav1.Time{Time: testNow.Add(-2 * time.Hour)}
			},
			check: removes("node-1")},
		{area: "do-not-disrupt", name: "can delete nodes, considers invalid do-not-disrupt annotation format as not blocking",
			build: func(tc *testCluster) {
				tc.addNode("m.xlarge", 2, "1")
				tc.addNode("m.xlarge", 1, "1")
				tc.pods[2].Annotations = map[string]string{v1.DoNotDisruptAnnotationKey: "tomorrow"}
			},
			check: removes("node-1")},
		{area: "do-not-disrupt", name: "should not consider candidates that have do-not-disrupt daemonset pods scheduled",
			build: func(tc *testCluster) {
				daemonSetPod(tc, tc.addNode("m.xlarge", 0, "").Name, map[string]string{v1.DoNotDisruptAnnotationKey: "true"})
			},
			check: keeps("node-0", "pod default/node-0-pod-0 has the karpenter.sh/do-not-disrupt annotation")},
		{area: "do-not-disrupt", name: "should consider candidates that have do-not-disrupt terminating pods",
			build: func(tc *testCluster) {
				tc.addNode("m.xlarge", 1, "1")
				tc.pods[0].Annotations = map[string]string{v1.DoNotDisruptAnnotationKey: "true"}
				tc.pods[0].DeletionTimestamp = &metav1.Time{Time: testNow}
			},
			check: removes("node-0")},
	}
	for _, sc := range cases {
		t.Run(sc.area+"/"+sc.name, func(t *testing.T) {
			if sc.differs != "" {
				t.Log("differs from Karpenter on purpose: " + sc.differs)
			}
			budget := sc.budget
			if budget == "" {
				budget = "100%"
			}
			tc := newTestCluster(budget)
			sc.build(tc)
			plan, cl := tc.decide(t)
			mustPlaceEveryPod(t, plan)
			sc.check(t, plan, cl)
		})
	}
}
