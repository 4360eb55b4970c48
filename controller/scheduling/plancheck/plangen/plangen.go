// Package plangen generates random scheduling inputs over an instance-type catalog's
// own labels, for the property tests and fuzz targets that hold every plan to
// plancheck: NodePools with few or many requirements, taints, limits and minValues;
// pods with node selectors and required and preferred node affinity using all six
// operators on every label the catalog has (values it has, so that they match
// some types and not others), tolerations, spreads, anti-affinity and host ports;
// DaemonSets; and existing nodes with pods. Pure and deterministic per seed.
package plangen

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strconv"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"

	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/controller/catalog"
	"github.com/dovetail-sh/dovetail/controller/scheduling"
)

// Universe is what the generator draws from: the catalog's types and, per label key,
// the values its types carry.
type Universe struct {
	Types  []*scheduling.InstanceType
	Keys   []string
	Values map[string][]string
}

// NewUniverse reads the label keys and values of types: the instance-type labels,
// zone, capacity type and type name.
func NewUniverse(types []*scheduling.InstanceType) *Universe {
	vals := map[string]sets.Set[string]{}
	for _, it := range types {
		for key, r := range it.Requirements {
			if !v1.InstanceTypeLabels.Has(key) && key != v1.LabelTopologyZone && key != v1.LabelCapacityType && key != v1.LabelInstanceType {
				continue
			}
			if vals[key] == nil {
				vals[key] = sets.New[string]()
			}
			vals[key].Insert(r.Values()...)
		}
	}
	u := &Universe{Types: types, Values: map[string][]string{}}
	for key, set := range vals {
		if set.Len() == 0 {
			continue
		}
		u.Keys = append(u.Keys, key)
		u.Values[key] = sets.List(set)
	}
	sort.Strings(u.Keys)
	return u
}

var (
	embeddedOnce     sync.Once
	embeddedUniverse *Universe
	embeddedErr      error
)

// Embedded is the universe of the embedded AWS catalog in three zones of
// us-west-2, as the engine gets it; built once.
func Embedded() (*Universe, error) {
	embeddedOnce.Do(func() {
		f, err := catalog.EmbeddedAWS()
		if err != nil {
			embeddedErr = err
			return
		}
		embeddedUniverse = NewUniverse(f.InZones([]string{"us-west-2a", "us-west-2b", "us-west-2c"}).ForEngine(scheduling.DefaultAllocatableSettings()))
	})
	return embeddedUniverse, embeddedErr
}

// Case is one generated input; Seed makes it again.
type Case struct {
	Seed  uint64
	Input scheduling.Input
}

const customKey = "example.com/team"

var operators = []v1.RequirementOperator{v1.OpIn, v1.OpNotIn, v1.OpExists, v1.OpDoesNotExist, v1.OpGt, v1.OpLt}

type gen struct {
	r *rand.Rand
	u *Universe
}

// Generate makes the case for seed. maxTypes caps how many of the universe's types
// the case's pools plan with (a random sample; 0: all of them).
func (u *Universe) Generate(seed uint64, maxTypes int) Case {
	g := &gen{r: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), u: u}
	types := u.Types
	if maxTypes > 0 && len(types) > maxTypes {
		types = slices.Clone(types)
		g.r.Shuffle(len(types), func(i, j int) { types[i], types[j] = types[j], types[i] })
		types = types[:1+g.r.IntN(maxTypes)]
	}
	in := scheduling.Input{InstanceTypes: map[string][]*scheduling.InstanceType{}}
	pools := 1 + g.r.IntN(3)
	for i := range pools {
		np := g.nodePool(i)
		in.NodePools = append(in.NodePools, np)
		in.InstanceTypes[np.Name] = types
	}
	for i := range g.r.IntN(3) {
		in.DaemonSetPods = append(in.DaemonSetPods, g.daemonSet(i))
	}
	for i := range g.r.IntN(4) {
		in.Nodes = append(in.Nodes, g.existingNode(i, in.NodePools, types))
	}
	for i := range 1 + g.r.IntN(6) {
		in.Pods = append(in.Pods, g.deployment(i, in.NodePools)...)
	}
	return Case{Seed: seed, Input: in}
}

func (g *gen) chance(p float64) bool { return g.r.Float64() < p }

func (g *gen) pick(vals []string) string { return vals[g.r.IntN(len(vals))] }

