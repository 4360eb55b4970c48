// Package plancheck states what must hold of every plan the scheduling engine makes,
// and checks it from outside the engine: each pod planned onto a new NodeClaim can
// run on a node of every instance type the claim lets the cloud choose, in every
// zone and capacity type the claim allows; each pod planned onto an existing node
// can run there; and a pod left unschedulable has no instance type that could host
// it alone. It evaluates pods as kube-scheduler does (component-helpers' node
// affinity and taints on the labels the node will carry), not with the engine's
// requirement algebra, so an engine bug cannot hide itself. Pure: no I/O.
package plancheck

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"

	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/controller/scheduling"
)

// Rules a plan can break, as a Violation names them.
const (
	RuleRequirements = "claim requirements"
	RuleNodeAffinity = "node affinity"
	RuleTaints       = "taints"
	RuleResources    = "resources"
	RuleHostPorts    = "host ports"
	RuleVolumeLimits = "volume limits"
	RuleTopology     = "topology"
	RuleOffering     = "offerings"
	RuleStranded     = "unschedulable"
)

// Violation is one way a plan breaks what must hold.
type Violation struct {
	// Node is the planned NodeClaim's name or the existing node's.
	Node string
	// InstanceType is the option checked ("" for an existing node).
	InstanceType string
	// Pod is namespace/name ("" when the rule is about the node).
	Pod    string
	Rule   string
	Detail string
}

func (v Violation) String() string {
	where := v.Node
	if v.InstanceType != "" {
		where += " as " + v.InstanceType
	}
	if v.Pod != "" {
		return fmt.Sprintf("%s: pod %s: %s: %s", where, v.Pod, v.Rule, v.Detail)
	}
	return fmt.Sprintf("%s: %s: %s", where, v.Rule, v.Detail)
}

// Capacity says, for a check, what a node of a type can give the claim's pods.
type Capacity struct {
	// Allocatable is the type's allocatable before any DaemonSet, by name; a type
	// not in it is taken at its own Allocatable.
	Allocatable map[string]scheduling.Resources
	// DaemonSetPods are one pod per DaemonSet: those that would run on the node
	// (node affinity on its labels, the pool's taints tolerated) take their
	// requests from it. When nil, the claim's Requests (the pods' and the
	// overhead the engine counted) stand for what the node must hold.
	DaemonSetPods []*corev1.Pod
}

// Claim checks every instance-type option of a planned NodeClaim and returns the
// violations of each option that breaks a rule, by option name.
func Claim(plan *scheduling.NodeClaimPlan, capacity Capacity) map[string][]Violation {
	c := ForClaim(plan, capacity)
	out := map[string][]Violation{}
	for _, it := range plan.InstanceTypeOptions {
		if vs := c.Option(it); len(vs) > 0 {
			out[it.Name] = vs
		}
	}
	return out
}

// Option checks one option of a planned NodeClaim: a node of the type, in each
// offering the claim's requirements allow, must meet the claim's requirements and
// run every pod of the claim.
func Option(plan *scheduling.NodeClaimPlan, it *scheduling.InstanceType, capacity Capacity) []Violation {
	return ForClaim(plan, capacity).Option(it)
}

// ClaimChecker checks the options of one claim, with what every option is checked
// against compiled once: the claim's requirements and each pod's node affinity.
type ClaimChecker struct {
	plan        *scheduling.NodeClaimPlan
	capacity    Capacity
	reqs        []v1.NodeSelectorRequirementWithMinValues
	selector    *nodeaffinity.NodeSelector
	affinities  []nodeaffinity.RequiredNodeAffinity
	requests    scheduling.Resources
	claimLabels map[string]string
	// labels are labelsOf's node labels: the offerings of one option share them.
	labelsOf *scheduling.InstanceType
	labels   map[string]string
	// shared are the violations of what the claim's pods must agree on, once.
	shared        []Violation
	sharedChecked bool
	// unjudged are requirement keys no node label of the model stands for.
	unjudged map[string]bool
	// hasBounds is set when some requirement is Gte or Lte, which node selectors
	// do not have: the selector leaves them out.
	hasBounds bool
}

