package scheduling

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	resourcehelper "k8s.io/component-helpers/resource"
)

// Resources is a resource vector in integer units (milli-cpu, bytes, pods). The engine
// adds and compares these millions of times per solve, so the four common resources
// are fields and only extended resources (GPUs, Neuron cores) go in a map.
type Resources struct {
	MilliCPU         int64
	Memory           int64
	Pods             int64
	EphemeralStorage int64
	Extended         map[corev1.ResourceName]int64
}

// FromResourceList converts a ResourceList. hugepages and unknown native resources are
// kept as extended resources so they are still checked.
func FromResourceList(rl corev1.ResourceList) Resources {
	var r Resources
	for name, q := range rl {
		switch name {
		case corev1.ResourceCPU:
			r.MilliCPU = q.MilliValue()
		case corev1.ResourceMemory:
			r.Memory = q.Value()
		case corev1.ResourcePods:
			r.Pods = q.Value()
		case corev1.ResourceEphemeralStorage:
			r.EphemeralStorage = q.Value()
		default:
			if r.Extended == nil {
				r.Extended = map[corev1.ResourceName]int64{}
			}
			r.Extended[name] = q.Value()
		}
	}
	return r
}

// PodRequests is what a pod needs from a node: container requests (init containers
// and sidecars as the kubelet counts them), pod overhead, and one pod slot.
func PodRequests(pod *corev1.Pod) Resources {
	var r Resources
	if len(pod.Spec.InitContainers) == 0 && pod.Spec.Overhead == nil && pod.Spec.Resources == nil {
		// Most pods: the sum of their containers, added here without the maps the
		// general helper allocates, since a consolidation decision asks this for
		// every pod of the cluster several times.
		for i := range pod.Spec.Containers {
			r = r.Add(FromResourceList(pod.Spec.Containers[i].Resources.Requests))
		}
	} else {
		r = FromResourceList(resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{}))
	}
	r.Pods = 1
	return r
}

// ToResourceList converts back, for status fields and output.
func (r Resources) ToResourceList() corev1.ResourceList {
	rl := corev1.ResourceList{
		corev1.ResourceCPU:    *resource.NewMilliQuantity(r.MilliCPU, resource.DecimalSI),
		corev1.ResourceMemory: *resource.NewQuantity(r.Memory, resource.BinarySI),
		corev1.ResourcePods:   *resource.NewQuantity(r.Pods, resource.DecimalSI),
	}
	if r.EphemeralStorage > 0 {
		rl[corev1.ResourceEphemeralStorage] = *resource.NewQuantity(r.EphemeralStorage, resource.BinarySI)
	}
	for k, v := range r.Extended {
		rl[k] = *resource.NewQuantity(v, resource.DecimalSI)
	}
	return rl
}

// Add returns r + o.
func (r Resources) Add(o Resources) Resources {
	out := Resources{
		MilliCPU: r.MilliCPU + o.MilliCPU, Memory: r.Memory + o.Memory,
		Pods: r.Pods + o.Pods, EphemeralStorage: r.EphemeralStorage + o.EphemeralStorage,
	}
	if len(r.Extended) > 0 || len(o.Extended) > 0 {
		out.Extended = make(map[corev1.ResourceName]int64, len(r.Extended)+len(o.Extended))
		for k, v := range r.Extended {
			out.Extended[k] += v
		}
		for k, v := range o.Extended {
			out.Extended[k] += v
		}
	}
	return out
}

// Sub returns r - o.
func (r Resources) Sub(o Resources) Resources {
	neg := Resources{MilliCPU: -o.MilliCPU, Memory: -o.Memory, Pods: -o.Pods, EphemeralStorage: -o.EphemeralStorage}
	if len(o.Extended) > 0 {
		neg.Extended = make(map[corev1.ResourceName]int64, len(o.Extended))
		for k, v := range o.Extended {
			neg.Extended[k] = -v
		}
	}
	return r.Add(neg)
}

// Times returns n copies of r.
func (r Resources) Times(n int64) Resources {
	out := Resources{MilliCPU: r.MilliCPU * n, Memory: r.Memory * n, Pods: r.Pods * n, EphemeralStorage: r.EphemeralStorage * n}
	if len(r.Extended) > 0 {
		out.Extended = make(map[corev1.ResourceName]int64, len(r.Extended))
		for k, v := range r.Extended {
			out.Extended[k] = v * n
		}
	}
	return out
}

// atLeastZero clamps negative amounts to zero.
func (r Resources) atLeastZero() Resources {
	out := Resources{MilliCPU: max(r.MilliCPU, 0), Memory: max(r.Memory, 0), Pods: max(r.Pods, 0), EphemeralStorage: max(r.EphemeralStorage, 0)}
	for k, v := range r.Extended {
		if v > 0 {
			if out.Extended == nil {
				out.Extended = map[corev1.ResourceName]int64{}
			}
			out.Extended[k] = v
		}
	}
	return out
}

