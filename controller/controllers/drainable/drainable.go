// Package drainable counts the pods a drain of a node would move, read from the cache:
// the I/O beside consolidation's pure rule of which pods those are.
package drainable

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/dovetail-sh/dovetail/controller/consolidation"
)

// Count counts the pods on the node a drain would move, read through the
// cache's spec.nodeName index: what karpenter_pods_disruption_initiated_total adds
// when the node's claim is disrupted. A list that fails counts none, as in
// Karpenter: the metric must not hold up the disruption.
func Count(ctx context.Context, kube client.Reader, node string) int {
	if node == "" {
		return 0
	}
	var pods corev1.PodList
	if err := kube.List(ctx, &pods, client.MatchingFields{"spec.nodeName": node}); err != nil {
		log.FromContext(ctx).V(1).Info("listing the node's pods for the disruption metric", "node", node, "error", err.Error())
		return 0
	}
	ptrs := make([]*corev1.Pod, len(pods.Items))
	for i := range pods.Items {
		ptrs[i] = &pods.Items[i]
	}
	return len(consolidation.Reschedulable(ptrs))
}