// ForClaim compiles the checks of plan's options.
func ForClaim(plan *scheduling.NodeClaimPlan, capacity Capacity) *ClaimChecker {
	c := &ClaimChecker{plan: plan, capacity: capacity, reqs: plan.Requirements.ToNodeSelectorRequirements(), claimLabels: claimLabels(plan.Requirements)}
	var term corev1.NodeSelectorTerm
	c.unjudged = map[string]bool{}
	for _, r := range c.reqs {
		if _, known := c.claimLabels[r.Key]; !known && !typedAnywhere(plan, r.Key) && r.Key != v1.LabelTopologyZone && r.Key != v1.LabelCapacityType {
			// A key neither the types, the offerings nor an In of the claim give a
			// value (a pool's "team Exists"): how the node gets it is not the
			// plan's doing; the pods' own rules on it are still judged.
			c.unjudged[r.Key] = true
			continue
		}
		if r.Operator == v1.OpGte || r.Operator == v1.OpLte {
			c.hasBounds = true
		} else {
			term.MatchExpressions = append(term.MatchExpressions, corev1.NodeSelectorRequirement{Key: r.Key, Operator: corev1.NodeSelectorOperator(r.Operator), Values: r.Values})
		}
	}
	if sel, err := nodeaffinity.NewNodeSelector(&corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{term}}); err == nil {
		c.selector = sel
	}
	for _, p := range plan.Pods {
		c.affinities = append(c.affinities, nodeaffinity.GetRequiredNodeAffinity(p))
		c.requests = c.requests.Add(scheduling.PodRequests(p))
	}
	return c
}

// Option checks one option of the claim; it need not be among the plan's options.
func (c *ClaimChecker) Option(it *scheduling.InstanceType) []Violation {
	plan := c.plan
	bad := func(pod, rule, format string, args ...any) Violation {
		return Violation{Node: plan.Name, InstanceType: it.Name, Pod: pod, Rule: rule, Detail: fmt.Sprintf(format, args...)}
	}
	var out []Violation
	offerings := allowedOfferings(plan.Requirements, it)
	if len(offerings) == 0 {
		return []Violation{bad("", RuleOffering, "no available offering in the zones and capacity types the claim allows")}
	}
	allocatable := it.Allocatable
	if a, ok := c.capacity.Allocatable[it.Name]; ok {
		allocatable = a
	}
	for _, o := range offerings {
		node := c.node(it, o)
		if c.selector == nil || !c.selector.Match(node) || c.hasBounds {
			for _, r := range c.reqs {
				if c.unjudged[r.Key] {
					continue
				}
				if !meets(node.Labels, r.Key, r.Operator, r.Values) {
					out = append(out, bad("", RuleRequirements, "the node's labels do not meet the claim's %s %s %v (the node has %s)", r.Key, r.Operator, r.Values, labelOf(node.Labels, r.Key)))
				}
			}
		}
		for i, p := range plan.Pods {
			out = append(out, podRuns(p, c.affinities[i], node, bad)...)
		}
		need := plan.Requests
		if c.capacity.DaemonSetPods != nil {
			daemons := daemonSetsOn(c.capacity.DaemonSetPods, node)
			need = c.requests
			for _, ds := range daemons {
				need = need.Add(scheduling.PodRequests(ds))
			}
			out = append(out, sharedNode(append(daemons, plan.Pods...), bad)...)
		} else {
			// The same pods on every option: what they must agree on is found once.
			if !c.sharedChecked {
				c.shared, c.sharedChecked = sharedNode(plan.Pods, func(pod, rule, format string, args ...any) Violation {
					return Violation{Node: plan.Name, Pod: pod, Rule: rule, Detail: fmt.Sprintf(format, args...)}
				}), true
			}
			for _, v := range c.shared {
				v.InstanceType = it.Name
				out = append(out, v)
			}
		}
		if !need.Fits(allocatable) {
			out = append(out, bad("", RuleResources, "the pods and DaemonSets request %s, more than its allocatable %s (%s)", need, allocatable, strings.Join(need.Exceeding(allocatable), ", ")))
		}
	}
	out = append(out, c.assumedDomains(it, offerings, bad)...)
	return dedupe(out)
}