// key draws a label key: mostly the catalog's, now and then the pools' own.
func (g *gen) key() string {
	if g.chance(0.05) {
		return customKey
	}
	return g.pick(g.u.Keys)
}

func (g *gen) values(key string) []string {
	if key == customKey {
		return []string{"a", "b"}
	}
	return g.u.Values[key]
}

// requirement draws one requirement with any of the six operators; Gt and Lt only
// on keys whose values are numbers, with a bound among them.
func (g *gen) requirement() corev1.NodeSelectorRequirement {
	key := g.key()
	vals := g.values(key)
	op := operators[g.r.IntN(len(operators))]
	numeric := numbers(vals)
	if (op == v1.OpGt || op == v1.OpLt) && len(numeric) == 0 {
		op = v1.OpIn
	}
	req := corev1.NodeSelectorRequirement{Key: key, Operator: corev1.NodeSelectorOperator(op)}
	switch op {
	case v1.OpIn, v1.OpNotIn:
		for range 1 + g.r.IntN(3) {
			req.Values = append(req.Values, g.pick(vals))
		}
		req.Values = slices.Compact(slices.Sorted(slices.Values(req.Values)))
	case v1.OpGt, v1.OpLt:
		req.Values = []string{g.pick(numeric)}
	}
	return req
}

func numbers(vals []string) []string {
	var out []string
	for _, v := range vals {
		if _, err := strconv.Atoi(v); err == nil {
			out = append(out, v)
		}
	}
	return out
}

var poolTaint = corev1.Taint{Key: "dedicated", Value: "batch", Effect: corev1.TaintEffectNoSchedule}

func (g *gen) nodePool(i int) *v1.NodePool {
	np := &v1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("pool-%d", i), UID: types.UID(fmt.Sprintf("pool-%d", i))}}
	np.Spec.Template.Spec.NodeClassRef = &v1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "default"}
	for range g.r.IntN(3) {
		r := g.requirement()
		if r.Key == customKey {
			// The pool's own key: one value, or either (a node gets one of them).
			values := []string{g.pick([]string{"a", "b"})}
			if g.chance(0.5) {
				values = []string{"a", "b"}
			}
			r = corev1.NodeSelectorRequirement{Key: customKey, Operator: corev1.NodeSelectorOpIn, Values: values}
		}
		np.Spec.Template.Spec.Requirements = append(np.Spec.Template.Spec.Requirements, v1.NodePoolRequirement{
			Key: r.Key, RequirementBody: v1.RequirementBody{Operator: v1.RequirementOperator(r.Operator), Values: r.Values}})
	}
	if g.chance(0.1) {
		two := 2
		np.Spec.Template.Spec.Requirements = append(np.Spec.Template.Spec.Requirements, v1.NodePoolRequirement{
			Key: v1.LabelInstanceFamily, RequirementBody: v1.RequirementBody{Operator: v1.OpExists, MinValues: &two}})
	}
	if g.chance(0.3) {
		np.Spec.Template.Spec.Taints = []corev1.Taint{poolTaint}
	}
	if g.chance(0.3) {
		np.Spec.Template.Labels = map[string]string{customKey: g.pick([]string{"a", "b"})}
	}
	if g.chance(0.15) {
		np.Spec.Limits = v1.Limits{corev1.ResourceCPU: resource.MustParse(strconv.Itoa(8 + g.r.IntN(64)))}
	}
	if g.chance(0.3) {
		w := int32(1 + g.r.IntN(50))
		np.Spec.Weight = &w
	}
	return np
}

func (g *gen) requests(maxMilliCPU, maxMiB int) corev1.ResourceList {
	return corev1.ResourceList{
		corev1.ResourceCPU:    *resource.NewMilliQuantity(int64(50+g.r.IntN(maxMilliCPU)), resource.DecimalSI),
		corev1.ResourceMemory: *resource.NewQuantity(int64(64+g.r.IntN(maxMiB))<<20, resource.BinarySI),
	}
}

