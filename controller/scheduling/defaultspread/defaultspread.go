// Package defaultspread gives pods the cluster's default topology spread
// constraints as kube-scheduler does (its PodTopologySpread plugin's
// defaultConstraints, which Karpenter v1.15 mirrors from --scheduler-config): a pod
// that declares no constraints of its own is planned under the defaults, with a
// selector deduced from the Services that select it and its controller's
// selector. Planning without them buys too few nodes: kube-scheduler then keeps
// the extra pods pending. Pure: the objects are handed in.
package defaultspread

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"
)

// Config is Karpenter's --scheduler-config document: the parts of the cluster's
// kube-scheduler configuration the plan must mirror. Its shape is Karpenter's, not
// KubeSchedulerConfiguration's, so one value serves both controllers.
type Config struct {
	PodTopologySpread *PodTopologySpread `json:"podTopologySpread,omitempty"`
}

// PodTopologySpread is kube-scheduler's PodTopologySpread plugin arguments.
type PodTopologySpread struct {
	DefaultConstraints []corev1.TopologySpreadConstraint `json:"defaultConstraints,omitempty"`
}

// Parse reads a --scheduler-config value; empty is no configuration. A document
// kube-scheduler would refuse is refused, naming the field, so the controller
// fails at start rather than plan differently from the scheduler.
func Parse(raw string) (*Config, error) {
	if strings.TrimSpace(raw) == "" {
		return nil, nil
	}
	c := &Config{}
	if err := yaml.UnmarshalStrict([]byte(raw), c); err != nil {
		return nil, fmt.Errorf("reading it as {podTopologySpread: {defaultConstraints: [...]}}: %w", err)
	}
	return c, c.validate()
}

// Constraints are the default constraints; none for a nil Config.
func (c *Config) Constraints() []corev1.TopologySpreadConstraint {
	if c == nil || c.PodTopologySpread == nil {
		return nil
	}
	return c.PodTopologySpread.DefaultConstraints
}

// validate is kube-scheduler's ValidatePodTopologySpreadArgs, as Karpenter applies it.
func (c *Config) validate() error {
	cs := c.Constraints()
	var errs []error
	for i, tsc := range cs {
		field := fmt.Sprintf("podTopologySpread.defaultConstraints[%d]", i)
		switch {
		case tsc.MaxSkew <= 0:
			errs = append(errs, fmt.Errorf("%s.maxSkew is %d: it must be greater than 0", field, tsc.MaxSkew))
		case tsc.TopologyKey == "":
			errs = append(errs, fmt.Errorf("%s.topologyKey is empty: name a node label such as topology.kubernetes.io/zone", field))
		case len(validation.IsQualifiedName(tsc.TopologyKey)) > 0:
			errs = append(errs, fmt.Errorf("%s.topologyKey %q is not a label name: %s", field, tsc.TopologyKey, strings.Join(validation.IsQualifiedName(tsc.TopologyKey), ", ")))
		case tsc.WhenUnsatisfiable != corev1.DoNotSchedule && tsc.WhenUnsatisfiable != corev1.ScheduleAnyway:
			errs = append(errs, fmt.Errorf("%s.whenUnsatisfiable %q: use %s or %s", field, tsc.WhenUnsatisfiable, corev1.DoNotSchedule, corev1.ScheduleAnyway))
		case tsc.LabelSelector != nil:
			// kube-scheduler deduces each pod's selector; a fixed one would count
			// an unrelated set of pods for every other workload.
			errs = append(errs, fmt.Errorf("%s.labelSelector must not be set: the selector is deduced for each pod; remove it", field))
		case len(tsc.MatchLabelKeys) > 0:
			errs = append(errs, fmt.Errorf("%s.matchLabelKeys must not be set: kube-scheduler ignores it on default constraints; remove it", field))
		}
		for j := range i {
			if cs[j].TopologyKey == tsc.TopologyKey && cs[j].WhenUnsatisfiable == tsc.WhenUnsatisfiable {
				errs = append(errs, fmt.Errorf("%s repeats [%d] (%s, %s): keep one", field, j, tsc.TopologyKey, tsc.WhenUnsatisfiable))
			}
		}
	}
	return errors.Join(errs...)
}

// Workloads are what kube-scheduler deduces a pod's default selector from.
type Workloads struct {
	Services               []corev1.Service
	ReplicaSets            []appsv1.ReplicaSet
	StatefulSets           []appsv1.StatefulSet
	ReplicationControllers []corev1.ReplicationController
}

// Injector applies the defaults to pods of one cluster view.
type Injector struct {
	constraints []corev1.TopologySpreadConstraint
	services    map[string][]*corev1.Service // by namespace
	owners      map[ownerKey]*contribution
	// selectors caches the deduced selector of pods with the same inputs (their
	// namespace, controller and labels): every pod of a workload has the same.
	selectors map[selectorKey]*metav1.LabelSelector
}

type ownerKey struct {
	kind            schema.GroupKind
	namespace, name string
}

type selectorKey struct {
	namespace string
	owner     ownerKey
	labels    string
}

// contribution is what a controller adds to the services' selector, folded in as
// kube-scheduler's helper.DefaultSelector does: a ReplicationController's labels
// overwrite the services' on a shared key; a ReplicaSet's or StatefulSet's selector
// is ANDed on.
type contribution struct {
	matchLabels      map[string]string
	matchExpressions []metav1.LabelSelectorRequirement
}

