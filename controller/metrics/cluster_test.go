package metrics

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

// The collector splits a node's pods into workload and daemonset sums and gives
// the system overhead as capacity minus allocatable.
func TestClusterCollectorSums(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := corev1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{"karpenter.sh/nodepool": "default"}},
		Status: corev1.NodeStatus{Capacity: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}, Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1930m")}}}
	pod := func(name, cpu string, daemon bool) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}, Spec: corev1.PodSpec{NodeName: "n1",
			Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}}}}},
			Status: corev1.PodStatus{Phase: corev1.PodRunning}}
		if daemon {
			yes := true
			p.OwnerReferences = []metav1.OwnerReference{{Kind: "DaemonSet", Name: "ds", Controller: &yes}}
		}
		return p
	}
	kube := fake.NewClientBuilder().WithScheme(scheme).WithObjects(node, pod("a", "500m", false), pod("b", "250m", false), pod("ds", "100m", true)).Build()
	ch := make(chan prometheus.Metric, 100)
	(&ClusterCollector{Reader: kube}).Collect(ch)
	close(ch)
	got := map[string]float64{}
	for m := range ch {
		var pb dto.Metric
		if err := m.Write(&pb); err != nil {
			t.Fatal(err)
		}
		key := m.Desc().String()
		for _, l := range pb.Label {
			if l.GetName() == "resource_type" && l.GetValue() == "cpu" {
				got[key] = pb.GetGauge().GetValue()
			}
		}
	}
	for desc, want := range map[*prometheus.Desc]float64{descPodRequests: 0.75, descDaemonRequests: 0.1, descAllocatable: 1.93, descOverhead: 0.07, descPodLimits: 0} {
		if v, ok := got[desc.String()]; !ok || v < want-1e-9 || v > want+1e-9 {
			t.Errorf("%s cpu = %v (present %v), want %v", desc, v, ok, want)
		}
	}
}
