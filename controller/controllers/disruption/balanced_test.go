package disruption

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/controller/metrics"
)

// TestBalancedConsolidationReconcile runs the controller on a Balanced pool of
// three 2-cpu nodes: "keep" (two pods of 400m), "busy" (three of 600m), both held
// by a do-not-disrupt pod, and "old" (two of 400m, which fit on keep). Deleting old saves a third of the pool's $/h.
// With ordinary pods it evicts 3 of the pool's 10 of disruption cost (score 1.11):
// old goes, with Karpenter's ConsolidationApproved event. With pods that declare
// the highest pod-deletion-cost it evicts 21 of 28 (score 0.44): old stays.
func TestBalancedConsolidationReconcile(t *testing.T) {
	for _, tc := range []struct {
		name         string
		deletionCost string
		removed      bool
		event        string
	}{
		{"ordinary pods", "", true, "Normal ConsolidationApproved score 1.11 >= threshold 0.50 (k: 2, savings 33.3%, disruption 30.0%)"},
		{"costly pods", "2147483647", false, `Normal Unconsolidatable NodePool "default" (consolidationPolicy Balanced) rejects the move: score 0.44 < threshold 0.50 (k: 2, savings 33.3%, disruption 75.0%)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			now := time.Date(2026, 11, 23, 11, 0, 0, 0, time.UTC)
			keep, keepNode := initializedClaim("keep", now)
			busy, busyNode := initializedClaim("busy", now)
			objs := []client.Object{keep, keepNode, busy, busyNode}
			pod := func(name, node, cpu, deletionCost string) *corev1.Pod {
				controller := true
				p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID(name + "-uid"),
					OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web", UID: "rs", Controller: &controller}}},
					Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
						Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse("128Mi")}}}}},
					Status: corev1.PodStatus{Phase: corev1.PodRunning}}
				if deletionCost != "" {
					p.Annotations = map[string]string{corev1.PodDeletionCost: deletionCost}
				}
				return p
			}
			objs = append(objs, pod("k1", keepNode.Name, "400m", ""), pod("k2", keepNode.Name, "400m", ""),
				pod("b1", busyNode.Name, "600m", ""), pod("b2", busyNode.Name, "600m", ""), pod("b3", busyNode.Name, "600m", ""),
				pod("o1", "old-node", "400m", tc.deletionCost), pod("o2", "old-node", "400m", tc.deletionCost))
			objs[4].SetAnnotations(map[string]string{v1.DoNotDisruptAnnotationKey: "true"})
			objs[6].SetAnnotations(map[string]string{v1.DoNotDisruptAnnotationKey: "true"})
			f := newRestartFixture(t, nil, false, objs, interceptor.Funcs{})
			recorder := record.NewFakeRecorder(100)
			f.ctrl.recorder = recorder
			ctx := context.Background()
			pool := &v1.NodePool{}
			if err := f.kube.Get(ctx, client.ObjectKey{Name: "default"}, pool); err != nil {
				t.Fatal(err)
			}
			pool.Spec.Disruption.ConsolidationPolicy = v1.ConsolidationPolicyBalanced
			pool.Spec.Disruption.ConsolidateAfter = v1.MustParseNillableDuration("0s")
			pool.Spec.Disruption.Budgets = []v1.Budget{{Nodes: "100%"}}
			if err := f.kube.Update(ctx, pool); err != nil {
				t.Fatal(err)
			}
			decision := "rejected"
			if tc.removed {
				decision = "approved"
			}
			moves := metrics.ConsolidationMoves.WithLabelValues(decision, "default", "Balanced")
			before := testutil.ToFloat64(moves)
			if err := f.reconcile(t); err != nil {
				t.Fatal(err)
			}
			f.clock.Step(DefaultOptions().ValidationDelay + time.Second)
			if err := f.reconcile(t); err != nil {
				t.Fatal(err)
			}
			nc := f.oldClaim(t)
			if removed := nc == nil || nc.DeletionTimestamp != nil; removed != tc.removed {
				t.Fatalf("old removed: %v, want %v", removed, tc.removed)
			}
			if got := testutil.ToFloat64(moves) - before; got < 1 {
				t.Errorf("karpenter_consolidation_moves_total{decision=%q} rose by %v", decision, got)
			}
			events := drain(recorder)
			if tc.event != "" && !strings.Contains(events, tc.event) {
				t.Errorf("no %q event:\n%s", tc.event, events)
			}
			if !tc.removed && strings.Contains(events, "ConsolidationApproved") {
				t.Errorf("an approval for a rejected move:\n%s", events)
			}
		})
	}
}
