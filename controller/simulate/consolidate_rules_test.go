package simulate

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/controller/catalog"
	"github.com/dovetail-sh/dovetail/controller/scheduling"
)

// These tests write a cluster as `kubectl get ... -o yaml` would, read it as
// `dovetail simulate --consolidate` does, and check the report for the cases where
// Karpenter's consolidation rules decide (issue 29).

var westZones = []string{"us-west-2a", "us-west-2b", "us-west-2c"}

// snapshotCluster builds the objects of a cluster of one NodePool.
type snapshotCluster struct {
	t       *testing.T
	types   map[string]*scheduling.InstanceType
	pool    *v1.NodePool
	objects []runtime.Object
	nodes   int
	pods    int
}

func newSnapshotCluster(t *testing.T, cat *catalog.File, requirements ...v1.NodePoolRequirement) *snapshotCluster {
	pool := &v1.NodePool{TypeMeta: metav1.TypeMeta{APIVersion: "karpenter.sh/v1", Kind: "NodePool"}, ObjectMeta: metav1.ObjectMeta{Name: "default"}}
	pool.Spec.Template.Spec.NodeClassRef = &v1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "default"}
	pool.Spec.Template.Spec.Requirements = requirements
	pool.Spec.Disruption.ConsolidationPolicy = v1.ConsolidationPolicyWhenEmptyOrUnderutilized
	pool.Spec.Disruption.ConsolidateAfter = v1.MustParseNillableDuration("0s")
	pool.Spec.Disruption.Budgets = []v1.Budget{{Nodes: "100%"}}
	sc := &snapshotCluster{t: t, types: map[string]*scheduling.InstanceType{}, pool: pool, objects: []runtime.Object{pool}}
	for _, it := range cat.ForEngine(scheduling.DefaultAllocatableSettings()) {
		sc.types[it.Name] = it
	}
	return sc
}

// node adds a NodeClaim and its Node, initialized an hour before fakeNow.
func (sc *snapshotCluster) node(instanceType, zone, capacityType string) string {
	it, ok := sc.types[instanceType]
	if !ok {
		sc.t.Fatalf("no instance type %s in the catalog", instanceType)
	}
	sc.nodes++
	name := fmt.Sprintf("ip-10-0-0-%d.us-west-2.compute.internal", sc.nodes)
	providerID := fmt.Sprintf("aws:///%s/i-%017d", zone, sc.nodes)
	labels := map[string]string{v1.LabelNodePool: "default", v1.LabelInstanceType: instanceType, v1.LabelTopologyZone: zone, v1.LabelCapacityType: capacityType,
		v1.LabelHostname: name, v1.LabelArch: "amd64", v1.LabelOS: "linux", "karpenter.sh/initialized": "true", "karpenter.sh/registered": "true"}
	initialized := metav1.NewTime(fakeNow.Add(-time.Hour))
	claim := &v1.NodeClaim{TypeMeta: metav1.TypeMeta{APIVersion: "karpenter.sh/v1", Kind: "NodeClaim"},
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("default-%05d", sc.nodes), Labels: labels, CreationTimestamp: initialized},
		Spec:       v1.NodeClaimSpec{NodeClassRef: sc.pool.Spec.Template.Spec.NodeClassRef},
		Status: v1.NodeClaimStatus{ProviderID: providerID, NodeName: name, Capacity: it.Capacity.ToResourceList(), Allocatable: it.Allocatable.ToResourceList(),
			Conditions: []metav1.Condition{{Type: v1.ConditionTypeInitialized, Status: metav1.ConditionTrue, Reason: "Initialized", LastTransitionTime: initialized}}}}
	node := &corev1.Node{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Node"}, ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, CreationTimestamp: initialized},
		Spec:   corev1.NodeSpec{ProviderID: providerID},
		Status: corev1.NodeStatus{Capacity: it.Capacity.ToResourceList(), Allocatable: it.Allocatable.ToResourceList()}}
	sc.objects = append(sc.objects, claim, node)
	return name
}

// pod adds a running, Ready pod of a ReplicaSet bound to the node.
func (sc *snapshotCluster) pod(node, cpu, memory string, labels map[string]string) *corev1.Pod {
	sc.pods++
	controller := true
	p := &corev1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", labels["app"], sc.pods), Namespace: "shop", Labels: labels,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: labels["app"], UID: "rs-uid", Controller: &controller}}},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "app", Image: "app", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(memory)}}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}},
	}
	sc.objects = append(sc.objects, p)
	return p
}

