package plancheck_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"

	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/controller/scheduling"
	"github.com/dovetail-sh/dovetail/controller/scheduling/plancheck"
)

func openPool() *v1.NodePool {
	np := &v1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "default"}}
	np.Spec.Template.Spec.NodeClassRef = &v1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "default"}
	return np
}

func smallPod(name string, exprs ...corev1.NodeSelectorRequirement) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: k8stypes.UID("uid-" + name)}}
	p.Spec.Containers = []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("512Mi")}}}}
	if len(exprs) > 0 {
		p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
			NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: exprs}}}}}
	}
	return p
}

// TestGPUNameSelectorPlansAGPUType is the report: a NodePool with no
// requirements and a pod selecting instance-gpu-name t4 planned an a1.large, which
// never carries the label. Every option of the claim must be a T4 type.
func TestGPUNameSelectorPlansAGPUType(t *testing.T) {
	u := embeddedUniverse(t)
	p := smallPod("gpu")
	p.Spec.NodeSelector = map[string]string{v1.LabelInstanceGPUName: "t4"}
	in := scheduling.Input{Pods: []*corev1.Pod{p}, NodePools: []*v1.NodePool{openPool()}, InstanceTypes: map[string][]*scheduling.InstanceType{"default": u.Types}}
	r := scheduling.Solve(in)
	if len(r.NodeClaims) != 1 {
		t.Fatalf("want one claim, got %d (unschedulable: %v)", len(r.NodeClaims), r.Unschedulable)
	}
	for _, it := range r.NodeClaims[0].InstanceTypeOptions {
		if got, _ := it.Requirements.Get(v1.LabelInstanceGPUName).Any(); got != "t4" {
			t.Errorf("option %s has instance-gpu-name %q, want t4", it.Name, got)
		}
	}
	if vs := plancheck.Plan(in, r); len(vs) > 0 {
		t.Errorf("the plan breaks the invariant: %v", vs)
	}
}

// TestAbsentLabelMeetsOnlyNotInAndDoesNotExist plans one pod per operator on a
// label most types lack: In, Exists, Gt and Lt need a type that has it; NotIn and
// DoesNotExist are met by the types without it too.
func TestAbsentLabelMeetsOnlyNotInAndDoesNotExist(t *testing.T) {
	u := embeddedUniverse(t)
	key := v1.LabelInstanceAccCount
	cases := []struct {
		op          corev1.NodeSelectorOperator
		values      []string
		mayLackIt   bool
		mustLackIt  bool
		description string
	}{
		{corev1.NodeSelectorOpIn, []string{"1"}, false, false, "In"},
		{corev1.NodeSelectorOpExists, nil, false, false, "Exists"},
		{corev1.NodeSelectorOpGt, []string{"0"}, false, false, "Gt"},
		{corev1.NodeSelectorOpLt, []string{"100"}, false, false, "Lt"},
		{corev1.NodeSelectorOpNotIn, []string{"1"}, true, false, "NotIn"},
		{corev1.NodeSelectorOpDoesNotExist, nil, true, true, "DoesNotExist"},
	}
	for _, c := range cases {
		t.Run(c.description, func(t *testing.T) {
			p := smallPod("acc-"+c.description, corev1.NodeSelectorRequirement{Key: key, Operator: c.op, Values: c.values})
			in := scheduling.Input{Pods: []*corev1.Pod{p}, NodePools: []*v1.NodePool{openPool()}, InstanceTypes: map[string][]*scheduling.InstanceType{"default": u.Types}}
			r := scheduling.Solve(in)
			if len(r.NodeClaims) != 1 {
				t.Fatalf("want one claim, got %d (unschedulable: %v)", len(r.NodeClaims), r.Unschedulable)
			}
			lacking := 0
			for _, it := range r.NodeClaims[0].InstanceTypeOptions {
				if it.Requirements.Get(key).AllowsAbsent() {
					lacking++
				}
			}
			options := len(r.NodeClaims[0].InstanceTypeOptions)
			switch {
			case !c.mayLackIt && lacking > 0:
				t.Errorf("%d of %d options lack %s, which %s needs", lacking, options, key, c.op)
			case c.mustLackIt && lacking != options:
				t.Errorf("%d of %d options have %s, which %s excludes", options-lacking, options, key, c.op)
			case c.mayLackIt && lacking == 0:
				t.Errorf("no option lacks %s, though %s allows it: the cheap types without it were left out", key, c.op)
			}
			if vs := plancheck.Plan(in, r); len(vs) > 0 {
				t.Errorf("the plan breaks the invariant: %v", vs)
			}
		})
	}
}

