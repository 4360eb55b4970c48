package metrics

import (
	"context"
	"errors"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
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

// Pods that become ready while the controller runs are counted once in the startup
// histogram; pods ready before it started are not; an unreadable cache reports how
// long it has been unreadable.
func TestClusterCollectorPodStartupAndUnsyncedTime(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := corev1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	start := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakeClock(start)
	pod := func(name string, created, ready time.Time) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID(name), CreationTimestamp: metav1.NewTime(created)},
			Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(ready)}}}}
	}
	kube := fake.NewClientBuilder().WithScheme(scheme).WithObjects(
		pod("old", start.Add(-time.Hour), start.Add(-59*time.Minute)),
		pod("new", start.Add(-10*time.Second), start.Add(20*time.Second)),
	).Build()
	collector := &ClusterCollector{Reader: kube, Clock: clk}
	startups := func() (uint64, float64) {
		ch := make(chan prometheus.Metric, 100)
		collector.Collect(ch)
		close(ch)
		for m := range ch {
			if strings.Contains(m.Desc().String(), "karpenter_pods_startup_duration_seconds") {
				var pb dto.Metric
				if err := m.Write(&pb); err != nil {
					t.Fatal(err)
				}
				return pb.GetSummary().GetSampleCount(), pb.GetSummary().GetSampleSum()
			}
		}
		t.Fatal("no karpenter_pods_startup_duration_seconds")
		return 0, 0
	}
	for range 2 {
		if n, sum := startups(); n != 1 || sum != 30 {
			t.Errorf("startup histogram has %d samples summing to %vs; want the new pod's 30s once (a summary, as Karpenter's)", n, sum)
		}
	}

	broken := &ClusterCollector{Reader: failingReader{}, Clock: clk}
	ch := make(chan prometheus.Metric, 10)
	broken.Collect(ch)
	clk.Step(45 * time.Second)
	ch = make(chan prometheus.Metric, 10)
	broken.Collect(ch)
	close(ch)
	for m := range ch {
		if m.Desc() == descUnsyncedTime {
			var pb dto.Metric
			if err := m.Write(&pb); err != nil {
				t.Fatal(err)
			}
			if got := pb.GetGauge().GetValue(); got != 45 {
				t.Errorf("unsynced time %v, want 45", got)
			}
			return
		}
	}
	t.Error("no karpenter_cluster_state_unsynced_time_seconds")
}

type failingReader struct{ client.Reader }

func (failingReader) List(context.Context, client.ObjectList, ...client.ListOption) error {
	return errors.New("cache not readable")
}

// The provisioning pod family follows a pod the provisioner saw: unbound and undecided
// while it waits, its decision timed once, its binding and start observed once.
func TestProvisioningPodTimings(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := corev1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	start := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakeClock(start)
	waiting := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "web-uid", CreationTimestamp: metav1.NewTime(start.Add(-10 * time.Second))},
		Status: corev1.PodStatus{Phase: corev1.PodPending}}
	kube := fake.NewClientBuilder().WithScheme(scheme).WithObjects(waiting).Build()
	collector := &ClusterCollector{Reader: kube, Clock: clk}
	scrape := func() map[string]float64 {
		ch := make(chan prometheus.Metric, 100)
		collector.Collect(ch)
		close(ch)
		out := map[string]float64{}
		for m := range ch {
			var pb dto.Metric
			if err := m.Write(&pb); err != nil {
				t.Fatal(err)
			}
			name := regexp.MustCompile(`fqName: "([^"]+)"`).FindStringSubmatch(m.Desc().String())[1]
			switch {
			case pb.Gauge != nil:
				out[name] = pb.GetGauge().GetValue()
			case pb.Histogram != nil:
				out[name+"_count"] = float64(pb.GetHistogram().GetSampleCount())
				out[name+"_sum"] = pb.GetHistogram().GetSampleSum()
			}
		}
		return out
	}
	decisions := func() uint64 {
		var pb dto.Metric
		if err := PodsSchedulingDecisionDuration.Write(&pb); err != nil {
			t.Fatal(err)
		}
		return pb.GetHistogram().GetSampleCount()
	}
	PodSeen(waiting.UID, start)
	clk.Step(5 * time.Second)
	got := scrape()
	for name, want := range map[string]float64{
		"karpenter_pods_provisioning_unbound_time_seconds":              15,
		"karpenter_pods_provisioning_unstarted_time_seconds":            15,
		"karpenter_pods_provisioning_scheduling_undecided_time_seconds": 5,
		"karpenter_pods_unbound_time_seconds":                           15,
	} {
		if got[name] != want {
			t.Errorf("%s = %v, want %v", name, got[name], want)
		}
	}
	before := decisions()
	PodDecided(waiting.UID, clk.Now())
	PodDecided(waiting.UID, clk.Now().Add(time.Minute))
	if n := decisions() - before; n != 1 {
		t.Errorf("the decision was observed %d times, want once", n)
	}
	if _, undecided := scrape()["karpenter_pods_provisioning_scheduling_undecided_time_seconds"]; undecided {
		t.Error("a decided pod is still reported undecided")
	}
	// Bound 20s after creation, ready 40s after.
	bound := waiting.DeepCopy()
	bound.Spec.NodeName = "n1"
	bound.Status.Phase = corev1.PodRunning
	bound.Status.Conditions = []corev1.PodCondition{
		{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(start.Add(10 * time.Second))},
		{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(start.Add(30 * time.Second))}}
	status := bound.Status
	if err := kube.Update(context.Background(), bound); err != nil {
		t.Fatal(err)
	}
	bound.Status = status
	if err := kube.Status().Update(context.Background(), bound); err != nil {
		t.Fatal(err)
	}
	clk.Step(time.Minute)
	for range 2 {
		got = scrape()
		for name, want := range map[string]float64{
			"karpenter_pods_provisioning_bound_duration_seconds_count":   1,
			"karpenter_pods_provisioning_bound_duration_seconds_sum":     20,
			"karpenter_pods_provisioning_startup_duration_seconds_count": 1,
			"karpenter_pods_provisioning_startup_duration_seconds_sum":   40,
			"karpenter_pods_bound_duration_seconds_count":                1,
		} {
			if got[name] != want {
				t.Errorf("%s = %v, want %v", name, got[name], want)
			}
		}
		if _, unbound := got["karpenter_pods_provisioning_unbound_time_seconds"]; unbound {
			t.Error("a bound pod is still reported unbound")
		}
	}
}