// typedAnywhere reports whether some option of the plan defines key.
func typedAnywhere(plan *scheduling.NodeClaimPlan, key string) bool {
	for _, it := range plan.InstanceTypeOptions {
		if _, ok := it.Requirements[key]; ok {
			return true
		}
	}
	return v1.InstanceTypeLabels.Has(key) || key == v1.LabelInstanceType
}

// labelsFit reports whether a node of it, in some offering the claim allows, meets
// the claim's requirements and every pod's node affinity: option's first test,
// without the words.
func (c *ClaimChecker) labelsFit(it *scheduling.InstanceType) bool {
	for _, o := range allowedOfferings(c.plan.Requirements, it) {
		node := c.node(it, o)
		if c.selector == nil || !c.selector.Match(node) {
			continue
		}
		fits := true
		for _, a := range c.affinities {
			if ok, err := a.Match(node); err != nil || !ok {
				fits = false
				break
			}
		}
		if fits {
			return true
		}
	}
	return false
}

// allowedOfferings are the available offerings of it in the zones and capacity
// types reqs allow: each is a node the cloud may launch for the claim.
func allowedOfferings(reqs scheduling.Requirements, it *scheduling.InstanceType) []scheduling.Offering {
	zone, ct := reqs.Get(v1.LabelTopologyZone), reqs.Get(v1.LabelCapacityType)
	var out []scheduling.Offering
	for _, o := range it.Offerings {
		if o.Available && zone.Has(o.Zone) && ct.Has(o.CapacityType) {
			out = append(out, o)
		}
	}
	return out
}

// A node of a claim is what the claim becomes when the cloud launches it as one of
// its types in one offering: the type's labels, the offering's zone and capacity
// type, the pool's template labels and name, and every other single-valued
// requirement of the claim, as Karpenter labels a node.

// typeLabels are the labels every node of it launched for plan carries, whatever
// the offering: claimLabels are plan.Requirements.Labels().
func typeLabels(claimLabels map[string]string, plan *scheduling.NodeClaimPlan, it *scheduling.InstanceType) map[string]string {
	nodeLabels := map[string]string{}
	for k, v := range claimLabels {
		if _, typed := it.Requirements[k]; !typed {
			nodeLabels[k] = v
		}
	}
	for k, r := range it.Requirements {
		if r.Operator() != v1.OpIn {
			continue
		}
		if r.Len() == 1 {
			nodeLabels[k], _ = r.Any()
			continue
		}
		// A label the type may take several values of (a placement group's
		// partition) gets one the claim allows; zone and capacity type come
		// from the offering.
		for _, v := range r.Values() {
			if plan.Requirements.Get(k).Has(v) {
				nodeLabels[k] = v
				break
			}
		}
	}
	for k, v := range plan.Labels {
		nodeLabels[k] = v
	}
	nodeLabels[v1.LabelInstanceType] = it.Name
	nodeLabels[v1.LabelNodePool] = plan.NodePool
	nodeLabels[v1.LabelHostname] = plan.Name
	return nodeLabels
}

// claimLabels are the labels a claim's requirements give a node for keys its
// type does not define: one of the values of each In (a template label, a pool's
// own key narrowed by its pods, the zone ID or region a pod names).
func claimLabels(reqs scheduling.Requirements) map[string]string {
	out := map[string]string{}
	for k, r := range reqs {
		if k == v1.LabelHostname || r.Operator() != v1.OpIn {
			continue
		}
		if v, ok := r.Any(); ok {
			out[k] = v
		}
	}
	return out
}