// Fits reports whether r fits within capacity.
func (r Resources) Fits(capacity Resources) bool {
	if r.MilliCPU > capacity.MilliCPU || r.Memory > capacity.Memory || r.Pods > capacity.Pods || r.EphemeralStorage > capacity.EphemeralStorage {
		return false
	}
	for k, v := range r.Extended {
		if v > 0 && v > capacity.Extended[k] {
			return false
		}
	}
	return true
}

// Exceeding names the resources of r that capacity cannot hold, for error messages.
func (r Resources) Exceeding(capacity Resources) []string {
	var out []string
	if r.MilliCPU > capacity.MilliCPU {
		out = append(out, "cpu")
	}
	if r.Memory > capacity.Memory {
		out = append(out, "memory")
	}
	if r.Pods > capacity.Pods {
		out = append(out, "pods")
	}
	if r.EphemeralStorage > capacity.EphemeralStorage {
		out = append(out, "ephemeral-storage")
	}
	for k, v := range r.Extended {
		if v > capacity.Extended[k] {
			out = append(out, string(k))
		}
	}
	sort.Strings(out)
	return out
}

func (r Resources) String() string {
	parts := []string{
		fmt.Sprintf("cpu=%s", resource.NewMilliQuantity(r.MilliCPU, resource.DecimalSI)),
		fmt.Sprintf("memory=%s", resource.NewQuantity(r.Memory, resource.BinarySI)),
		fmt.Sprintf("pods=%d", r.Pods),
	}
	if r.EphemeralStorage > 0 {
		parts = append(parts, fmt.Sprintf("ephemeral-storage=%s", resource.NewQuantity(r.EphemeralStorage, resource.BinarySI)))
	}
	keys := make([]string, 0, len(r.Extended))
	for k := range r.Extended {
		keys = append(keys, string(k))
	}
	sort.Strings(keys)
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s=%d", k, r.Extended[corev1.ResourceName(k)]))
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

// WithRequestsFromLimits is spec with each container's missing requests set to its
// limits, as the API server defaults a Pod when it admits it. Pods read from the
// API have had it done; a pod template (a Deployment's, a DaemonSet's) has not, so
// a container that sets only limits would otherwise be planned as asking for
// nothing. spec is not modified: containers that change are copies.
func WithRequestsFromLimits(spec corev1.PodSpec) corev1.PodSpec {
	spec.Containers = containersWithRequestsFromLimits(spec.Containers)
	spec.InitContainers = containersWithRequestsFromLimits(spec.InitContainers)
	return spec
}

func containersWithRequestsFromLimits(containers []corev1.Container) []corev1.Container {
	var out []corev1.Container
	for i := range containers {
		c := &containers[i]
		missing := false
		for name := range c.Resources.Limits {
			if _, ok := c.Resources.Requests[name]; !ok {
				missing = true
				break
			}
		}
		if !missing {
			continue
		}
		if out == nil {
			out = append([]corev1.Container(nil), containers...)
		}
		requests := c.Resources.Requests.DeepCopy()
		if requests == nil {
			requests = corev1.ResourceList{}
		}
		for name, q := range c.Resources.Limits {
			if _, ok := requests[name]; !ok {
				requests[name] = q.DeepCopy()
			}
		}
		out[i].Resources.Requests = requests
	}
	if out == nil {
		return containers
	}
	return out
}

// TemplatePodSpec is the spec of a pod that stands for a template's pods before
// they exist (a buffer's, a ProvisioningRequest's): its limits as requests where it
// sets none (the API server defaults a Pod so, not a template), bound nowhere, and
// without the claims to volumes that a copy cannot mount.
func TemplatePodSpec(template corev1.PodTemplateSpec) corev1.PodSpec {
	spec := WithRequestsFromLimits(*template.Spec.DeepCopy())
	spec.NodeName = ""
	dropped := map[string]bool{}
	var volumes []corev1.Volume
	for _, v := range spec.Volumes {
		if v.PersistentVolumeClaim != nil || v.Ephemeral != nil {
			dropped[v.Name] = true
			continue
		}
		volumes = append(volumes, v)
	}
	spec.Volumes = volumes
	for _, containers := range [][]corev1.Container{spec.Containers, spec.InitContainers} {
		for i := range containers {
			containers[i].VolumeMounts = slices.DeleteFunc(containers[i].VolumeMounts, func(m corev1.VolumeMount) bool { return dropped[m.Name] })
		}
	}
	return spec
}
