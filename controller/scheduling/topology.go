package scheduling

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/util/sets"

	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
)

type topologyKind int

const (
	topologySpread topologyKind = iota
	topologyAffinity
	topologyAntiAffinity
)

func (k topologyKind) String() string {
	return [...]string{"topology spread", "pod affinity", "pod anti-affinity"}[k]
}

// topologyGroup is one constraint shared by every pod that declares it (typically a
// Deployment's replicas): which pods it counts, over which topology key, and how many
// of them are in each domain so far.
type topologyGroup struct {
	id         string
	kind       topologyKind
	key        string
	namespaces sets.Set[string] // nil means every namespace
	selector   labels.Selector
	maxSkew    int
	minDomains int
	// preference marks ScheduleAnyway spreads and preferred (anti-)affinity: held as
	// hard constraints until the pod cannot be placed otherwise.
	preference bool
	// universe holds the domains a spread can use (non-hostname keys).
	universe sets.Set[string]
	// filter says which nodes a spread counts (its nodeAffinityPolicy and
	// nodeTaintsPolicy); nil counts every node.
	filter *nodeFilter
	// pending counts the pending pods the group selects that are not placed yet:
	// a pod whose required affinity finds no match placed yet waits for them.
	pending int
	counts  map[string]int
	// owners counts, per domain, the pods that declared this anti-affinity, so a
	// matching pod keeps out of their domains too (anti-affinity is symmetric).
	owners map[string]int
	total  int
	// order is the group's place among all groups, for a stable iteration order.
	order int
}

func (g *topologyGroup) matches(namespace string, podLabels map[string]string) bool {
	if g.namespaces != nil && !g.namespaces.Has(namespace) {
		return false
	}
	return g.selector.Matches(labels.Set(podLabels))
}

// topology tracks every group and which groups select which pods.
type topology struct {
	groups   map[string]*topologyGroup
	ordered  []*topologyGroup
	antiOnly []*topologyGroup
	// bySelectorLabel indexes groups by one label their selector requires (key, then
	// value), so finding the groups that select a pod looks only at groups naming one
	// of its labels instead of scanning every group: with a group per Deployment that
	// scan dominated a consolidation decision on a large cluster.
	bySelectorLabel map[string]map[string][]*topologyGroup
	// unindexed are the groups whose selector requires no single label value.
	unindexed []*topologyGroup
	// generation changes whenever a group is added, so matches cached on a pod are
	// known to be stale.
	generation int
}

func newTopology() *topology {
	return &topology{groups: map[string]*topologyGroup{}, bySelectorLabel: map[string]map[string][]*topologyGroup{}}
}