// TestContradictoryAffinityPlansNothing: In [t4] and In [h100] on one key leave no
// value; that is not DoesNotExist, so no type without a GPU may take the pod.
func TestContradictoryAffinityPlansNothing(t *testing.T) {
	u := embeddedUniverse(t)
	p := smallPod("both",
		corev1.NodeSelectorRequirement{Key: v1.LabelInstanceGPUName, Operator: corev1.NodeSelectorOpIn, Values: []string{"t4"}},
		corev1.NodeSelectorRequirement{Key: v1.LabelInstanceGPUName, Operator: corev1.NodeSelectorOpIn, Values: []string{"h100"}})
	in := scheduling.Input{Pods: []*corev1.Pod{p}, NodePools: []*v1.NodePool{openPool()}, InstanceTypes: map[string][]*scheduling.InstanceType{"default": u.Types}}
	r := scheduling.Solve(in)
	if len(r.NodeClaims) != 0 || len(r.Unschedulable) != 1 {
		t.Fatalf("want the pod unschedulable and no claim, got %d claim(s) (first: %v)", len(r.NodeClaims), firstOptions(r))
	}
}

func firstOptions(r *scheduling.Results) []string {
	if len(r.NodeClaims) == 0 {
		return nil
	}
	var names []string
	for _, it := range r.NodeClaims[0].InstanceTypeOptions[:min(5, len(r.NodeClaims[0].InstanceTypeOptions))] {
		names = append(names, it.Name)
	}
	return names
}

// A label a type may take several values of (a placement group's partition, set
// by the AWS provider) is one of them on the node: a claim that allows them all is
// sound.
func TestPartitionLabelTakesOneOfItsValues(t *testing.T) {
	it := scheduling.NewInstanceType("c5.large", map[string]string{v1.LabelArch: "amd64", v1.LabelOS: "linux"}, corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("4Gi"), corev1.ResourcePods: resource.MustParse("29"), corev1.ResourceEphemeralStorage: resource.MustParse("20Gi"),
	}, []scheduling.Offering{{Zone: "a", CapacityType: v1.CapacityTypeOnDemand, Price: 0.1, Available: true}}, scheduling.DefaultAllocatableSettings())
	it.Requirements[v1.LabelPlacementGroupPartition] = scheduling.MustRequirement(v1.LabelPlacementGroupPartition, v1.OpIn, "1", "2", "3")
	reqs := scheduling.NewRequirements(scheduling.MustRequirement(v1.LabelPlacementGroupPartition, v1.OpIn, "1", "2", "3"), scheduling.MustRequirement(v1.LabelInstanceType, v1.OpIn, "c5.large"))
	plan := &scheduling.NodeClaimPlan{Name: "pg-1", NodePool: "pg", Requirements: reqs, InstanceTypeOptions: []*scheduling.InstanceType{it}, Pods: []*corev1.Pod{smallPod("p")}}
	plan.Requests = scheduling.PodRequests(plan.Pods[0])
	if vs := plancheck.Claim(plan, plancheck.Capacity{}); len(vs) > 0 {
		t.Errorf("a claim over the type's partitions was refused: %v", vs)
	}
	plan.Requirements = scheduling.NewRequirements(scheduling.MustRequirement(v1.LabelPlacementGroupPartition, v1.OpIn, "4"), scheduling.MustRequirement(v1.LabelInstanceType, v1.OpIn, "c5.large"))
	if vs := plancheck.Claim(plan, plancheck.Capacity{}); len(vs) == 0 {
		t.Error("a claim for a partition the type does not have was accepted")
	}
}

// What a real node carries beyond the engine's model must not read as a broken
// plan: the deprecated keys beside the stable ones, and a pool's own key that no
// type defines ("team Exists") while no pod names it. The controller refuses a
// NodeClaim the checker flags, so a false alarm would strand pods.
func TestCheckerAcceptsWhatRealNodesCarry(t *testing.T) {
	u := embeddedUniverse(t)
	legacy := smallPod("legacy")
	legacy.Spec.NodeSelector = map[string]string{"beta.kubernetes.io/os": "linux", "failure-domain.beta.kubernetes.io/zone": "us-west-2a"}
	teams := openPool()
	teams.Spec.Template.Spec.Requirements = []v1.NodePoolRequirement{{Key: "example.com/team", RequirementBody: v1.RequirementBody{Operator: v1.OpExists}}}
	for name, in := range map[string]scheduling.Input{
		"deprecated keys": {Pods: []*corev1.Pod{legacy}, NodePools: []*v1.NodePool{openPool()}, InstanceTypes: map[string][]*scheduling.InstanceType{"default": u.Types}},
		"pool's own key":  {Pods: []*corev1.Pod{smallPod("any")}, NodePools: []*v1.NodePool{teams}, InstanceTypes: map[string][]*scheduling.InstanceType{"default": u.Types}},
	} {
		r := scheduling.Solve(in)
		if len(r.NodeClaims) != 1 {
			t.Errorf("%s: want one claim, got %d (unschedulable: %v)", name, len(r.NodeClaims), r.Unschedulable)
			continue
		}
		if vs := plancheck.Plan(in, r); len(vs) > 0 {
			t.Errorf("%s: a sound plan was flagged: %v", name, vs[0])
		}
	}
}
