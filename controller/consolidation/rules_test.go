package consolidation

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/controller/scheduling"
)

func instanceType(name string, price float64, capacityType string) *scheduling.InstanceType {
	return scheduling.NewInstanceType(name, map[string]string{v1.LabelArch: "amd64"},
		corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("4Gi"), corev1.ResourcePods: resource.MustParse("29")},
		[]scheduling.Offering{{Zone: "a", CapacityType: capacityType, Price: price, Available: true}}, scheduling.DefaultAllocatableSettings())
}

func plan(types ...*scheduling.InstanceType) *scheduling.NodeClaimPlan {
	names := make([]string, len(types))
	for i, it := range types {
		names[i] = it.Name
	}
	reqs := scheduling.NewRequirements(scheduling.MustRequirement(v1.LabelInstanceType, v1.OpIn, names...))
	o, _ := scheduling.CheapestOffering(types[0], reqs)
	return &scheduling.NodeClaimPlan{InstanceTypeOptions: types, InstanceType: types[0], Offering: o, Requirements: reqs}
}

// TestNarrowToCheaper: a replacement keeps only the types that keep it cheaper than
// what it replaces, and spot is replaced by spot only behind the gate, with choice.
func TestNarrowToCheaper(t *testing.T) {
	p := plan(instanceType("small", 0.10, v1.CapacityTypeOnDemand), instanceType("same", 0.20, v1.CapacityTypeOnDemand), instanceType("big", 0.40, v1.CapacityTypeOnDemand))
	if !narrowToCheaper([]*scheduling.NodeClaimPlan{p}, 0.20, false, false) {
		t.Fatal("a cheaper type was not accepted")
	}
	if len(p.InstanceTypeOptions) != 1 || p.InstanceTypeOptions[0].Name != "small" || !p.Requirements.Get(v1.LabelInstanceType).Has("small") || p.Requirements.Get(v1.LabelInstanceType).Has("same") {
		t.Errorf("options narrowed to %v, requirement %v; want only the cheaper small", p.InstanceTypeOptions, p.Requirements.Get(v1.LabelInstanceType))
	}
	if narrowToCheaper([]*scheduling.NodeClaimPlan{plan(instanceType("same", 0.20, v1.CapacityTypeOnDemand))}, 0.20, false, false) {
		t.Error("a replacement at the same price was accepted")
	}
	two := []*scheduling.NodeClaimPlan{plan(instanceType("a", 0.10, v1.CapacityTypeOnDemand)), plan(instanceType("b", 0.15, v1.CapacityTypeOnDemand))}
	if narrowToCheaper(two, 0.25, false, false) {
		t.Error("two replacements costing together what they replace were accepted")
	}

	var many []*scheduling.InstanceType
	for i := 0; i < MinSpotToSpotOptions; i++ {
		many = append(many, instanceType(fmt.Sprintf("spot-%02d", i), 0.1+float64(i)*0.01, v1.CapacityTypeSpot))
	}
	if narrowToCheaper([]*scheduling.NodeClaimPlan{plan(many...)}, 1.0, true, false) {
		t.Error("spot replaced by spot without the SpotToSpotConsolidation gate")
	}
	if !narrowToCheaper([]*scheduling.NodeClaimPlan{plan(many...)}, 1.0, true, true) {
		t.Errorf("spot-to-spot with %d cheaper options refused behind the gate", len(many))
	}
	if narrowToCheaper([]*scheduling.NodeClaimPlan{plan(many[:MinSpotToSpotOptions-1]...)}, 1.0, true, true) {
		t.Errorf("spot-to-spot with only %d cheaper options accepted", MinSpotToSpotOptions-1)
	}
	if !narrowToCheaper([]*scheduling.NodeClaimPlan{plan(instanceType("od", 0.5, v1.CapacityTypeOnDemand))}, 1.0, true, false) {
		t.Error("a spot node could not be replaced by a cheaper on-demand one")
	}
}

func TestBlocker(t *testing.T) {
	yes := true
	owned := func(name string, annotations map[string]string) *corev1.Pod {
		p := &corev1.Pod{}
		p.Name, p.Namespace, p.Annotations, p.Labels = name, "default", annotations, map[string]string{"app": "web"}
		p.OwnerReferences = []metav1.OwnerReference{{Kind: "ReplicaSet", Name: "web", Controller: &yes}}
		return p
	}
	node := &corev1.Node{}
	pdb := policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec: policyv1.PodDisruptionBudgetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}}
	if why := blocker(node, []*corev1.Pod{owned("a", nil)}, nil, testNow); why != "" {
		t.Errorf("an ordinary pod blocks: %s", why)
	}
	if why := blocker(node, []*corev1.Pod{owned("a", map[string]string{v1.DoNotDisruptAnnotationKey: "true"})}, nil, testNow); !strings.Contains(why, "do-not-disrupt") {
		t.Errorf("do-not-disrupt pod: %q", why)
	}
	// A duration counts from the pod's start: protected for its first half hour.
	timed := owned("timed", map[string]string{v1.DoNotDisruptAnnotationKey: "30m"})
	timed.Status.StartTime = &metav1.Time{Time: testNow.Add(-10 * time.Minute)}
	if why := blocker(node, []*corev1.Pod{timed}, nil, testNow); !strings.Contains(why, "until 2026-11-23T12:20:00Z") {
		t.Errorf("do-not-disrupt for 30m, started 10m ago: %q", why)
	}
	if why := blocker(node, []*corev1.Pod{timed}, nil, testNow.Add(21*time.Minute)); why != "" {
		t.Errorf("do-not-disrupt for 30m, started 31m ago, still blocks: %q", why)
	}
	bare := owned("bare", nil)
	bare.OwnerReferences = nil
	if why := blocker(node, []*corev1.Pod{bare}, nil, testNow); !strings.Contains(why, "no controller") {
		t.Errorf("pod without a controller: %q", why)
	}
	if why := blocker(node, []*corev1.Pod{owned("a", nil)}, []policyv1.PodDisruptionBudget{pdb}, testNow); !strings.Contains(why, "pdb default/web") {
		t.Errorf("PDB allowing no disruption: %q", why)
	}
	pdb.Status.DisruptionsAllowed = 1
	if why := blocker(node, []*corev1.Pod{owned("a", nil)}, []policyv1.PodDisruptionBudget{pdb}, testNow); why != "" {
		t.Errorf("PDB allowing one disruption blocks: %q", why)
	}
	daemon := owned("ds", map[string]string{v1.DoNotDisruptAnnotationKey: "true"})
	daemon.OwnerReferences[0].Kind = "DaemonSet"
	if why := blocker(node, []*corev1.Pod{daemon}, nil, testNow); why != "" {
		t.Errorf("a daemonset pod, which is never evicted, blocks: %q", why)
	}
	node.Annotations = map[string]string{v1.DoNotDisruptAnnotationKey: "true"}
	if why := blocker(node, nil, nil, testNow); !strings.Contains(why, "node has") {
		t.Errorf("do-not-disrupt node: %q", why)
	}
}
