package scheduling

import (
	"sort"

	corev1 "k8s.io/api/core/v1"
)

// MaxPodsPerSolve bounds one solve's pods. A backlog of tens of thousands of
// pending pods is planned a round at a time, so the engine's working set (and the
// controller's memory) stays that of a few thousand pods whatever arrives; every
// round's pods are nominated onto their claims and count in the next one.
const MaxPodsPerSolve = 5000

// OldestFirst is at most limit of the pods, the longest pending first (creation
// time, then UID, so rounds never skip a pod), and how many were left for later.
// Pods a round already found no place for go after the rest, so that a backlog
// nothing can place (a pool at its limit) never holds back newer pods that fit.
// A limit of 0 or less keeps every pod.
func OldestFirst(pods []*corev1.Pod, limit int, tried func(*corev1.Pod) bool) ([]*corev1.Pod, int) {
	if limit <= 0 || len(pods) <= limit {
		return pods, 0
	}
	sorted := append([]*corev1.Pod(nil), pods...)
	sort.Slice(sorted, func(i, j int) bool {
		a, b := sorted[i], sorted[j]
		if ta, tb := tried(a), tried(b); ta != tb {
			return tb
		}
		if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
			return a.CreationTimestamp.Before(&b.CreationTimestamp)
		}
		return a.UID < b.UID
	})
	return sorted[:limit], len(pods) - limit
}
