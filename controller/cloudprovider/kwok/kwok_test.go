package kwok

import (
	"context"
	"testing"

	"github.com/dovetail-sh/dovetail/controller/apis/scheme"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	fakeclient "sigs.k8s.io/controller-runtime/pkg/client/fake"

	awsv1 "github.com/dovetail-sh/dovetail/controller/apis/aws/v1"
	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/controller/catalog"
	"github.com/dovetail-sh/dovetail/controller/scheduling"
)

func newProvider(t *testing.T) (client.Client, *CloudProvider) {
	t.Helper()
	kube := fakeclient.NewClientBuilder().WithScheme(scheme.New()).WithStatusSubresource(&corev1.Node{}).Build()
	cat, err := catalog.EmbeddedAWS()
	if err != nil {
		t.Fatal(err)
	}
	return kube, New(kube, cat, scheduling.DefaultAllocatableSettings(), 0)
}

func claim(types ...string) *v1.NodeClaim {
	return &v1.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "default-a", Labels: map[string]string{v1.LabelNodePool: "default"}},
		Spec: v1.NodeClaimSpec{Requirements: []v1.NodeSelectorRequirementWithMinValues{
			{Key: v1.LabelInstanceType, RequirementBody: v1.RequirementBody{Operator: v1.OpIn, Values: types}},
			{Key: v1.LabelCapacityType, RequirementBody: v1.RequirementBody{Operator: v1.OpIn, Values: []string{v1.CapacityTypeOnDemand}}},
		}},
	}
}

func TestCreateWritesANodeOfTheCheapestType(t *testing.T) {
	kube, p := newProvider(t)
	launched, err := p.Create(context.Background(), claim("m5.large", "m5.xlarge"))
	if err != nil {
		t.Fatal(err)
	}
	if launched.Status.ProviderID != ProviderIDPrefix+"default-a" || launched.Labels[v1.LabelInstanceType] != "m5.large" || launched.Status.Capacity.Cpu().Value() != 2 {
		t.Errorf("launched %v %+v, want m5.large with its capacity", launched.Labels, launched.Status)
	}
	node := &corev1.Node{}
	if err := kube.Get(context.Background(), client.ObjectKey{Name: "default-a"}, node); err != nil {
		t.Fatal(err)
	}
	if node.Spec.ProviderID != launched.Status.ProviderID || node.Status.Capacity.Cpu().Value() != 2 || node.Labels[v1.LabelNodePool] != "default" {
		t.Errorf("node %v %+v, want the claim's providerID, labels and capacity", node.Labels, node.Status.Capacity)
	}
	tainted := false
	for _, taint := range node.Spec.Taints {
		tainted = tainted || taint.MatchTaint(&v1.UnregisteredNoExecuteTaint)
	}
	if !tainted {
		t.Errorf("node without the unregistered taint: %v", node.Spec.Taints)
	}
}

// A second launch of the claim, as after a lost result, returns the instance the
// first made, even if the claim now allows a cheaper type.
func TestCreateIsIdempotent(t *testing.T) {
	kube, p := newProvider(t)
	first, err := p.Create(context.Background(), claim("m5.xlarge"))
	if err != nil {
		t.Fatal(err)
	}
	second, err := p.Create(context.Background(), claim("m5.large", "m5.xlarge"))
	if err != nil {
		t.Fatal(err)
	}
	if second.Status.ProviderID != first.Status.ProviderID || second.Labels[v1.LabelInstanceType] != "m5.xlarge" ||
		second.Labels[v1.LabelTopologyZone] != first.Labels[v1.LabelTopologyZone] || !second.Status.Capacity.Cpu().Equal(*first.Status.Capacity.Cpu()) {
		t.Errorf("second launch %s %s, want the first's instance %s %s", second.Status.ProviderID, second.Labels[v1.LabelInstanceType], first.Status.ProviderID, first.Labels[v1.LabelInstanceType])
	}
	var nodes corev1.NodeList
	if err := kube.List(context.Background(), &nodes); err != nil {
		t.Fatal(err)
	}
	if len(nodes.Items) != 1 {
		t.Errorf("%d nodes, want 1", len(nodes.Items))
	}
}

// A launch that died after creating the Node and before writing its capacity
// finishes the Node on the next launch.
func TestCreateCompletesANodeWithoutCapacity(t *testing.T) {
	kube, p := newProvider(t)
	if _, err := p.Create(context.Background(), claim("m5.large")); err != nil {
		t.Fatal(err)
	}
	node := &corev1.Node{}
	if err := kube.Get(context.Background(), client.ObjectKey{Name: "default-a"}, node); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(node.DeepCopy())
	node.Status.Capacity, node.Status.Allocatable = nil, nil
	if err := kube.Status().Patch(context.Background(), node, patch); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Create(context.Background(), claim("m5.large")); err != nil {
		t.Fatal(err)
	}
	if err := kube.Get(context.Background(), client.ObjectKey{Name: "default-a"}, node); err != nil {
		t.Fatal(err)
	}
	if node.Status.Capacity.Cpu().Value() != 2 || node.Status.Allocatable.Cpu().IsZero() {
		t.Errorf("node capacity %v allocatable %v, want m5.large's", node.Status.Capacity, node.Status.Allocatable)
	}
}