// read writes the objects as one YAML stream and reads it back as simulate does.
func (sc *snapshotCluster) read() *Inputs {
	sc.t.Helper()
	var buf bytes.Buffer
	for _, o := range sc.objects {
		raw, err := yaml.Marshal(o)
		if err != nil {
			sc.t.Fatal(err)
		}
		buf.WriteString("---\n")
		buf.Write(raw)
	}
	in := &Inputs{}
	if err := in.Read(&buf, "cluster.yaml"); err != nil {
		sc.t.Fatal(err)
	}
	return in
}

func (sc *snapshotCluster) consolidate(types *catalog.File, spotToSpot bool) (*ConsolidationReport, string) {
	sc.t.Helper()
	r, err := Consolidate(sc.read(), types, defaults("SpotToSpotConsolidation="+fmt.Sprint(spotToSpot)), fakeNow)
	if err != nil {
		sc.t.Fatal(err)
	}
	var table bytes.Buffer
	if err := r.WriteTable(&table); err != nil {
		sc.t.Fatal(err)
	}
	return r, table.String()
}

func westCatalog(t *testing.T, zones ...string) *catalog.File {
	t.Helper()
	cat, err := catalog.EmbeddedAWS()
	if err != nil {
		t.Fatal(err)
	}
	return cat.InZones(zones)
}

func removedNodes(r *ConsolidationReport) []string {
	var out []string
	for _, n := range r.Remove {
		out = append(out, n.Node)
	}
	return out
}

var onDemandMAndC = v1.NodePoolRequirement{Key: v1.LabelInstanceType, RequirementBody: v1.RequirementBody{Operator: v1.OpIn,
	Values: []string{"m6i.large", "m6i.xlarge", "m6i.2xlarge", "m6i.4xlarge", "c6i.large", "c6i.xlarge", "c6i.2xlarge"}}}
var onlyM6i = v1.NodePoolRequirement{Key: v1.LabelInstanceType, RequirementBody: v1.RequirementBody{Operator: v1.OpIn,
	Values: []string{"m6i.large", "m6i.xlarge", "m6i.2xlarge", "m6i.4xlarge"}}}
var onDemandOnly = v1.NodePoolRequirement{Key: v1.LabelCapacityType, RequirementBody: v1.RequirementBody{Operator: v1.OpIn, Values: []string{v1.CapacityTypeOnDemand}}}

// Case 1: a pod with no controller does not keep its node; the report says it is
// evicted and not recreated.
func TestConsolidatePodWithoutAController(t *testing.T) {
	types := westCatalog(t, "us-west-2a")
	sc := newSnapshotCluster(t, types, onlyM6i, onDemandOnly)
	kept := sc.node("m6i.large", "us-west-2a", v1.CapacityTypeOnDemand)
	sc.pod(kept, "500m", "512Mi", map[string]string{"app": "web"})
	sc.pod(kept, "500m", "512Mi", map[string]string{"app": "web"})
	bare := sc.node("m6i.large", "us-west-2a", v1.CapacityTypeOnDemand)
	sc.pod(bare, "500m", "512Mi", map[string]string{"app": "debug"}).OwnerReferences = nil
	r, table := sc.consolidate(types, false)
	if got := removedNodes(r); len(got) != 1 || got[0] != bare {
		t.Fatalf("removes %v; want %s, whose pod has no controller and fits on %s\n%s", got, bare, kept, table)
	}
	if len(r.PodsMoved) != 1 || !r.PodsMoved[0].NotRecreated || r.PodsMoved[0].To != kept || r.Summary.PodsNotRecreated != 1 {
		t.Errorf("pods moved %+v, %d not recreated; want shop/debug-3 marked not recreated", r.PodsMoved, r.Summary.PodsNotRecreated)
	}
	for _, want := range []string{"not recreated  1 evicted pod(s) have no controller", "NOT RECREATED (evicted, no controller)", "shop/debug-3  " + bare + "  now: Underutilized/single"} {
		if !strings.Contains(table, want) {
			t.Errorf("the table lacks %q:\n%s", want, table)
		}
	}
	if !strings.Contains(strings.Join(r.Warnings, "\n"), "1 pod(s) on removed nodes have no controller") {
		t.Errorf("no warning about the pod: %v", r.Warnings)
	}
}