// withAliases adds the deprecated keys a node carries beside the stable ones
// (beta.kubernetes.io/os, failure-domain.beta.kubernetes.io/zone, ...), which pods
// may still select and the engine reads as the stable ones.
func withAliases(nodeLabels map[string]string) {
	for alias, stable := range v1.NormalizedLabels {
		if v, ok := nodeLabels[stable]; ok {
			nodeLabels[alias] = v
		}
	}
}

// nodeWith is a node with the type's labels and the offering's: it writes them
// into base, which the node then holds, so a node is good until the next one.
func nodeWith(plan *scheduling.NodeClaimPlan, base map[string]string, o scheduling.Offering) *corev1.Node {
	base[v1.LabelTopologyZone] = o.Zone
	base[v1.LabelCapacityType] = o.CapacityType
	withAliases(base)
	node := &corev1.Node{Spec: corev1.NodeSpec{Taints: plan.Taints}}
	node.Name, node.Labels = plan.Name, base
	return node
}

// node is the claim's node as it in offering o, good until the next call.
func (c *ClaimChecker) node(it *scheduling.InstanceType, o scheduling.Offering) *corev1.Node {
	if c.labelsOf != it {
		c.labelsOf, c.labels = it, typeLabels(c.claimLabels, c.plan, it)
	}
	return nodeWith(c.plan, c.labels, o)
}

// meets evaluates one requirement on a node's labels as Kubernetes does: an absent
// label meets only NotIn and DoesNotExist. Gte and Lte (Karpenter's) are Gt and Lt
// one step out.
func meets(nodeLabels map[string]string, key string, op v1.RequirementOperator, values []string) bool {
	if op == v1.OpGte || op == v1.OpLte {
		v, ok := nodeLabels[key]
		if !ok {
			return false
		}
		r, err := scheduling.NewRequirement(key, op, values...)
		return err == nil && r.Has(v)
	}
	sel, err := nodeaffinity.NewNodeSelector(&corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
		MatchExpressions: []corev1.NodeSelectorRequirement{{Key: key, Operator: corev1.NodeSelectorOperator(op), Values: values}},
	}}})
	if err != nil {
		return false
	}
	return sel.Match(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Labels: nodeLabels}})
}

// podRuns checks what kube-scheduler checks of one pod on a node: its required node
// affinity and node selector, and the node's NoSchedule and NoExecute taints.
func podRuns(p *corev1.Pod, affinity nodeaffinity.RequiredNodeAffinity, node *corev1.Node, bad func(pod, rule, format string, args ...any) Violation) []Violation {
	var out []Violation
	name := p.Namespace + "/" + p.Name
	if ok, err := affinity.Match(node); err != nil || !ok {
		out = append(out, bad(name, RuleNodeAffinity, "its node selector or required node affinity does not match the node's labels (zone %s, capacity type %s): %s%s", node.Labels[v1.LabelTopologyZone], node.Labels[v1.LabelCapacityType], unmet(p, node.Labels), errSuffix(err)))
	}
	if taint, untolerated := corev1helpers.FindMatchingUntoleratedTaint(node.Spec.Taints, p.Spec.Tolerations, func(t *corev1.Taint) bool {
		return t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute
	}); untolerated {
		out = append(out, bad(name, RuleTaints, "does not tolerate %s", taint.ToString()))
	}
	return out
}

func errSuffix(err error) string {
	if err == nil {
		return ""
	}
	return ": " + err.Error()
}

