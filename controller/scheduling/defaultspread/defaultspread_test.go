package defaultspread

import (
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

var zoneSpread = []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: corev1.LabelTopologyZone, WhenUnsatisfiable: corev1.DoNotSchedule}}

func pod(ns string, labels map[string]string, owner *metav1.OwnerReference) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: ns, Labels: labels}}
	if owner != nil {
		p.OwnerReferences = []metav1.OwnerReference{*owner}
	}
	return p
}

func controlledBy(apiVersion, kind, name string) *metav1.OwnerReference {
	yes := true
	return &metav1.OwnerReference{APIVersion: apiVersion, Kind: kind, Name: name, UID: types.UID("uid-" + name), Controller: &yes}
}

func service(ns string, selector map[string]string) corev1.Service {
	return corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "svc", Namespace: ns}, Spec: corev1.ServiceSpec{Selector: selector}}
}

func newReplicaSet(name string, selector *metav1.LabelSelector) appsv1.ReplicaSet {
	return appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}, Spec: appsv1.ReplicaSetSpec{Selector: selector}}
}

// Karpenter v1.15's DefaultTopologySpreadInjector cases, each as the selector the
// pod's constraints carry (nil: the pod is left as it is).
func TestDeducedSelectors(t *testing.T) {
	in := func(k, v string) metav1.LabelSelectorRequirement {
		return metav1.LabelSelectorRequirement{Key: k, Operator: metav1.LabelSelectorOpIn, Values: []string{v}}
	}
	rcController := corev1.ReplicationController{ObjectMeta: metav1.ObjectMeta{Name: "rc", Namespace: "default"}, Spec: corev1.ReplicationControllerSpec{Selector: map[string]string{"app": "rc-value"}}}
	for _, tc := range []struct {
		name string
		w    Workloads
		pod  *corev1.Pod
		want *metav1.LabelSelector
	}{
		{"a ReplicaSet's selector, not the pod's labels",
			Workloads{ReplicaSets: []appsv1.ReplicaSet{newReplicaSet("web", &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}})}},
			pod("default", map[string]string{"app": "web", "pod-template-hash": "abc"}, controlledBy("apps/v1", "ReplicaSet", "web")),
			&metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{in("app", "web")}}},
		{"a StatefulSet's selector, not its pods' volatile labels",
			Workloads{StatefulSets: []appsv1.StatefulSet{{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "default"}, Spec: appsv1.StatefulSetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}}}}}},
			pod("default", map[string]string{"app": "db", "statefulset.kubernetes.io/pod-name": "db-0"}, controlledBy("apps/v1", "StatefulSet", "db")),
			&metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{in("app", "db")}}},
		{"a ReplicaSet's matchExpressions verbatim",
			Workloads{ReplicaSets: []appsv1.ReplicaSet{newReplicaSet("web", &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "tier", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"db"}}}})}},
			pod("default", map[string]string{"tier": "front"}, controlledBy("apps/v1", "ReplicaSet", "web")),
			&metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "tier", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"db"}}}}},
		{"a ReplicationController's selector",
			Workloads{ReplicationControllers: []corev1.ReplicationController{rcController}},
			pod("default", map[string]string{"app": "rc-value"}, controlledBy("v1", "ReplicationController", "rc")),
			&metav1.LabelSelector{MatchLabels: map[string]string{"app": "rc-value"}}},
		{"no selector from a Job",
			Workloads{}, pod("default", map[string]string{"app": "batch"}, controlledBy("batch/v1", "Job", "batch")), nil},
		{"no selector from an owner that is not the controller",
			Workloads{ReplicaSets: []appsv1.ReplicaSet{newReplicaSet("web", &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}})}},
			func() *corev1.Pod {
				p := pod("default", map[string]string{"app": "web"}, controlledBy("apps/v1", "ReplicaSet", "web"))
				p.OwnerReferences[0].Controller = nil
				return p
			}(), nil},
		{"an owner that no longer exists contributes nothing",
			Workloads{}, pod("default", map[string]string{"app": "web"}, controlledBy("apps/v1", "ReplicaSet", "gone")), nil},
		{"a matching Service's selector",
			Workloads{Services: []corev1.Service{service("default", map[string]string{"app": "web"})}},
			pod("default", map[string]string{"app": "web", "x": "y"}, nil),
			&metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}},
		{"every matching Service's selector merged",
			Workloads{Services: []corev1.Service{service("default", map[string]string{"app": "web"}), service("default", map[string]string{"tier": "front"})}},
			pod("default", map[string]string{"app": "web", "tier": "front"}, nil),
			&metav1.LabelSelector{MatchLabels: map[string]string{"app": "web", "tier": "front"}}},
		{"not a Service that does not match",
			Workloads{Services: []corev1.Service{service("default", map[string]string{"app": "other"})}},
			pod("default", map[string]string{"app": "web"}, nil), nil},
		{"not a Service without a selector",
			Workloads{Services: []corev1.Service{service("default", nil)}},
			pod("default", map[string]string{"app": "web"}, nil), nil},
		{"nothing from a Service with an empty selector",
			Workloads{Services: []corev1.Service{service("default", map[string]string{})}},
			pod("default", map[string]string{"app": "web"}, nil), nil},
		{"not a matching Service in another namespace",
			Workloads{Services: []corev1.Service{service("other", map[string]string{"app": "web"})}},
			pod("default", map[string]string{"app": "web"}, nil), nil},
		{"a Service's selector and the owner's together",
			Workloads{Services: []corev1.Service{service("default", map[string]string{"tier": "front"})},
				ReplicaSets: []appsv1.ReplicaSet{newReplicaSet("web", &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}})}},
			pod("default", map[string]string{"app": "web", "tier": "front"}, controlledBy("apps/v1", "ReplicaSet", "web")),
			&metav1.LabelSelector{MatchLabels: map[string]string{"tier": "front"}, MatchExpressions: []metav1.LabelSelectorRequirement{in("app", "web")}}},
		{"a ReplicationController's label overwrites a Service's on the same key",
			Workloads{Services: []corev1.Service{service("default", map[string]string{"app": "svc-value"})}, ReplicationControllers: []corev1.ReplicationController{rcController}},
			pod("default", map[string]string{"app": "svc-value"}, controlledBy("v1", "ReplicationController", "rc")),
			&metav1.LabelSelector{MatchLabels: map[string]string{"app": "rc-value"}}},
		{"a ReplicaSet's conflicting selector is ANDed on, selecting nothing",
			Workloads{Services: []corev1.Service{service("default", map[string]string{"app": "svc-value"})},
				ReplicaSets: []appsv1.ReplicaSet{newReplicaSet("web", &metav1.LabelSelector{MatchLabels: map[string]string{"app": "rs-value"}})}},
			pod("default", map[string]string{"app": "svc-value"}, controlledBy("apps/v1", "ReplicaSet", "web")),
			&metav1.LabelSelector{MatchLabels: map[string]string{"app": "svc-value"}, MatchExpressions: []metav1.LabelSelectorRequirement{in("app", "rs-value")}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := NewInjector(zoneSpread, tc.w).Pod(tc.pod)
			if tc.want == nil {
				if got != tc.pod {
					t.Fatalf("pod changed: %+v", got.Spec.TopologySpreadConstraints)
				}
				return
			}
			if len(got.Spec.TopologySpreadConstraints) != 1 {
				t.Fatalf("constraints %+v, want the one default", got.Spec.TopologySpreadConstraints)
			}
			if s := got.Spec.TopologySpreadConstraints[0].LabelSelector; !equality.Semantic.DeepEqual(s, tc.want) {
				t.Errorf("selector %+v, want %+v", s, tc.want)
			}
			if len(tc.pod.Spec.TopologySpreadConstraints) != 0 {
				t.Errorf("the pod read was written to")
			}
		})
	}
}

