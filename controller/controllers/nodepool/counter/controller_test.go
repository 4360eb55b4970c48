package counter

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	fakeclient "sigs.k8s.io/controller-runtime/pkg/client/fake"

	awsv1 "github.com/dovetail-sh/dovetail/controller/apis/aws/v1"
	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
)

var start = time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)

func setup(t *testing.T, objs ...client.Object) (client.Client, *Controller) {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := v1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := awsv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := corev1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	kube := fakeclient.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).WithStatusSubresource(&v1.NodePool{}, &v1.NodeClaim{}, &awsv1.EC2NodeClass{}).Build()
	return kube, NewController(kube, clocktesting.NewFakeClock(start), nil)
}

func pool(name, class string) *v1.NodePool {
	np := &v1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: name}}
	np.Spec.Template.Spec.NodeClassRef = &v1.NodeClassReference{Group: awsv1.Group, Kind: "EC2NodeClass", Name: class}
	np.Spec.Template.Spec.Requirements = []v1.NodePoolRequirement{{Key: v1.LabelCapacityType, RequirementBody: v1.RequirementBody{Operator: v1.OpIn, Values: []string{v1.CapacityTypeOnDemand}}}}
	return np
}

func readyClass(name string) *awsv1.EC2NodeClass {
	nc := &awsv1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: name}}
	nc.Status.Conditions = []metav1.Condition{{Type: awsv1.ConditionTypeReady, Status: metav1.ConditionTrue, Reason: "Ready", LastTransitionTime: metav1.NewTime(start)}}
	return nc
}

// launched is a claim of the pool whose instance has cpu and memory.
func launched(name, pool, cpu, memory string, mutate ...func(*v1.NodeClaim)) *v1.NodeClaim {
	nc := &v1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{v1.LabelNodePool: pool}}}
	nc.Status.ProviderID = "fake:///" + name
	nc.Status.Capacity = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(memory), corev1.ResourcePods: resource.MustParse("29")}
	for _, m := range mutate {
		m(nc)
	}
	return nc
}

func deleting(nc *v1.NodeClaim) {
	nc.DeletionTimestamp = &metav1.Time{Time: start}
	nc.Finalizers = []string{v1.TerminationFinalizer}
}

func reconcilePool(t *testing.T, kube client.Client, c *Controller, name string) *v1.NodePool {
	t.Helper()
	np := &v1.NodePool{}
	if err := kube.Get(context.Background(), client.ObjectKey{Name: name}, np); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Reconcile(context.Background(), np); err != nil {
		t.Fatal(err)
	}
	if err := kube.Get(context.Background(), client.ObjectKey{Name: name}, np); err != nil {
		t.Fatal(err)
	}
	return np
}

func quantity(rl corev1.ResourceList, name corev1.ResourceName) string {
	q := rl[name]
	return q.String()
}

// Every claim of the pool holds against its limits: a deleting one still runs its
// instance, and one not launched yet will have at least what it asked for.
func TestUsageCountsEveryClaimOfThePool(t *testing.T) {
	unlaunched := &v1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "default-c", Labels: map[string]string{v1.LabelNodePool: "default"}},
		Spec: v1.NodeClaimSpec{Resources: v1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("3"), corev1.ResourceMemory: resource.MustParse("1Gi")}}}}
	kube, c := setup(t, readyClass("default"), pool("default", "default"),
		launched("default-a", "default", "2", "8Gi"),
		launched("default-b", "default", "4", "16Gi", deleting),
		unlaunched,
		launched("other-a", "other", "64", "256Gi"))
	np := reconcilePool(t, kube, c, "default")
	for name, want := range map[corev1.ResourceName]string{corev1.ResourceCPU: "9", corev1.ResourceMemory: "25Gi", v1.ResourceNodes: "3"} {
		if got := quantity(np.Status.Resources, name); got != want {
			t.Errorf("status.resources[%s] = %s, want %s", name, got, want)
		}
	}
	if np.Status.Nodes == nil || *np.Status.Nodes != 3 {
		t.Errorf("status.nodes = %v, want 3", np.Status.Nodes)
	}
}

func TestUsageByPool(t *testing.T) {
	usage := Usage([]v1.NodeClaim{*launched("a", "default", "2", "8Gi"), *launched("b", "default", "2", "8Gi", deleting), *launched("c", "other", "1", "1Gi"), *launched("d", "", "8", "8Gi")}, nil)
	if got := quantity(usage["default"], corev1.ResourceCPU); got != "4" {
		t.Errorf("default cpu %s, want 4", got)
	}
	if got := quantity(usage["other"], v1.ResourceNodes); got != "1" {
		t.Errorf("other nodes %s, want 1", got)
	}
	if len(usage) != 2 {
		t.Errorf("usage for %d pools, want 2 (a claim with no pool belongs to none)", len(usage))
	}
}

func poolNode(name, pool, providerID, cpu string) corev1.Node {
	n := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{v1.LabelNodePool: pool}}}
	n.Spec.ProviderID = providerID
	n.Status.Capacity = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse("8Gi")}
	return n
}

