package provisioning

import (
	"context"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/controller/engineinput"
	"github.com/dovetail-sh/dovetail/controller/scheduling"
)

func checkedType(name string, labels map[string]string) *scheduling.InstanceType {
	all := map[string]string{v1.LabelArch: "amd64", v1.LabelOS: "linux"}
	for k, v := range labels {
		all[k] = v
	}
	return scheduling.NewInstanceType(name, all, corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("16Gi"), corev1.ResourcePods: resource.MustParse("29"), corev1.ResourceEphemeralStorage: resource.MustParse("20Gi"),
	}, []scheduling.Offering{{Zone: "zone-a", CapacityType: v1.CapacityTypeOnDemand, Price: 0.2, Available: true}}, scheduling.DefaultAllocatableSettings())
}

func gpuPlan(options ...*scheduling.InstanceType) *scheduling.NodeClaimPlan {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "trainer", Namespace: "default"}}
	pod.Spec.NodeSelector = map[string]string{v1.LabelInstanceGPUName: "t4"}
	pod.Spec.Containers = []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}}}
	names := make([]string, len(options))
	for i, it := range options {
		names[i] = it.Name
	}
	reqs := scheduling.NewRequirements(scheduling.MustRequirement(v1.LabelNodePool, v1.OpIn, "gpu"), scheduling.MustRequirement(v1.LabelInstanceType, v1.OpIn, names...))
	return &scheduling.NodeClaimPlan{Name: "gpu-1", NodePool: "gpu", Requirements: reqs, InstanceTypeOptions: options, InstanceType: options[0],
		Pods: []*corev1.Pod{pod}, Requests: scheduling.PodRequests(pod)}
}

// TestOptionsThatCannotRunThePodsAreDropped stands in for a future engine bug: a
// plan whose cheapest option lacks the label its pod selects. The NodeClaim must
// not offer it to the cloud, and the drop is counted.
func TestOptionsThatCannotRunThePodsAreDropped(t *testing.T) {
	cpuOnly := checkedType("a1.large", nil)
	t4 := checkedType("g4dn.xlarge", map[string]string{v1.LabelInstanceGPUName: "t4"})
	before := testutil.ToFloat64(droppedOptions.WithLabelValues("gpu", "node affinity"))
	plan, err := hostable(context.Background(), gpuPlan(cpuOnly, t4), engineinput.MaxInstanceTypes)
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.InstanceTypeOptions) != 1 || plan.InstanceTypeOptions[0] != t4 || plan.InstanceType != t4 {
		t.Errorf("options %v, cheapest %s; want only g4dn.xlarge", plan.InstanceTypeOptions, plan.InstanceType.Name)
	}
	if got := plan.Requirements.Get(v1.LabelInstanceType).Values(); len(got) != 1 || got[0] != "g4dn.xlarge" {
		t.Errorf("the NodeClaim's instance-type requirement is %v, want [g4dn.xlarge]", got)
	}
	if got := testutil.ToFloat64(droppedOptions.WithLabelValues("gpu", "node affinity")) - before; got != 1 {
		t.Errorf("dovetail_nodeclaims_options_dropped_total rose by %v, want 1", got)
	}

	if _, err := hostable(context.Background(), gpuPlan(cpuOnly), engineinput.MaxInstanceTypes); err == nil || !strings.Contains(err.Error(), "instance-gpu-name") {
		t.Errorf("a plan no option of which can run its pod gave %v, want an error naming the label", err)
	}
	same := gpuPlan(t4)
	if got, err := hostable(context.Background(), same, engineinput.MaxInstanceTypes); err != nil || got != same {
		t.Errorf("a sound plan came back changed (%v)", err)
	}
}