func TestSelectorsAreNotSharedAcrossShapes(t *testing.T) {
	w := Workloads{Services: []corev1.Service{service("default", map[string]string{"app": "web"}), service("other", map[string]string{"app": "api"})}}
	in := NewInjector(zoneSpread, w)
	web := in.Pod(pod("default", map[string]string{"app": "web"}, nil))
	api := in.Pod(pod("default", map[string]string{"app": "api"}, nil))
	if len(web.Spec.TopologySpreadConstraints) != 1 || len(api.Spec.TopologySpreadConstraints) != 0 {
		t.Errorf("same namespace, different labels: web %v, api %v", web.Spec.TopologySpreadConstraints, api.Spec.TopologySpreadConstraints)
	}
	otherNS := in.Pod(pod("other", map[string]string{"app": "web"}, nil))
	if len(otherNS.Spec.TopologySpreadConstraints) != 0 {
		t.Errorf("a pod labelled as default's Service selects, in another namespace, got %v", otherNS.Spec.TopologySpreadConstraints)
	}
}

func TestInjection(t *testing.T) {
	w := Workloads{Services: []corev1.Service{service("default", map[string]string{"app": "web"})}}
	own := pod("default", map[string]string{"app": "web"}, nil)
	own.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: 3, TopologyKey: corev1.LabelHostname, WhenUnsatisfiable: corev1.ScheduleAnyway}}
	if got := NewInjector(zoneSpread, w).Pod(own); got != own {
		t.Errorf("a pod with its own constraints took the defaults: %v", got.Spec.TopologySpreadConstraints)
	}
	plain := pod("default", map[string]string{"app": "web"}, nil)
	if got := NewInjector(nil, w).Pod(plain); got != plain {
		t.Errorf("no defaults configured, yet the pod changed")
	}
	both := []corev1.TopologySpreadConstraint{
		{MaxSkew: 2, TopologyKey: corev1.LabelTopologyZone, WhenUnsatisfiable: corev1.ScheduleAnyway, MinDomains: ptr(int32(3))},
		{MaxSkew: 1, TopologyKey: corev1.LabelHostname, WhenUnsatisfiable: corev1.DoNotSchedule},
	}
	in := NewInjector(both, w)
	a, b := in.Pod(plain), in.Pod(pod("default", map[string]string{"app": "web"}, nil))
	if len(a.Spec.TopologySpreadConstraints) != 2 || a.Spec.TopologySpreadConstraints[0].MaxSkew != 2 || *a.Spec.TopologySpreadConstraints[0].MinDomains != 3 ||
		a.Spec.TopologySpreadConstraints[1].TopologyKey != corev1.LabelHostname {
		t.Fatalf("the configured fields were not kept: %+v", a.Spec.TopologySpreadConstraints)
	}
	// The engine relaxes a pod's ScheduleAnyway constraints in place: no other pod
	// may see that.
	a.Spec.TopologySpreadConstraints[0].MaxSkew = 99
	a.Spec.TopologySpreadConstraints[0].LabelSelector.MatchLabels["app"] = "changed"
	if b.Spec.TopologySpreadConstraints[0].MaxSkew != 2 || b.Spec.TopologySpreadConstraints[0].LabelSelector.MatchLabels["app"] != "web" || both[0].MaxSkew != 2 {
		t.Errorf("pods share their constraints: %+v", b.Spec.TopologySpreadConstraints[0])
	}
}

