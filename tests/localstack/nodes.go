package localstack

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// AddSystemNodes registers n kwok nodes that no NodePool owns, spread over two zones:
// the managed node group a cluster runs its controller on, tainted CriticalAddonsOnly
// as EKS system node groups commonly are, so workloads do not land there.
func AddSystemNodes(ctx context.Context, kube client.Client, n int) error {
	for i := range n {
		name := fmt.Sprintf("system-%d", i)
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name,
			Labels: map[string]string{corev1.LabelHostname: name, corev1.LabelTopologyZone: fmt.Sprintf("us-west-2%c", 'a'+i%2),
				corev1.LabelArchStable: "amd64", corev1.LabelOSStable: "linux"},
			Annotations: map[string]string{"kwok.x-k8s.io/node": "fake"}},
			Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: "CriticalAddonsOnly", Value: "true", Effect: corev1.TaintEffectNoSchedule}}}}
		if err := kube.Create(ctx, node); err != nil {
			return fmt.Errorf("registering system node %s, %w", name, err)
		}
		base := node.DeepCopy()
		capacity := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("16Gi"), corev1.ResourcePods: resource.MustParse("110")}
		node.Status.Capacity, node.Status.Allocatable = capacity, capacity
		if err := kube.Status().Patch(ctx, node, client.MergeFrom(base)); err != nil {
			return fmt.Errorf("setting the capacity of system node %s, %w", name, err)
		}
	}
	return nil
}
