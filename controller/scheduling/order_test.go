package scheduling

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
)

func withPreferredAntiAffinity(key string, match map[string]string) podOpt {
	return func(p *corev1.Pod) {
		a := ensureAffinity(p)
		a.PodAntiAffinity = &corev1.PodAntiAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{
			Weight: 100, PodAffinityTerm: corev1.PodAffinityTerm{TopologyKey: key, LabelSelector: &metav1.LabelSelector{MatchLabels: match}},
		}}}
	}
}

// The plan must not depend on pod names. Ten equal pods that would rather not
// share a node with any of three pods spread over zones: whichever sorts first,
// the pods whose rules are required are placed before those whose rules are only
// preferences.
func TestPlanDoesNotDependOnPodNames(t *testing.T) {
	build := func(preferring, spreading string) []*corev1.Pod {
		var out []*corev1.Pod
		for i := range 10 {
			out = append(out, pod(fmt.Sprintf("%s-%d", preferring, i), "1", "1Gi", withPodLabel("app", "web"), withPreferredAntiAffinity(v1.LabelHostname, map[string]string{"app": "db"})))
		}
		for i := range 3 {
			out = append(out, pod(fmt.Sprintf("%s-%d", spreading, i), "1", "1Gi", withPodLabel("app", "db"), withSpread(v1.LabelTopologyZone, 1, corev1.DoNotSchedule, map[string]string{"app": "db"})))
		}
		return out
	}
	nodes := func(r *Results) int {
		if len(r.Unschedulable) > 0 {
			t.Fatalf("unschedulable: %v", r.Unschedulable)
		}
		return len(r.NodeClaims)
	}
	first := nodes(solve(t, build("a", "z"), []*v1.NodePool{nodePool("default")}))
	second := nodes(solve(t, build("z", "a"), []*v1.NodePool{nodePool("default")}))
	if first != second {
		t.Errorf("the preferring pods named first plan %d nodes, named last %d: the plan depends on names", first, second)
	}
}