// Case 2: a PDB allowing no disruption, with unhealthyPodEvictionPolicy
// AlwaysAllow, does not hold its pods that are not Ready.
func TestConsolidateUnhealthyPodEvictionPolicy(t *testing.T) {
	types := westCatalog(t, "us-west-2a")
	for _, policy := range []policyv1.UnhealthyPodEvictionPolicyType{policyv1.AlwaysAllow, policyv1.IfHealthyBudget} {
		t.Run(string(policy), func(t *testing.T) {
			sc := newSnapshotCluster(t, types, onlyM6i, onDemandOnly)
			room := sc.node("m6i.large", "us-west-2a", v1.CapacityTypeOnDemand)
			sc.pod(room, "500m", "512Mi", map[string]string{"app": "web"})
			sc.pod(room, "500m", "512Mi", map[string]string{"app": "web"})
			guarded := sc.node("m6i.large", "us-west-2a", v1.CapacityTypeOnDemand)
			sc.pod(guarded, "500m", "512Mi", map[string]string{"app": "ledger"}).Status.Conditions[0].Status = corev1.ConditionFalse
			sc.objects = append(sc.objects, &policyv1.PodDisruptionBudget{TypeMeta: metav1.TypeMeta{APIVersion: "policy/v1", Kind: "PodDisruptionBudget"},
				ObjectMeta: metav1.ObjectMeta{Name: "ledger", Namespace: "shop"},
				Spec:       policyv1.PodDisruptionBudgetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "ledger"}}, UnhealthyPodEvictionPolicy: &policy},
				Status:     policyv1.PodDisruptionBudgetStatus{DisruptionsAllowed: 0, CurrentHealthy: 0, DesiredHealthy: 1, ExpectedPods: 1}})
			r, table := sc.consolidate(types, false)
			if policy == policyv1.AlwaysAllow {
				if got := removedNodes(r); len(got) != 1 || got[0] != guarded {
					t.Errorf("removes %v; want %s, whose pod is not Ready\n%s", got, guarded, table)
				}
				return
			}
			if keptReasons(r)[guarded] != "pdb shop/ledger prevents evicting pod ledger-3" {
				t.Errorf("removes %v, %s kept because %q; want it held by the PDB\n%s", removedNodes(r), guarded, keptReasons(r)[guarded], table)
			}
		})
	}
}

// Case 3: one dear node and two right-sized cheap ones, their pods spread over
// three zones: only the dear node is replaced, by one node.
func TestConsolidateReplacesOnlyTheDearNode(t *testing.T) {
	types := westCatalog(t, westZones...)
	sc := newSnapshotCluster(t, types, onDemandMAndC, onDemandOnly)
	spread := []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: v1.LabelTopologyZone, WhenUnsatisfiable: corev1.DoNotSchedule,
		LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}}
	dear := sc.node("m6i.4xlarge", "us-west-2a", v1.CapacityTypeOnDemand)
	var pods []*corev1.Pod
	pods = append(pods, sc.pod(dear, "1", "2Gi", map[string]string{"app": "web"}), sc.pod(dear, "1", "2Gi", map[string]string{"app": "web"}))
	for _, zone := range westZones[1:] {
		pods = append(pods, sc.pod(sc.node("m6i.large", zone, v1.CapacityTypeOnDemand), "1", "6Gi", map[string]string{"app": "web"}))
	}
	for _, p := range pods {
		p.Spec.TopologySpreadConstraints = spread
	}
	r, table := sc.consolidate(types, false)
	if got := removedNodes(r); len(got) != 1 || got[0] != dear || len(r.Launch) != 1 || r.Launch[0].InstanceType != "c6i.xlarge" {
		t.Errorf("removes %v, launches %+v; want only %s replaced by a c6i.xlarge\n%s", got, r.Launch, dear, table)
	}
}

// Case 4: a spot node is replaced only spot-to-spot, behind the gate, with at
// least 15 cheaper types; without the gate it stays.
func TestConsolidateSpotNode(t *testing.T) {
	types := westCatalog(t, "us-west-2a")
	spot := v1.NodePoolRequirement{Key: v1.LabelCapacityType, RequirementBody: v1.RequirementBody{Operator: v1.OpIn, Values: []string{v1.CapacityTypeSpot, v1.CapacityTypeOnDemand}}}
	sc := newSnapshotCluster(t, types, spot)
	node := sc.node("m6i.4xlarge", "us-west-2a", v1.CapacityTypeSpot)
	sc.pod(node, "1", "2Gi", map[string]string{"app": "web"})
	r, table := sc.consolidate(types, false)
	if len(r.Remove) != 0 || len(r.Launch) != 0 {
		t.Errorf("spot-to-spot off: removes %v, launches %+v; want the spot node kept\n%s", removedNodes(r), r.Launch, table)
	}
	r, table = sc.consolidate(types, true)
	if len(r.Remove) != 1 || len(r.Launch) != 1 || r.Launch[0].CapacityType != v1.CapacityTypeSpot || r.Launch[0].InstanceTypeOptions != 15 {
		t.Errorf("spot-to-spot on: removes %v, launches %+v; want one spot node from the 15 cheapest types\n%s", removedNodes(r), r.Launch, table)
	}
}