func ptr[T any](v T) *T { return &v }

func TestParse(t *testing.T) {
	c, err := Parse("podTopologySpread:\n  defaultConstraints:\n  - maxSkew: 1\n    topologyKey: kubernetes.io/hostname\n    whenUnsatisfiable: DoNotSchedule\n")
	if err != nil || len(c.Constraints()) != 1 || c.Constraints()[0].TopologyKey != corev1.LabelHostname {
		t.Fatalf("Parse = %+v, %v", c, err)
	}
	if c, err := Parse("  "); c != nil || err != nil || c.Constraints() != nil {
		t.Errorf("empty: %+v, %v", c, err)
	}
	for doc, want := range map[string]string{
		"podTopologySpread: {defaultConstraints: [{maxSkew: 0, topologyKey: a, whenUnsatisfiable: DoNotSchedule}]}":                                                                 "defaultConstraints[0].maxSkew",
		"podTopologySpread: {defaultConstraints: [{maxSkew: 1, whenUnsatisfiable: DoNotSchedule}]}":                                                                                 "defaultConstraints[0].topologyKey is empty",
		"podTopologySpread: {defaultConstraints: [{maxSkew: 1, topologyKey: 'a b', whenUnsatisfiable: DoNotSchedule}]}":                                                             "not a label name",
		"podTopologySpread: {defaultConstraints: [{maxSkew: 1, topologyKey: a, whenUnsatisfiable: Never}]}":                                                                         "whenUnsatisfiable \"Never\"",
		"podTopologySpread: {defaultConstraints: [{maxSkew: 1, topologyKey: a, whenUnsatisfiable: DoNotSchedule, labelSelector: {}}]}":                                              "labelSelector must not be set",
		"podTopologySpread: {defaultConstraints: [{maxSkew: 1, topologyKey: a, whenUnsatisfiable: DoNotSchedule, matchLabelKeys: [x]}]}":                                            "matchLabelKeys must not be set",
		"podTopologySpread: {defaultConstraints: [{maxSkew: 1, topologyKey: a, whenUnsatisfiable: DoNotSchedule}, {maxSkew: 2, topologyKey: a, whenUnsatisfiable: DoNotSchedule}]}": "defaultConstraints[1] repeats [0]",
		"apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n":                                                                                            "unknown field",
	} {
		if _, err := Parse(doc); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Parse(%q) = %v, want an error saying %q", doc, err, want)
		}
	}
}