func (g *gen) affinity() *corev1.Affinity {
	if !g.chance(0.7) {
		return nil
	}
	na := &corev1.NodeAffinity{}
	if g.chance(0.8) {
		sel := &corev1.NodeSelector{}
		for range 1 + g.r.IntN(2) {
			var term corev1.NodeSelectorTerm
			for range 1 + g.r.IntN(3) {
				term.MatchExpressions = append(term.MatchExpressions, g.requirement())
			}
			sel.NodeSelectorTerms = append(sel.NodeSelectorTerms, term)
		}
		na.RequiredDuringSchedulingIgnoredDuringExecution = sel
	}
	if g.chance(0.3) {
		na.PreferredDuringSchedulingIgnoredDuringExecution = []corev1.PreferredSchedulingTerm{{
			Weight: int32(1 + g.r.IntN(100)), Preference: corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{g.requirement()}}}}
	}
	return &corev1.Affinity{NodeAffinity: na}
}

func (g *gen) daemonSet(i int) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("ds-%d", i), Namespace: "kube-system", UID: types.UID(fmt.Sprintf("ds-%d", i)),
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: fmt.Sprintf("ds-%d", i)}}}}
	p.Spec.Containers = []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: g.requests(1000, 1024)}}}
	if g.chance(0.5) {
		p.Spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
	}
	if g.chance(0.3) {
		p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
			NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{g.requirement()}}}}}}
	}
	return p
}

// deployment makes one group of equal replicas.
func (g *gen) deployment(i int, pools []*v1.NodePool) []*corev1.Pod {
	app := fmt.Sprintf("app-%d", i)
	tmpl := corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: g.requests(4000, 8192)}}}}
	tmpl.Affinity = g.affinity()
	if g.chance(0.3) {
		key := g.key()
		tmpl.NodeSelector = map[string]string{key: g.pick(g.values(key))}
	}
	if g.chance(0.4) {
		tmpl.Tolerations = []corev1.Toleration{{Key: poolTaint.Key, Operator: corev1.TolerationOpEqual, Value: poolTaint.Value, Effect: poolTaint.Effect}}
	}
	selector := &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}
	switch g.r.IntN(8) {
	case 0:
		tmpl.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: v1.LabelTopologyZone, WhenUnsatisfiable: corev1.DoNotSchedule, LabelSelector: selector}}
	case 1:
		tmpl.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: v1.LabelHostname, WhenUnsatisfiable: corev1.DoNotSchedule, LabelSelector: selector}}
	case 2:
		if tmpl.Affinity == nil {
			tmpl.Affinity = &corev1.Affinity{}
		}
		tmpl.Affinity.PodAntiAffinity = &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{TopologyKey: v1.LabelHostname, LabelSelector: selector}}}
	case 3:
		tmpl.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 8080, HostPort: 8080}}
	}
	n := 1 + g.r.IntN(12)
	out := make([]*corev1.Pod, n)
	for j := range n {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", app, j), Namespace: "default", UID: types.UID(fmt.Sprintf("%s-%d", app, j)),
			Labels: map[string]string{"app": app}}, Spec: *tmpl.DeepCopy()}
		p.Status.Phase = corev1.PodPending
		out[j] = p
	}
	return out
}

// existingNode is a node of a random type of a random pool, with a few pods bound.
func (g *gen) existingNode(i int, pools []*v1.NodePool, catalog []*scheduling.InstanceType) *scheduling.ExistingNode {
	it := catalog[g.r.IntN(len(catalog))]
	np := pools[g.r.IntN(len(pools))]
	labels := it.Requirements.Labels()
	o := it.Offerings[g.r.IntN(len(it.Offerings))]
	labels[v1.LabelTopologyZone], labels[v1.LabelCapacityType] = o.Zone, o.CapacityType
	labels[v1.LabelNodePool] = np.Name
	name := fmt.Sprintf("node-%d", i)
	labels[v1.LabelHostname] = name
	for k, v := range np.Spec.Template.Labels {
		labels[k] = v
	}
	n := &scheduling.ExistingNode{Name: name, Labels: labels, Taints: np.Spec.Template.Spec.Taints, Capacity: it.Capacity, Allocatable: it.Allocatable, NodePool: np.Name}
	used := scheduling.Resources{}
	for j := range g.r.IntN(4) {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("bound-%d-%d", i, j), Namespace: "default", UID: types.UID(fmt.Sprintf("bound-%d-%d", i, j)),
			Labels: map[string]string{"app": fmt.Sprintf("app-%d", g.r.IntN(6))}}}
		p.Spec.NodeName = name
		p.Spec.Containers = []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: g.requests(2000, 4096)}}}
		if next := used.Add(scheduling.PodRequests(p)); next.Fits(it.Allocatable) {
			used = next
			n.Pods = append(n.Pods, p)
		}
	}
	return n
}