// Case 5: a node whose only pod is a terminating StatefulSet pod is not empty:
// the pod moves to room elsewhere, in a consolidation batch.
func TestConsolidateTerminatingStatefulSetPod(t *testing.T) {
	types := westCatalog(t, "us-west-2a")
	sc := newSnapshotCluster(t, types, onlyM6i, onDemandOnly)
	room := sc.node("m6i.large", "us-west-2a", v1.CapacityTypeOnDemand)
	sc.pod(room, "500m", "512Mi", map[string]string{"app": "web"})
	sc.pod(room, "500m", "512Mi", map[string]string{"app": "web"})
	leaving := sc.node("m6i.large", "us-west-2a", v1.CapacityTypeOnDemand)
	db := sc.pod(leaving, "500m", "512Mi", map[string]string{"app": "db"})
	db.Name = "db-0"
	db.OwnerReferences[0].Kind, db.OwnerReferences[0].Name = "StatefulSet", "db"
	db.DeletionTimestamp = &metav1.Time{Time: fakeNow.Add(-5 * time.Second)}
	r, table := sc.consolidate(types, false)
	if len(r.Remove) != 1 || r.Remove[0].Node != leaving || r.Remove[0].Batch != "Underutilized/single" || len(r.Remove[0].Pods) != 1 {
		t.Fatalf("removes %+v; want %s in an Underutilized batch, with db-0 to move\n%s", r.Remove, leaving, table)
	}
	if len(r.PodsMoved) != 1 || r.PodsMoved[0].Pod != "shop/db-0" || r.PodsMoved[0].To != room {
		t.Errorf("pods moved %+v; want shop/db-0's successor to go to %s", r.PodsMoved, room)
	}
}

// consolidationPolicy Balanced: a marginal replace is rejected and the report says
// by what score; an oversized node goes.
func TestConsolidateBalancedPool(t *testing.T) {
	types := westCatalog(t, "us-west-2a")
	sc := newSnapshotCluster(t, types, onlyM6i, onDemandOnly)
	sc.pool.Spec.Disruption.ConsolidationPolicy = v1.ConsolidationPolicyBalanced
	for i := 0; i < 4; i++ {
		busy := sc.node("m6i.2xlarge", "us-west-2a", v1.CapacityTypeOnDemand)
		for j := 0; j < 7; j++ {
			sc.pod(busy, "1100m", "1Gi", map[string]string{"app": "api"})
		}
	}
	marginal := sc.node("m6i.xlarge", "us-west-2a", v1.CapacityTypeOnDemand)
	for j := 0; j < 8; j++ {
		sc.pod(marginal, "200m", "256Mi", map[string]string{"app": "worker"})
	}
	oversized := sc.node("m6i.2xlarge", "us-west-2a", v1.CapacityTypeOnDemand)
	sc.pod(oversized, "500m", "512Mi", map[string]string{"app": "web"})
	sc.pod(oversized, "500m", "512Mi", map[string]string{"app": "web"})
	r, table := sc.consolidate(types, false)
	if got := removedNodes(r); len(got) != 1 || got[0] != oversized {
		t.Fatalf("removes %v; want only %s\n%s", got, oversized, table)
	}
	if why := keptReasons(r)[marginal]; !strings.Contains(why, "consolidationPolicy Balanced") || !strings.Contains(why, "< threshold 0.50") {
		t.Errorf("%s kept because %q; want its Balanced score\n%s", marginal, why, table)
	}
	var approved, rejected int
	for _, s := range r.Scores {
		switch {
		case s.Approved && s.Nodes[0] == oversized && s.Score >= 0.5:
			approved++
		case !s.Approved && s.Nodes[0] == marginal && s.Score < 0.5:
			rejected++
		default:
			t.Errorf("unexpected score %+v", s)
		}
	}
	if approved != 1 || rejected != 1 {
		t.Errorf("scores %+v; want the oversized node's approved and the marginal one's rejected", r.Scores)
	}
	for _, want := range []string{"BALANCED SCORES (approved at 0.50 and above)", "approved", "rejected"} {
		if !strings.Contains(table, want) {
			t.Errorf("the table lacks %q:\n%s", want, table)
		}
	}
}
