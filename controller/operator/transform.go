package operator

import (
	corev1 "k8s.io/api/core/v1"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
)

// lastAppliedAnnotation is kubectl's copy of the whole applied object: often the
// largest thing on a pod, and never read here.
const lastAppliedAnnotation = "kubectl.kubernetes.io/last-applied-configuration"

// trimPod drops from a cached pod what the controller never reads, so the cache of
// a large cluster's pods stays small: managed fields, kubectl's last-applied copy,
// each container's command line, environment, mounts, probes and security
// settings, volume sources other than claims (a projected token is on every
// pod), ephemeral containers and container statuses. What planning, draining and
// the metrics read is kept: metadata, scheduling constraints, requests and
// limits, host ports, init containers' restart policy, claim volumes, priority,
// grace period, phase and conditions. Pods are never written back from the cache
// (only evicted or deleted), so nothing dropped here can be lost.
func trimPod(obj any) (any, error) {
	obj, err := stripManagedFields(obj)
	if err != nil {
		return obj, err
	}
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	delete(pod.Annotations, lastAppliedAnnotation)
	trimContainers(pod.Spec.Containers)
	trimContainers(pod.Spec.InitContainers)
	pod.Spec.EphemeralContainers = nil
	for i := range pod.Spec.Volumes {
		v := &pod.Spec.Volumes[i]
		v.VolumeSource = corev1.VolumeSource{PersistentVolumeClaim: v.PersistentVolumeClaim, Ephemeral: v.Ephemeral}
	}
	pod.Status.ContainerStatuses, pod.Status.InitContainerStatuses, pod.Status.EphemeralContainerStatuses = nil, nil, nil
	return pod, nil
}

func trimContainers(containers []corev1.Container) {
	for i := range containers {
		c := &containers[i]
		*c = corev1.Container{Name: c.Name, Resources: c.Resources, Ports: c.Ports, RestartPolicy: c.RestartPolicy}
	}
}

// stripManagedFields is controller-runtime's default transform, which a per-type
// transform replaces.
var stripManagedFields = crcache.TransformStripManagedFields()
