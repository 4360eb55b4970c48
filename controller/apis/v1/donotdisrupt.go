package v1

import (
	"time"

	corev1 "k8s.io/api/core/v1"
)

// PodDoNotDisrupt reports whether the pod's karpenter.sh/do-not-disrupt annotation
// protects it at now, and until when ("true" protects for good: a zero until). The
// value may be a duration counted from the pod's start, as in Karpenter: a job that
// must not be moved in its first hour says "1h" and needs no one to remove the
// annotation afterwards. A pod not started yet is protected from now; any other
// value ("false", a typo) protects nothing, as Karpenter reads it.
func PodDoNotDisrupt(pod *corev1.Pod, now time.Time) (protected bool, until time.Time) {
	v, ok := pod.Annotations[DoNotDisruptAnnotationKey]
	if !ok {
		return false, time.Time{}
	}
	if v == "true" {
		return true, time.Time{}
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return false, time.Time{}
	}
	start := now
	if pod.Status.StartTime != nil {
		start = pod.Status.StartTime.Time
	}
	until = start.Add(d)
	return now.Before(until), until
}