// A Node of the pool with no NodeClaim (adopted, another controller's, a snapshot
// without its claim) counts toward the pool's limits; a node a claim stands for
// counts once.
func TestUsageCountsNodesWithoutClaims(t *testing.T) {
	usage := Usage([]v1.NodeClaim{*launched("a", "default", "2", "8Gi")}, []corev1.Node{
		poolNode("node-a", "default", "fake:///a", "2"),
		poolNode("adopted", "default", "aws:///us-west-2a/i-0abc", "4"),
		poolNode("unmanaged", "", "aws:///us-west-2a/i-0def", "16"),
	})
	if got := quantity(usage["default"], v1.ResourceNodes); got != "2" {
		t.Errorf("default nodes %s, want 2 (the claim's node once, and the node without a claim)", got)
	}
	if got := quantity(usage["default"], corev1.ResourceCPU); got != "6" {
		t.Errorf("default cpu %s, want 6", got)
	}
}

func TestEmptyPoolCountsZero(t *testing.T) {
	kube, c := setup(t, readyClass("default"), pool("default", "default"))
	np := reconcilePool(t, kube, c, "default")
	if got := quantity(np.Status.Resources, v1.ResourceNodes); got != "0" || np.Status.Nodes == nil || *np.Status.Nodes != 0 {
		t.Errorf("nodes %s / %v, want 0", got, np.Status.Nodes)
	}
}

func TestReadyFollowsTheNodeClass(t *testing.T) {
	kube, c := setup(t, readyClass("default"), pool("default", "default"), pool("orphan", "missing"))
	np := reconcilePool(t, kube, c, "default")
	if !meta.IsStatusConditionTrue(np.Status.Conditions, v1.ConditionTypeReady) || !meta.IsStatusConditionTrue(np.Status.Conditions, v1.ConditionTypeNodeClassReady) {
		t.Errorf("pool with a ready class is not Ready: %v", np.Status.Conditions)
	}
	np = reconcilePool(t, kube, c, "orphan")
	cond := meta.FindStatusCondition(np.Status.Conditions, v1.ConditionTypeReady)
	if cond == nil || cond.Status != metav1.ConditionFalse || !strings.Contains(cond.Message, `"missing" not found`) {
		t.Errorf("pool with a missing class: Ready %+v, want False naming the class", cond)
	}
}

func TestInvalidRequirementsAreReported(t *testing.T) {
	bad := pool("bad", "default")
	bad.Spec.Template.Spec.Requirements = []v1.NodePoolRequirement{{Key: v1.LabelArch, RequirementBody: v1.RequirementBody{Operator: "Between", Values: []string{"a"}}}}
	kube, c := setup(t, readyClass("default"), bad)
	np := reconcilePool(t, kube, c, "bad")
	if meta.IsStatusConditionTrue(np.Status.Conditions, v1.ConditionTypeValidationSucceeded) || meta.IsStatusConditionTrue(np.Status.Conditions, v1.ConditionTypeReady) {
		t.Errorf("pool with an invalid operator is valid and ready: %v", np.Status.Conditions)
	}
}

// A static NodePool (replicas) is not silently left unscaled: without the
// StaticCapacity gate it is not valid, not ready, and says what to do; with it,
// it is Ready.
func TestStaticNodePoolNeedsItsGate(t *testing.T) {
	static := pool("static", "default")
	replicas := int64(3)
	static.Spec.Replicas = &replicas
	kube, c := setup(t, readyClass("default"), static)
	np := reconcilePool(t, kube, c, "static")
	cond := meta.FindStatusCondition(np.Status.Conditions, v1.ConditionTypeValidationSucceeded)
	if cond == nil || cond.Status != metav1.ConditionFalse || !strings.Contains(cond.Message, "needs --feature-gates StaticCapacity=true") {
		t.Errorf("ValidationSucceeded %+v, want False naming the gate", cond)
	}
	if meta.IsStatusConditionTrue(np.Status.Conditions, v1.ConditionTypeReady) {
		t.Errorf("a static pool is Ready without its gate: %v", np.Status.Conditions)
	}
	c.StaticCapacity = true
	np = reconcilePool(t, kube, c, "static")
	if !meta.IsStatusConditionTrue(np.Status.Conditions, v1.ConditionTypeReady) {
		t.Errorf("a static pool is not Ready with its gate: %v", np.Status.Conditions)
	}
}

// consolidationPolicy Balanced (Karpenter v1.15) is a valid pool: consolidation
// scores its moves.
func TestBalancedConsolidationPoolIsValid(t *testing.T) {
	balanced := pool("balanced", "default")
	balanced.Spec.Disruption.ConsolidationPolicy = v1.ConsolidationPolicyBalanced
	kube, c := setup(t, readyClass("default"), balanced)
	np := reconcilePool(t, kube, c, "balanced")
	if !meta.IsStatusConditionTrue(np.Status.Conditions, v1.ConditionTypeValidationSucceeded) || !meta.IsStatusConditionTrue(np.Status.Conditions, v1.ConditionTypeReady) {
		t.Errorf("a Balanced pool is not valid and Ready: %v", np.Status.Conditions)
	}
}