var (
	replicationController = schema.GroupKind{Kind: "ReplicationController"}
	replicaSet            = schema.GroupKind{Group: appsv1.GroupName, Kind: "ReplicaSet"}
	statefulSet           = schema.GroupKind{Group: appsv1.GroupName, Kind: "StatefulSet"}
)

// NewInjector applies constraints to pods of the cluster whose workloads are w; with
// no constraints it changes no pod.
func NewInjector(constraints []corev1.TopologySpreadConstraint, w Workloads) *Injector {
	in := &Injector{constraints: constraints, services: map[string][]*corev1.Service{}, owners: map[ownerKey]*contribution{}, selectors: map[selectorKey]*metav1.LabelSelector{}}
	if len(constraints) == 0 {
		return in
	}
	for i := range w.Services {
		s := &w.Services[i]
		in.services[s.Namespace] = append(in.services[s.Namespace], s)
	}
	for i := range w.ReplicationControllers {
		rc := &w.ReplicationControllers[i]
		var c *contribution
		if len(rc.Spec.Selector) > 0 {
			c = &contribution{matchLabels: maps.Clone(rc.Spec.Selector)}
		}
		in.owners[ownerKey{replicationController, rc.Namespace, rc.Name}] = c
	}
	for i := range w.ReplicaSets {
		rs := &w.ReplicaSets[i]
		in.owners[ownerKey{replicaSet, rs.Namespace, rs.Name}] = &contribution{matchExpressions: requirements(rs.Spec.Selector)}
	}
	for i := range w.StatefulSets {
		ss := &w.StatefulSets[i]
		in.owners[ownerKey{statefulSet, ss.Namespace, ss.Name}] = &contribution{matchExpressions: requirements(ss.Spec.Selector)}
	}
	return in
}

// Applies says whether any pod can change.
func (in *Injector) Applies() bool { return len(in.constraints) > 0 }

// Pod is the pod as kube-scheduler places it: the pod itself when it declares
// constraints of its own (they replace the defaults whole) or no selector can be
// deduced for it; otherwise a copy carrying the defaults, each with the deduced
// selector. The copy shares everything else with the pod: read it only.
func (in *Injector) Pod(p *corev1.Pod) *corev1.Pod {
	if len(in.constraints) == 0 || len(p.Spec.TopologySpreadConstraints) > 0 {
		return p
	}
	selector := in.selector(p)
	if selector == nil {
		return p
	}
	out := *p
	out.Spec.TopologySpreadConstraints = make([]corev1.TopologySpreadConstraint, len(in.constraints))
	for i := range in.constraints {
		out.Spec.TopologySpreadConstraints[i] = *in.constraints[i].DeepCopy()
		out.Spec.TopologySpreadConstraints[i].LabelSelector = selector.DeepCopy()
	}
	return &out
}

func (in *Injector) selector(p *corev1.Pod) *metav1.LabelSelector {
	key := selectorKey{namespace: p.Namespace, labels: labels.Set(p.Labels).String()}
	if owner := metav1.GetControllerOfNoCopy(p); owner != nil {
		if gv, err := schema.ParseGroupVersion(owner.APIVersion); err == nil {
			key.owner = ownerKey{gv.WithKind(owner.Kind).GroupKind(), p.Namespace, owner.Name}
		}
	}
	if s, ok := in.selectors[key]; ok {
		return s
	}
	s := in.deduce(p, key.owner)
	in.selectors[key] = s
	return s
}

// deduce is kube-scheduler's helper.DefaultSelector: the selectors of the pod's
// Services merged, then its controller's. An owner kube-scheduler does not read
// (a Job, a DaemonSet) or cannot find contributes nothing.
func (in *Injector) deduce(p *corev1.Pod, owner ownerKey) *metav1.LabelSelector {
	matchLabels := map[string]string{}
	for _, s := range in.services[p.Namespace] {
		// A Service without a selector selects no pods.
		if s.Spec.Selector != nil && labels.SelectorFromValidatedSet(s.Spec.Selector).Matches(labels.Set(p.Labels)) {
			maps.Copy(matchLabels, s.Spec.Selector)
		}
	}
	var matchExpressions []metav1.LabelSelectorRequirement
	if c := in.owners[owner]; c != nil {
		maps.Copy(matchLabels, c.matchLabels)
		matchExpressions = c.matchExpressions
	}
	if len(matchLabels) == 0 && len(matchExpressions) == 0 {
		// An empty selector would count every pod of the namespace; kube-scheduler
		// gives such a pod no default constraint.
		return nil
	}
	if len(matchLabels) == 0 {
		matchLabels = nil
	}
	return &metav1.LabelSelector{MatchLabels: matchLabels, MatchExpressions: matchExpressions}
}

// requirements is a selector as expressions (matchLabels as single-value In), so
// it can be ANDed onto another; it shares nothing with the selector.
func requirements(s *metav1.LabelSelector) []metav1.LabelSelectorRequirement {
	if s == nil {
		return nil
	}
	out := make([]metav1.LabelSelectorRequirement, 0, len(s.MatchLabels)+len(s.MatchExpressions))
	for _, k := range slices.Sorted(maps.Keys(s.MatchLabels)) {
		out = append(out, metav1.LabelSelectorRequirement{Key: k, Operator: metav1.LabelSelectorOpIn, Values: []string{s.MatchLabels[k]}})
	}
	for i := range s.MatchExpressions {
		out = append(out, *s.MatchExpressions[i].DeepCopy())
	}
	return out
}
