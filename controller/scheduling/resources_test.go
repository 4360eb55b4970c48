package scheduling

import (
	"fmt"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	resourcehelper "k8s.io/component-helpers/resource"
)

// TestPodRequestsAgreesWithTheKubeletHelper: the shortcut for pods without init
// containers, overhead or pod-level resources gives what component-helpers gives,
// and the other pods go through the helper itself.
func TestPodRequestsAgreesWithTheKubeletHelper(t *testing.T) {
	reqs := func(cpu, mem string, extra ...string) corev1.ResourceRequirements {
		rl := corev1.ResourceList{}
		if cpu != "" {
			rl[corev1.ResourceCPU] = resource.MustParse(cpu)
		}
		if mem != "" {
			rl[corev1.ResourceMemory] = resource.MustParse(mem)
		}
		for i := 0; i+1 < len(extra); i += 2 {
			rl[corev1.ResourceName(extra[i])] = resource.MustParse(extra[i+1])
		}
		return corev1.ResourceRequirements{Requests: rl}
	}
	always := corev1.ContainerRestartPolicyAlways
	cases := map[string]corev1.PodSpec{
		"no requests":   {Containers: []corev1.Container{{Name: "a"}}},
		"one container": {Containers: []corev1.Container{{Name: "a", Resources: reqs("250m", "512Mi")}}},
		"several containers, storage and a gpu": {Containers: []corev1.Container{
			{Name: "a", Resources: reqs("1", "1Gi", "ephemeral-storage", "10Gi")},
			{Name: "b", Resources: reqs("1500m", "", "nvidia.com/gpu", "1")},
			{Name: "c", Resources: reqs("", "300Mi")}}},
		"an init container larger than the containers": {
			InitContainers: []corev1.Container{{Name: "i", Resources: reqs("4", "8Gi")}},
			Containers:     []corev1.Container{{Name: "a", Resources: reqs("1", "1Gi")}}},
		"a sidecar": {
			InitContainers: []corev1.Container{{Name: "s", RestartPolicy: &always, Resources: reqs("500m", "256Mi")}},
			Containers:     []corev1.Container{{Name: "a", Resources: reqs("1", "1Gi")}}},
		"overhead": {Overhead: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m")},
			Containers: []corev1.Container{{Name: "a", Resources: reqs("1", "1Gi")}}},
		"pod-level resources": {Resources: &corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("3"), corev1.ResourceMemory: resource.MustParse("3Gi")}},
			Containers: []corev1.Container{{Name: "a", Resources: reqs("1", "1Gi")}}},
	}
	for name, spec := range cases {
		t.Run(name, func(t *testing.T) {
			pod := &corev1.Pod{Spec: spec}
			want := FromResourceList(resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{}))
			want.Pods = 1
			got := PodRequests(pod)
			if fmt.Sprint(got) != fmt.Sprint(want) || !reflect.DeepEqual(nonZero(got.Extended), nonZero(want.Extended)) {
				t.Errorf("PodRequests = %v %v, the helper says %v %v", got, got.Extended, want, want.Extended)
			}
		})
	}
}

func nonZero(m map[corev1.ResourceName]int64) map[corev1.ResourceName]int64 {
	out := map[corev1.ResourceName]int64{}
	for k, v := range m {
		if v != 0 {
			out[k] = v
		}
	}
	return out
}