// daemonSetsOn are the DaemonSet pods that would run on node: the DaemonSet
// controller's own test, node affinity and the node's taints.
func daemonSetsOn(daemonSets []*corev1.Pod, node *corev1.Node) []*corev1.Pod {
	var out []*corev1.Pod
	for _, ds := range daemonSets {
		if ok, err := nodeaffinity.GetRequiredNodeAffinity(ds).Match(node); err != nil || !ok {
			continue
		}
		if _, untolerated := corev1helpers.FindMatchingUntoleratedTaint(node.Spec.Taints, ds.Spec.Tolerations, func(t *corev1.Taint) bool {
			return t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute
		}); untolerated {
			continue
		}
		out = append(out, ds)
	}
	return out
}

// sharedNode checks what pods on one node must agree on: no host port held twice,
// and no pod's required anti-affinity over hostnames matching another of them.
func sharedNode(pods []*corev1.Pod, bad func(pod, rule, format string, args ...any) Violation) []Violation {
	var out []Violation
	for i, p := range pods {
		for _, q := range pods[:i] {
			for _, a := range hostPorts(p) {
				for _, b := range hostPorts(q) {
					if a.collides(b) {
						out = append(out, bad(p.Namespace+"/"+p.Name, RuleHostPorts, "host port %s is held by %s/%s on the same node", a, q.Namespace, q.Name))
					}
				}
			}
		}
	}
	for _, p := range pods {
		for _, q := range pods {
			if p == q {
				continue
			}
			if term, ok := repels(p, q); ok {
				out = append(out, bad(p.Namespace+"/"+p.Name, RuleTopology, "its required anti-affinity over %s matches %s/%s on the same node", term.TopologyKey, q.Namespace, q.Name))
			}
		}
	}
	return out
}

type hostPort struct {
	protocol corev1.Protocol
	ip       string
	port     int32
}

func (h hostPort) String() string { return fmt.Sprintf("%s/%d on %q", h.protocol, h.port, h.ip) }

// collides reports whether two host ports cannot both be bound: the same port and
// protocol on the same IP, or on any IP when either is a wildcard.
func (h hostPort) collides(o hostPort) bool {
	if h.port != o.port || h.protocol != o.protocol {
		return false
	}
	return h.ip == o.ip || wildcard(h.ip) || wildcard(o.ip)
}

func wildcard(ip string) bool { return ip == "" || ip == "0.0.0.0" || ip == "::" }

func hostPorts(p *corev1.Pod) []hostPort {
	var out []hostPort
	for _, c := range p.Spec.Containers {
		for _, port := range c.Ports {
			if port.HostPort <= 0 {
				continue
			}
			proto := port.Protocol
			if proto == "" {
				proto = corev1.ProtocolTCP
			}
			out = append(out, hostPort{protocol: proto, ip: port.HostIP, port: port.HostPort})
		}
	}
	return out
}

// repels reports whether p's required pod anti-affinity over hostnames selects q.
func repels(p, q *corev1.Pod) (corev1.PodAffinityTerm, bool) {
	if p.Spec.Affinity == nil || p.Spec.Affinity.PodAntiAffinity == nil {
		return corev1.PodAffinityTerm{}, false
	}
	for _, term := range p.Spec.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
		if term.TopologyKey == v1.LabelHostname && selects(p, term, q) {
			return term, true
		}
	}
	return corev1.PodAffinityTerm{}, false
}

// selects reports whether a pod affinity term of owner's selects pod: its
// namespaces (the owner's own when none are listed; a namespace selector is taken
// as selecting every namespace) and its label selector.
func selects(owner *corev1.Pod, term corev1.PodAffinityTerm, pod *corev1.Pod) bool {
	// Namespace labels are not known here: an empty namespace selector selects
	// every namespace; one with labels is taken as the listed namespaces and the
	// owner's, as the engine takes it, so the check is never stricter than the plan.
	everyNamespace := term.NamespaceSelector != nil && len(term.NamespaceSelector.MatchLabels) == 0 && len(term.NamespaceSelector.MatchExpressions) == 0
	if !everyNamespace {
		namespaces := term.Namespaces
		if len(namespaces) == 0 || term.NamespaceSelector != nil {
			namespaces = append(slices.Clone(namespaces), owner.Namespace)
		}
		if !slices.Contains(namespaces, pod.Namespace) {
			return false
		}
	}
	sel, err := metav1.LabelSelectorAsSelector(term.LabelSelector)
	if err != nil {
		return false
	}
	return sel.Matches(labels.Set(pod.Labels))
}