func labelSignature(namespace string, l map[string]string) string {
	keys := make([]string, 0, len(l))
	for k := range l {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	b.WriteString(namespace)
	for _, k := range keys {
		b.WriteByte(0)
		b.WriteString(k)
		b.WriteByte(1)
		b.WriteString(l[k])
	}
	return b.String()
}

// matching lists, in the order they were added, the groups whose selector selects a
// pod with these labels in this namespace.
func (t *topology) matching(namespace string, l map[string]string) []*topologyGroup {
	var out []*topologyGroup
	for k, v := range l {
		for _, g := range t.bySelectorLabel[k][v] {
			if g.matches(namespace, l) {
				out = append(out, g)
			}
		}
	}
	for _, g := range t.unindexed {
		if g.matches(namespace, l) {
			out = append(out, g)
		}
	}
	if len(out) > 1 {
		sort.Slice(out, func(i, j int) bool { return out[i].order < out[j].order })
	}
	return out
}

// matchingPod is matching for a pending pod, remembered on the pod until a group is
// added: the solver asks it for every node it tries.
func (t *topology) matchingPod(p *podInfo) []*topologyGroup {
	if p.matchedGeneration != t.generation+1 {
		p.matched = t.matching(p.pod.Namespace, p.pod.Labels)
		p.matchedGeneration = t.generation + 1
	}
	return p.matched
}

// selects reports whether group g selects pending pod p.
func (t *topology) selects(g *topologyGroup, p *podInfo) bool {
	for _, m := range t.matchingPod(p) {
		if m == g {
			return true
		}
	}
	return false
}

func (t *topology) intern(g *topologyGroup) *topologyGroup {
	if existing, ok := t.groups[g.id]; ok {
		return existing
	}
	g.counts = map[string]int{}
	g.owners = map[string]int{}
	g.order = len(t.ordered)
	t.groups[g.id] = g
	t.ordered = append(t.ordered, g)
	// Only required anti-affinity binds other pods; a preference binds its owner only.
	if g.kind == topologyAntiAffinity && !g.preference {
		t.antiOnly = append(t.antiOnly, g)
	}
	if key, values, ok := requiredLabel(g.selector); ok {
		if t.bySelectorLabel[key] == nil {
			t.bySelectorLabel[key] = map[string][]*topologyGroup{}
		}
		for _, v := range values {
			t.bySelectorLabel[key][v] = append(t.bySelectorLabel[key][v], g)
		}
	} else {
		t.unindexed = append(t.unindexed, g)
	}
	t.generation++
	return g
}

// requiredLabel finds a label the selector requires to have one of a few values: a
// pod it selects has that label with one of them.
func requiredLabel(sel labels.Selector) (string, []string, bool) {
	reqs, selectable := sel.Requirements()
	if !selectable {
		return "", nil, false
	}
	for _, r := range reqs {
		switch r.Operator() {
		case selection.Equals, selection.DoubleEquals, selection.In:
			return r.Key(), r.Values().List(), true
		}
	}
	return "", nil, false
}

// nodeFilter is which nodes a topology spread counts, as kube-scheduler decides it:
// with nodeAffinityPolicy Honor (the default) the nodes that meet the pod's
// required node affinity and node selector (not its preferences, nor its
// volumes'), with nodeTaintsPolicy Honor those whose taints the pod tolerates.
type nodeFilter struct {
	// terms are the pod's required terms, ORed; nil counts nodes whatever their
	// labels.
	terms       []Requirements
	honorTaints bool
	tolerations []corev1.Toleration
	id          string
}

// spreadFilter is the filter of one of p's spreads; nil when it counts every node.
func spreadFilter(p *podInfo, c corev1.TopologySpreadConstraint) *nodeFilter {
	f := &nodeFilter{}
	if c.NodeAffinityPolicy == nil || *c.NodeAffinityPolicy == corev1.NodeInclusionPolicyHonor {
		for _, term := range p.requiredTerms {
			if len(term) == 0 {
				// A term that requires nothing matches every node.
				f.terms = nil
				break
			}
			f.terms = append(f.terms, term)
		}
	}
	if c.NodeTaintsPolicy != nil && *c.NodeTaintsPolicy == corev1.NodeInclusionPolicyHonor {
		f.honorTaints, f.tolerations = true, p.tolerations
	}
	if len(f.terms) == 0 && !f.honorTaints {
		return nil
	}
	var b strings.Builder
	for _, term := range f.terms {
		b.WriteString(term.String())
		b.WriteByte('|')
	}
	if f.honorTaints {
		raw, _ := json.Marshal(f.tolerations)
		b.Write(raw)
	}
	f.id = b.String()
	return f
}

// allowsValue reports whether a node with value v for key could meet the terms.
func (f *nodeFilter) allowsValue(key, v string) bool {
	if f == nil || len(f.terms) == 0 {
		return true
	}
	for _, term := range f.terms {
		if term.Get(key).Has(v) {
			return true
		}
	}
	return false
}

func (f *nodeFilter) toleratesTaints(taints []corev1.Taint) bool {
	return f == nil || !f.honorTaints || toleratesAll(f.tolerations, taints) == nil
}

// matchesNode reports whether the spread counts an existing node.
func (f *nodeFilter) matchesNode(l map[string]string, taints []corev1.Taint) bool {
	if !f.toleratesTaints(taints) {
		return false
	}
	if f == nil || len(f.terms) == 0 {
		return true
	}
	for _, term := range f.terms {
		if labelsSatisfy(l, term) {
			return true
		}
	}
	return false
}

// matchesRequirements reports whether the spread counts a node to be launched
// with these requirements and taints.
func (f *nodeFilter) matchesRequirements(reqs Requirements, taints []corev1.Taint) bool {
	if !f.toleratesTaints(taints) {
		return false
	}
	if f == nil || len(f.terms) == 0 {
		return true
	}
	for _, term := range f.terms {
		if reqs.Intersects(term) == nil {
			return true
		}
	}
	return false
}

// addPod registers the groups a pod declares. universe returns the domains a spread
// on a key may use, for the nodes the spread counts.
func (t *topology) addPod(p *podInfo, universe func(key string, f *nodeFilter) sets.Set[string]) error {
	pod := p.pod
	for _, c := range pod.Spec.TopologySpreadConstraints {
		sel, err := selectorWithMatchLabelKeys(c.LabelSelector, c.MatchLabelKeys, pod.Labels)
		if err != nil {
			return fmt.Errorf("pod %s: topology spread selector: %w", p.key, err)
		}
		minDomains := 0
		if c.MinDomains != nil {
			minDomains = int(*c.MinDomains)
		}
		g := &topologyGroup{
			kind: topologySpread, key: normalizeKey(c.TopologyKey), namespaces: sets.New(pod.Namespace), selector: sel,
			maxSkew: int(c.MaxSkew), minDomains: minDomains, preference: c.WhenUnsatisfiable == corev1.ScheduleAnyway,
		}
		g.id = fmt.Sprintf("spread|%s|%s|%s|%d|%d|%t", g.key, pod.Namespace, sel, g.maxSkew, minDomains, g.preference)
		if g.key != v1.LabelHostname {
			// The nodes a hostname spread counts matter only for the node the pod
			// goes to, which meets its affinity anyway.
			g.filter = spreadFilter(p, c)
			if g.filter != nil {
				g.id += "|" + g.filter.id
			}
			// The domains follow from the key and the filter, both in the id: they
			// are worked out once per group.
			g = t.intern(g)
			if g.universe == nil {
				g.universe = universe(g.key, g.filter)
			}
		} else {
			g = t.intern(g)
		}
		p.topology = append(p.topology, g)
	}
	aff := pod.Spec.Affinity
	if aff == nil {
		return nil
	}
	addTerms := func(kind topologyKind, required []corev1.PodAffinityTerm, preferred []corev1.WeightedPodAffinityTerm) error {
		terms := make([]corev1.PodAffinityTerm, 0, len(required)+len(preferred))
		terms = append(terms, required...)
		for _, w := range preferred {
			terms = append(terms, w.PodAffinityTerm)
		}
		for i, term := range terms {
			sel, err := selectorWithMatchLabelKeys(term.LabelSelector, term.MatchLabelKeys, pod.Labels)
			if err != nil {
				return fmt.Errorf("pod %s: %s selector: %w", p.key, kind, err)
			}
			var ns sets.Set[string]
			if term.NamespaceSelector == nil {
				ns = sets.New(term.Namespaces...)
				if ns.Len() == 0 {
					ns.Insert(pod.Namespace)
				}
			} else if len(term.NamespaceSelector.MatchLabels) > 0 || len(term.NamespaceSelector.MatchExpressions) > 0 {
				// Namespace labels are not known to the engine; scope to the named
				// namespaces and the pod's own, the common case.
				ns = sets.New(append(term.Namespaces, pod.Namespace)...)
			}
			g := &topologyGroup{kind: kind, key: normalizeKey(term.TopologyKey), namespaces: ns, selector: sel, preference: i >= len(required)}
			nsList := "*"
			if ns != nil {
				nsList = strings.Join(sets.List(ns), ",")
			}
			g.id = fmt.Sprintf("%d|%s|%s|%s|%t", kind, g.key, nsList, sel, g.preference)
			p.topology = append(p.topology, t.intern(g))
		}
		return nil
	}
	if aff.PodAffinity != nil {
		if err := addTerms(topologyAffinity, aff.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution, aff.PodAffinity.PreferredDuringSchedulingIgnoredDuringExecution); err != nil {
			return err
		}
	}
	if aff.PodAntiAffinity != nil {
		if err := addTerms(topologyAntiAffinity, aff.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution, aff.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution); err != nil {
			return err
		}
	}
	return nil
}

func selectorWithMatchLabelKeys(ls *metav1.LabelSelector, keys []string, podLabels map[string]string) (labels.Selector, error) {
	if ls == nil {
		return labels.Nothing(), nil
	}
	merged := ls.DeepCopy()
	for _, k := range keys {
		if v, ok := podLabels[k]; ok {
			merged.MatchExpressions = append(merged.MatchExpressions, metav1.LabelSelectorRequirement{Key: k, Operator: metav1.LabelSelectorOpIn, Values: []string{v}})
		}
	}
	return metav1.LabelSelectorAsSelector(merged)
}

// record counts a pod placed in the given domains (key -> domain), in the spreads
// that count the node it is placed on (counts says which).
func (t *topology) record(matched, owned []*topologyGroup, domainOf func(key string) (string, bool), counts func(*nodeFilter) bool) {
	for _, g := range matched {
		if g.filter != nil && !counts(g.filter) {
			continue
		}
		if d, ok := domainOf(g.key); ok {
			g.counts[d]++
			g.total++
		}
	}
	for _, g := range owned {
		if g.kind != topologyAntiAffinity || g.preference {
			continue
		}
		if d, ok := domainOf(g.key); ok {
			g.owners[d]++
		}
	}
}

// allows reports whether pod p may join domain d of group g's key, with the reason.
func (g *topologyGroup) allows(p *podInfo, d string) error {
	self := g.matches(p.pod.Namespace, p.pod.Labels)
	switch g.kind {
	case topologySpread:
		minCount := 0
		if g.key != v1.LabelHostname && g.universe.Len() >= g.minDomains {
			minCount = -1
			for u := range g.universe {
				if c := g.counts[u]; minCount < 0 || c < minCount {
					minCount = c
				}
			}
			if minCount < 0 {
				minCount = 0
			}
		}
		n := g.counts[d]
		if self {
			n++
		}
		if n-minCount > g.maxSkew {
			return fmt.Errorf("would violate topology spread on %s (maxSkew %d)", g.key, g.maxSkew)
		}
	case topologyAffinity:
		if g.counts[d] == 0 && !(self && !g.anyIn(p.requirements.Get(g.key))) {
			return fmt.Errorf("pod affinity on %s found no matching pod in %s", g.key, d)
		}
	case topologyAntiAffinity:
		if g.counts[d] > 0 {
			return fmt.Errorf("pod anti-affinity on %s: a matching pod is already in %s", g.key, d)
		}
	}
	return nil
}

// anyIn reports whether a pod this group counts is in one of the domains r allows.
// A pod that matches its own required affinity may start a domain when no matching
// pod is where it can go (Kubernetes lets the first of them anywhere; Karpenter
// lets one start afresh where its own node requirements keep it from the others).
func (g *topologyGroup) anyIn(r *Requirement) bool {
	for d, n := range g.counts {
		if n > 0 && r.Has(d) {
			return true
		}
	}
	return false
}

// inverseAllows checks the anti-affinity other pods declared against p.
func (t *topology) inverseAllows(p *podInfo, domainOf func(key string) (string, bool)) error {
	if len(t.antiOnly) == 0 {
		return nil
	}
	for _, g := range t.matchingPod(p) {
		if g.kind != topologyAntiAffinity || g.preference {
			continue
		}
		if d, ok := domainOf(g.key); ok && g.owners[d] > 0 {
			return fmt.Errorf("a pod with anti-affinity to it is already in %s", d)
		}
	}
	return nil
}

// preferredDomains orders candidate domains for a spread: least populated first.
func (g *topologyGroup) preferredDomains(candidates []string) []string {
	out := append([]string(nil), candidates...)
	sort.SliceStable(out, func(i, j int) bool {
		ci, cj := g.counts[out[i]], g.counts[out[j]]
		if ci != cj {
			return ci < cj
		}
		return out[i] < out[j]
	})
	return out
}
