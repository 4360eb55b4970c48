package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dovetail-sh/dovetail/controller/apis/autoscaling/v1beta1"
	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/tests/localstack"
)

// freeCPU is the cpu the nodes' allocatable leaves after their pods' requests, in
// millicores, and how many claims are being deleted.
func freeCPU(c client.Client) (free int64, deleting int, err error) {
	ctx := context.Background()
	var nodes corev1.NodeList
	if err := c.List(ctx, &nodes); err != nil {
		return 0, 0, err
	}
	var pods corev1.PodList
	if err := c.List(ctx, &pods); err != nil {
		return 0, 0, err
	}
	used := map[string]int64{}
	for _, p := range pods.Items {
		if p.Spec.NodeName == "" || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		for _, ctr := range p.Spec.Containers {
			used[p.Spec.NodeName] += ctr.Resources.Requests.Cpu().MilliValue()
		}
	}
	for _, n := range nodes.Items {
		free += n.Status.Allocatable.Cpu().MilliValue() - used[n.Name]
	}
	var claims v1.NodeClaimList
	if err := c.List(ctx, &claims); err != nil {
		return 0, 0, err
	}
	for _, nc := range claims.Items {
		if nc.DeletionTimestamp != nil {
			deleting++
		}
	}
	return free, deleting, nil
}

func bufferProvisioning(c client.Client, want string) error {
	cb := &v1beta1.CapacityBuffer{}
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: "default", Name: "spare"}, cb); err != nil {
		return err
	}
	ready := meta.FindStatusCondition(cb.Status.Conditions, "ReadyForProvisioning")
	prov := meta.FindStatusCondition(cb.Status.Conditions, "Provisioning")
	if ready == nil || ready.Status != metav1.ConditionTrue || cb.Status.Replicas == nil || *cb.Status.Replicas != 2 || prov == nil || prov.Reason != want {
		return fmt.Errorf("status %+v; want ReadyForProvisioning, 2 replicas, Provisioning %s", cb.Status, want)
	}
	return nil
}

// TestCapacityBufferKeepsSpareCapacity runs the controller with --feature-gates
// CapacityBuffer=true, as the installed ServiceAccount, on a pool that
// consolidates after 1s. A buffer of two 1-cpu copies of a PodTemplate launches
// room for them with no pod asking, and consolidation keeps it. Real pods take
// that room at once; the buffer is then refilled with a new node. Once the buffer
// is deleted, its room is consolidated away.
func TestCapacityBufferKeepsSpareCapacity(t *testing.T) {
	c := startClusterWithGates(t, "CapacityBuffer=true")
	ctx := context.Background()
	must(t, c.Create(ctx, consolidatingPool("default", "1s")))
	web := localstack.Deployment("web", 2, "1", "1Gi")
	must(t, c.Create(ctx, &corev1.PodTemplate{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"}, Template: web.Spec.Template}))
	two := int32(2)
	must(t, c.Create(ctx, &v1beta1.CapacityBuffer{ObjectMeta: metav1.ObjectMeta{Name: "spare", Namespace: "default"},
		Spec: v1beta1.CapacityBufferSpec{PodTemplateRef: &v1beta1.LocalObjectRef{Name: "web"}, Replicas: &two}}))
	eventually(t, 90*time.Second, "room for the buffer's two pods, with no pod asking", func() error {
		free, _, err := freeCPU(c)
		if err != nil {
			return err
		}
		if free < 2000 {
			return fmt.Errorf("%dm of cpu free, want at least 2000m", free)
		}
		return bufferProvisioning(c, "FitsExistingCapacity")
	})
	nodesBefore, _, err := nodeCPU(c)
	must(t, err)
	kept := sample(func() (int, error) { _, deleting, err := freeCPU(c); return deleting, err })

	// Real pods take the room at once, and the buffer is refilled beside them.
	must(t, c.Create(ctx, web))
	pods := allRunning(t, c, "web", 2, 60*time.Second)
	for _, p := range pods {
		n := &corev1.Node{}
		must(t, c.Get(ctx, client.ObjectKey{Name: p.Spec.NodeName}, n))
		if n.CreationTimestamp.After(pods[0].CreationTimestamp.Time) {
			t.Errorf("pod %s waited for node %s; the buffer's room was there before it", p.Name, n.Name)
		}
	}
	eventually(t, 90*time.Second, "the buffer refilled", func() error {
		free, _, err := freeCPU(c)
		if err != nil {
			return err
		}
		if nodes, _, _ := nodeCPU(c); free < 2000 || nodes <= nodesBefore {
			return fmt.Errorf("%dm of cpu free on %d nodes (%d before the pods); want 2000m on more nodes", free, nodes, nodesBefore)
		}
		return bufferProvisioning(c, "FitsExistingCapacity")
	})
	if _, highest := kept.finish(); highest > 0 {
		t.Errorf("%d nodeclaims were deleted while the buffer held their room", highest)
	}

	must(t, c.Delete(ctx, &v1beta1.CapacityBuffer{ObjectMeta: metav1.ObjectMeta{Name: "spare", Namespace: "default"}}))
	eventually(t, 120*time.Second, "the buffer's room consolidated away", func() error {
		free, deleting, err := freeCPU(c)
		if err != nil {
			return err
		}
		if free >= 2000 || deleting > 0 {
			return fmt.Errorf("%dm of cpu free, %d nodeclaims deleting; the web pods need no spare room", free, deleting)
		}
		return nil
	})
	allRunning(t, c, "web", 2, 30*time.Second)
}