func TestDeleteGetList(t *testing.T) {
	_, p := newProvider(t)
	launched, err := p.Create(context.Background(), claim("m5.large"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := p.Get(context.Background(), launched.Status.ProviderID)
	if err != nil || got.Labels[v1.LabelInstanceType] != "m5.large" {
		t.Fatalf("Get: %v %v", got, err)
	}
	if all, err := p.List(context.Background()); err != nil || len(all) != 1 || all[0].Name != "default-a" {
		t.Fatalf("List: %v %v", all, err)
	}
	if err := p.Delete(context.Background(), launched); err != nil {
		t.Fatal(err)
	}
	if err := p.Delete(context.Background(), launched); err == nil {
		t.Errorf("second Delete did not say the instance is gone")
	}
	if _, err := p.Get(context.Background(), launched.Status.ProviderID); err == nil {
		t.Errorf("Get of a deleted instance did not fail")
	}
}

// A kwok node of an EC2NodeClass holds what an EC2 node of the class would: the
// kubelet's maxPods in its capacity, and the pool's types are the class's. A change
// to the class is seen by the next launch; a class that does not exist leaves the
// catalog's types.
func TestTypesAreWhatTheClassMakesOfThem(t *testing.T) {
	ctx := context.Background()
	kube, p := newProvider(t)
	ten := int32(10)
	class := &awsv1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: "small"}, Spec: awsv1.EC2NodeClassSpec{Kubelet: &awsv1.KubeletConfiguration{MaxPods: &ten}}}
	if err := kube.Create(ctx, class); err != nil {
		t.Fatal(err)
	}
	ref := &v1.NodeClassReference{Group: awsv1.Group, Kind: "EC2NodeClass", Name: "small"}
	pool := &v1.NodePool{Spec: v1.NodePoolSpec{Template: v1.NodeClaimTemplate{Spec: v1.NodeClaimTemplateSpec{NodeClassRef: ref}}}}
	pods := func(types []*scheduling.InstanceType, name string) int64 {
		it := instanceType(types, name)
		if it == nil {
			t.Fatalf("no %s among the types", name)
		}
		capacity := it.Capacity.ToResourceList()
		return capacity.Pods().Value()
	}
	types, err := p.GetInstanceTypes(ctx, pool)
	if err != nil {
		t.Fatal(err)
	}
	if n := pods(types, "m5.xlarge"); n != 10 {
		t.Errorf("an m5.xlarge of a class with kubelet.maxPods 10 holds %d pods", n)
	}
	nc := claim("m5.xlarge")
	nc.Spec.NodeClassRef = ref
	launched, err := p.Create(ctx, nc)
	if err != nil {
		t.Fatal(err)
	}
	if n := launched.Status.Capacity.Pods().Value(); n != 10 {
		t.Errorf("the launched m5.xlarge holds %d pods; want the class's 10", n)
	}

	twenty := int32(20)
	class.Spec.Kubelet.MaxPods = &twenty
	if err := kube.Update(ctx, class); err != nil {
		t.Fatal(err)
	}
	if types, err = p.GetInstanceTypes(ctx, pool); err != nil || pods(types, "m5.xlarge") != 20 {
		t.Errorf("after the class changed to maxPods 20: %v, %d pods", err, pods(types, "m5.xlarge"))
	}
	pool.Spec.Template.Spec.NodeClassRef = &v1.NodeClassReference{Group: awsv1.Group, Kind: "EC2NodeClass", Name: "missing"}
	if types, err = p.GetInstanceTypes(ctx, pool); err != nil || pods(types, "m5.xlarge") != pods(p.types, "m5.xlarge") {
		t.Errorf("a class that does not exist: %v; want the catalog's types", err)
	}
}

// With one ENI reserved, as --reserved-enis 1 sets it, a kwok m5.large holds 20
// pods, as an EC2 one under the AWS provider: for a claim of no class, and of a
// class without networkInterfaces.
func TestReservedENIsLowerMaxPods(t *testing.T) {
	ctx := context.Background()
	kube := fakeclient.NewClientBuilder().WithScheme(scheme.New()).WithStatusSubresource(&corev1.Node{}).Build()
	cat, err := catalog.EmbeddedAWS()
	if err != nil {
		t.Fatal(err)
	}
	p := New(kube, cat, scheduling.DefaultAllocatableSettings(), 1)
	plain, err := p.Create(ctx, claim("m5.large"))
	if err != nil {
		t.Fatal(err)
	}
	if n := plain.Status.Capacity.Pods().Value(); n != 20 {
		t.Errorf("an m5.large of no class holds %d pods; want 20", n)
	}
	class := &awsv1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: "default"}}
	if err := kube.Create(ctx, class); err != nil {
		t.Fatal(err)
	}
	nc := claim("m5.large")
	nc.Name = "default-b"
	nc.Spec.NodeClassRef = &v1.NodeClassReference{Group: awsv1.Group, Kind: "EC2NodeClass", Name: "default"}
	classed, err := p.Create(ctx, nc)
	if err != nil {
		t.Fatal(err)
	}
	if n := classed.Status.Capacity.Pods().Value(); n != 20 {
		t.Errorf("an m5.large of a class holds %d pods; want 20", n)
	}
}