// assumedDomains checks the topology a plan assumed: a pod with a required spread,
// affinity or anti-affinity over a key other than hostname was counted in one domain
// of that key, so every node the claim can become must be in that one domain.
func (c *ClaimChecker) assumedDomains(it *scheduling.InstanceType, offerings []scheduling.Offering, bad func(pod, rule, format string, args ...any) Violation) []Violation {
	var out []Violation
	for _, p := range c.plan.Pods {
		for _, key := range requiredTopologyKeys(p) {
			domains := map[string]bool{}
			for _, o := range offerings {
				domains[c.node(it, o).Labels[key]] = true
			}
			if len(domains) > 1 {
				values := make([]string, 0, len(domains))
				for d := range domains {
					values = append(values, d)
				}
				sort.Strings(values)
				out = append(out, bad(p.Namespace+"/"+p.Name, RuleTopology, "its required topology over %s was planned in one domain, but the claim may launch in any of %v", key, values))
			}
		}
	}
	return out
}

// requiredTopologyKeys are the keys other than hostname that p's required
// spreads, pod affinities and anti-affinities count domains of.
func requiredTopologyKeys(p *corev1.Pod) []string {
	keys := map[string]bool{}
	for _, c := range p.Spec.TopologySpreadConstraints {
		if c.WhenUnsatisfiable == corev1.DoNotSchedule {
			keys[c.TopologyKey] = true
		}
	}
	if a := p.Spec.Affinity; a != nil {
		if a.PodAffinity != nil {
			for _, t := range a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
				keys[t.TopologyKey] = true
			}
		}
		if a.PodAntiAffinity != nil {
			for _, t := range a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
				keys[t.TopologyKey] = true
			}
		}
	}
	delete(keys, v1.LabelHostname)
	out := make([]string, 0, len(keys))
	for k := range keys {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// dedupe drops the repeats of a violation found in several offerings.
func dedupe(vs []Violation) []Violation {
	seen := map[Violation]bool{}
	out := vs[:0]
	for _, v := range vs {
		if !seen[v] {
			seen[v] = true
			out = append(out, v)
		}
	}
	return out
}

func labelOf(nodeLabels map[string]string, key string) string {
	if v, ok := nodeLabels[key]; ok {
		return fmt.Sprintf("%s=%q", key, v)
	}
	return "no " + key
}

// unmet names, for each required term of the pod (its node selector with it), the
// expressions the node's labels do not meet.
func unmet(p *corev1.Pod, nodeLabels map[string]string) string {
	var exprs [][]corev1.NodeSelectorRequirement
	if a := p.Spec.Affinity; a != nil && a.NodeAffinity != nil && a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
		for _, t := range a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
			exprs = append(exprs, t.MatchExpressions)
		}
	}
	if len(exprs) == 0 {
		exprs = [][]corev1.NodeSelectorRequirement{nil}
	}
	var terms []string
	for _, term := range exprs {
		for k, v := range p.Spec.NodeSelector {
			term = append(term, corev1.NodeSelectorRequirement{Key: k, Operator: corev1.NodeSelectorOpIn, Values: []string{v}})
		}
		var failed []string
		for _, e := range term {
			if !meets(nodeLabels, e.Key, v1.RequirementOperator(e.Operator), e.Values) {
				failed = append(failed, fmt.Sprintf("%s %s %v (the node has %s)", e.Key, e.Operator, e.Values, labelOf(nodeLabels, e.Key)))
			}
		}
		terms = append(terms, "["+strings.Join(failed, ", ")+"]")
	}
	return "unmet " + strings.Join(terms, " or ")
}
