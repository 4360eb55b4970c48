package metadata

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"
	fakeclient "sigs.k8s.io/controller-runtime/pkg/client/fake"

	dovetailv1alpha1 "github.com/dovetail-sh/dovetail/controller/apis/dovetail/v1alpha1"
	"github.com/dovetail-sh/dovetail/controller/apis/scheme"
	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
)

func pool(labels, annotations map[string]string, taints ...corev1.Taint) *v1.NodePool {
	np := &v1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "default"}}
	np.Spec.Template.Labels, np.Spec.Template.Annotations = labels, annotations
	np.Spec.Template.Spec.Taints = taints
	np.Spec.Template.Spec.NodeClassRef = &v1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "default"}
	return np
}

// launchedFrom is a claim (and its node) launched from the pool as it was.
func launchedFrom(np *v1.NodePool) (*v1.NodeClaim, *corev1.Node) {
	labels := map[string]string{v1.LabelNodePool: np.Name, v1.LabelInstanceType: "m5.large"}
	annotations := map[string]string{v1.NodePoolHashAnnotationKey: np.Hash(), v1.NodePoolHashVersionAnnotationKey: v1.NodePoolHashVersion,
		dovetailv1alpha1.TemplateLabelsAnnotationKey: dovetailv1alpha1.JoinKeys(np.Spec.Template.Labels), dovetailv1alpha1.TemplateAnnotationsAnnotationKey: dovetailv1alpha1.JoinKeys(np.Spec.Template.Annotations)}
	for k, v := range np.Spec.Template.Labels {
		labels[k] = v
	}
	for k, v := range np.Spec.Template.Annotations {
		annotations[k] = v
	}
	nc := &v1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "default-abc", Labels: labels, Annotations: annotations},
		Spec:   v1.NodeClaimSpec{Taints: np.Spec.Template.Spec.Taints, NodeClassRef: np.Spec.Template.Spec.NodeClassRef},
		Status: v1.NodeClaimStatus{NodeName: "node-a", ProviderID: "fake:///a", Conditions: []metav1.Condition{{Type: v1.ConditionTypeInitialized, Status: metav1.ConditionTrue, Reason: "Initialized", LastTransitionTime: metav1.Now()}}}}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a", Labels: map[string]string{}, Annotations: map[string]string{"kept": "yes"}}}
	for k, v := range labels {
		node.Labels[k] = v
	}
	for k, v := range np.Spec.Template.Annotations {
		node.Annotations[k] = v
	}
	return nc, node
}

// TestInPlaceMetadataReconcile: a template whose labels and annotations changed
// (one label's value, one label and one annotation dropped, one added) is applied
// to the claim, which then matches the pool's hash and records what was dropped
// for its node's sync; a template whose taints changed too is left to drift.
func TestInPlaceMetadataReconcile(t *testing.T) {
	before := pool(map[string]string{"team": "a", "tier": "web"}, map[string]string{"owner": "x"})
	nc, node := launchedFrom(before)
	after := pool(map[string]string{"team": "b", "cost-center": "42"}, nil)
	if !after.OnlyMetadataChanged(nc) {
		t.Fatalf("the claim should differ from the new template in metadata only")
	}
	kube := fakeclient.NewClientBuilder().WithScheme(scheme.New()).WithObjects(after, nc, node).Build()
	recorder := record.NewFakeRecorder(10)
	if _, err := NewController(kube, recorder).Reconcile(context.Background(), nc); err != nil {
		t.Fatal(err)
	}
	gotClaim := &v1.NodeClaim{}
	if err := kube.Get(context.Background(), client.ObjectKey{Name: "default-abc"}, gotClaim); err != nil {
		t.Fatal(err)
	}
	if l := gotClaim.Labels; l["team"] != "b" || l["cost-center"] != "42" || l["tier"] != "" || l[v1.LabelNodePool] != "default" || l[v1.LabelInstanceType] != "m5.large" {
		t.Errorf("claim labels %v; want team=b, cost-center=42, tier gone, the rest kept", l)
	}
	a := gotClaim.Annotations
	if _, ok := a["owner"]; ok || a[v1.NodePoolHashAnnotationKey] != after.Hash() || a[dovetailv1alpha1.TemplateLabelsAnnotationKey] != "cost-center,team" ||
		a[dovetailv1alpha1.DroppedLabelsAnnotationKey] != "tier" || a[dovetailv1alpha1.DroppedAnnotationsAnnotationKey] != "owner" {
		t.Errorf("claim annotations %v; want owner gone, the new pool hash, the new label keys and the dropped ones recorded (the node sync takes them off the node)", a)
	}
	if len(recorder.Events) != 1 {
		t.Errorf("%d events; want one MetadataUpdatedInPlace", len(recorder.Events))
	}

	// A taint changed as well: that is drift, and nothing is touched.
	nc2, node2 := launchedFrom(before)
	tainted := pool(map[string]string{"team": "b"}, nil, corev1.Taint{Key: "dedicated", Value: "x", Effect: corev1.TaintEffectNoSchedule})
	if tainted.OnlyMetadataChanged(nc2) {
		t.Fatalf("a taint change is not metadata")
	}
	kube = fakeclient.NewClientBuilder().WithScheme(scheme.New()).WithObjects(tainted, nc2, node2).Build()
	if _, err := NewController(kube, record.NewFakeRecorder(10)).Reconcile(context.Background(), nc2); err != nil {
		t.Fatal(err)
	}
	if err := kube.Get(context.Background(), client.ObjectKey{Name: "default-abc"}, gotClaim); err != nil {
		t.Fatal(err)
	}
	if gotClaim.Labels["team"] != "a" || gotClaim.Annotations[v1.NodePoolHashAnnotationKey] != before.Hash() {
		t.Errorf("a drifted claim was updated: labels %v", gotClaim.Labels)
	}
}

// TestInPlaceMetadataLeavesWhatTheInstanceDecides: a template label the instance
// decides (kubernetes.io/arch) changed to a value the node does not have is no
// metadata change; removed from the template, it stays on the claim, as does a
// label a requirement of the pool sets.
func TestInPlaceMetadataLeavesWhatTheInstanceDecides(t *testing.T) {
	before := pool(map[string]string{v1.LabelArch: "amd64", "team": "a", "tier": "web"}, nil)
	nc, node := launchedFrom(before)
	nc.Labels[v1.LabelArch] = "amd64"
	// The claim's requirements hold every template label; only the pool's own
	// requirements say what every node keeps.
	nc.Spec.Requirements = []v1.NodeSelectorRequirementWithMinValues{
		{Key: "tier", RequirementBody: v1.RequirementBody{Operator: v1.OpIn, Values: []string{"web"}}},
		{Key: "team", RequirementBody: v1.RequirementBody{Operator: v1.OpIn, Values: []string{"a"}}},
	}
	if arm := pool(map[string]string{v1.LabelArch: "arm64", "team": "a", "tier": "web"}, nil); arm.OnlyMetadataChanged(nc) {
		t.Errorf("an amd64 node cannot become arm64 in place")
	}
	after := pool(map[string]string{"team": "b"}, nil)
	after.Spec.Template.Spec.Requirements = []v1.NodePoolRequirement{{Key: "tier", RequirementBody: v1.RequirementBody{Operator: v1.OpIn, Values: []string{"web"}}}}
	if !after.OnlyMetadataChanged(nc) {
		t.Fatalf("dropping labels and changing team is metadata")
	}
	kube := fakeclient.NewClientBuilder().WithScheme(scheme.New()).WithObjects(after, nc, node).Build()
	if _, err := NewController(kube, record.NewFakeRecorder(10)).Reconcile(context.Background(), nc); err != nil {
		t.Fatal(err)
	}
	got := &v1.NodeClaim{}
	if err := kube.Get(context.Background(), client.ObjectKey{Name: nc.Name}, got); err != nil {
		t.Fatal(err)
	}
	if got.Labels[v1.LabelArch] != "amd64" || got.Labels["tier"] != "web" || got.Labels["team"] != "b" || got.Annotations[dovetailv1alpha1.DroppedLabelsAnnotationKey] != "" {
		t.Errorf("labels %v, dropped %q; want arch and the required tier kept, team=b, nothing dropped", got.Labels, got.Annotations[dovetailv1alpha1.DroppedLabelsAnnotationKey])
	}
}
