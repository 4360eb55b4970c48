// Package scheduling is Dovetail's scheduling engine. It is pure: it takes pods, nodes,
// NodePools and instance types as values and returns a plan, with no client and no I/O,
// so provisioning, disruption and `dovetail simulate` all run the same code.
package scheduling

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"

	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
)

// Requirement is the set of values one label key may take. A set is either a finite
// list (In) or the complement of one (NotIn, Exists), optionally bounded for numeric
// values (Gt, Lt). Representing every operator this way makes intersection closed,
// which is what lets pod, NodePool and instance-type constraints be combined freely.
type Requirement struct {
	Key        string
	complement bool
	values     sets.Set[string]
	// greaterThan and lessThan are exclusive integer bounds.
	greaterThan *int
	lessThan    *int
	// requireExists is set by In, Exists, Gt and Lt: unlike NotIn and DoesNotExist,
	// a node without the label does not satisfy them.
	requireExists bool
	MinValues     *int
}

// NewRequirement builds a requirement from an operator and its values. Gte and Lte are
// folded into exclusive bounds. Unknown operators and non-integer bounds are errors.
func NewRequirement(key string, op v1.RequirementOperator, values ...string) (*Requirement, error) {
	key = normalizeKey(key)
	r := &Requirement{Key: key, values: sets.New[string]()}
	switch op {
	case v1.OpIn:
		r.values.Insert(values...)
		r.requireExists = true
	case v1.OpNotIn:
		r.complement = true
		r.values.Insert(values...)
	case v1.OpExists:
		r.complement = true
		r.requireExists = true
	case v1.OpDoesNotExist:
	case v1.OpGt, v1.OpLt, v1.OpGte, v1.OpLte:
		if len(values) != 1 {
			return nil, fmt.Errorf("requirement %s %s needs exactly one integer value, got %d", key, op, len(values))
		}
		n, err := strconv.Atoi(values[0])
		if err != nil {
			return nil, fmt.Errorf("requirement %s %s needs an integer value, got %q", key, op, values[0])
		}
		// Gte and Lte fold into exclusive bounds one step out, which must exist.
		if (op == v1.OpGte && n == math.MinInt) || (op == v1.OpLte && n == math.MaxInt) {
			return nil, fmt.Errorf("requirement %s %s %s is out of range; use an integer from %d to %d", key, op, values[0], math.MinInt+1, math.MaxInt-1)
		}
		r.complement = true
		r.requireExists = true
		switch op {
		case v1.OpGt:
			r.greaterThan = &n
		case v1.OpGte:
			n--
			r.greaterThan = &n
		case v1.OpLt:
			r.lessThan = &n
		case v1.OpLte:
			n++
			r.lessThan = &n
		}
	default:
		return nil, fmt.Errorf("requirement %s has unknown operator %q; use In, NotIn, Exists, DoesNotExist, Gt, Lt, Gte or Lte", key, op)
	}
	return r, nil
}

// MustRequirement is NewRequirement for literals known to be valid.
func MustRequirement(key string, op v1.RequirementOperator, values ...string) *Requirement {
	r, err := NewRequirement(key, op, values...)
	if err != nil {
		panic(err)
	}
	return r
}

func normalizeKey(key string) string {
	if k, ok := v1.NormalizedLabels[key]; ok {
		return k
	}
	return key
}

// Has reports whether value is allowed.
func (r *Requirement) Has(value string) bool {
	if r.complement {
		return !r.values.Has(value) && r.withinBounds(value)
	}
	return r.values.Has(value) && r.withinBounds(value)
}

func (r *Requirement) withinBounds(value string) bool {
	if r.greaterThan == nil && r.lessThan == nil {
		return true
	}
	n, err := strconv.Atoi(value)
	if err != nil {
		return false
	}
	return (r.greaterThan == nil || n > *r.greaterThan) && (r.lessThan == nil || n < *r.lessThan)
}

// Len is the number of allowed values; effectively infinite for complements.
func (r *Requirement) Len() int {
	if r.complement {
		return math.MaxInt64 - r.values.Len()
	}
	return r.values.Len()
}

// Any returns one allowed value of a finite set, for pinning; the smallest, so that
// results are deterministic.
func (r *Requirement) Any() (string, bool) {
	if r.complement || r.values.Len() == 0 {
		return "", false
	}
	return sets.List(r.values)[0], true
}

// Values returns the allowed values of a finite set, sorted.
func (r *Requirement) Values() []string {
	if r.complement {
		return nil
	}
	return sets.List(r.values)
}

// AllowsAbsent reports whether a node without the label satisfies the requirement.
// An In whose values an intersection emptied (In [t4] and In [h100]) allows nothing,
// absence included: it is not DoesNotExist, though it lists no value either.
func (r *Requirement) AllowsAbsent() bool {
	return !r.requireExists && (r.complement || r.values.Len() == 0)
}

// Satisfiable reports whether some node meets the requirement: with some value, or
// without the label.
func (r *Requirement) Satisfiable() bool {
	return !r.Empty() || r.AllowsAbsent()
}

// Operator returns the operator that describes the set.
func (r *Requirement) Operator() v1.RequirementOperator {
	switch {
	case r.complement && (r.greaterThan != nil || r.lessThan != nil):
		if r.greaterThan != nil {
			return v1.OpGt
		}
		return v1.OpLt
	case r.complement && r.values.Len() == 0:
		return v1.OpExists
	case r.complement:
		return v1.OpNotIn
	case r.values.Len() == 0:
		return v1.OpDoesNotExist
	default:
		return v1.OpIn
	}
}

// Intersection is the set of values both allow.
func (r *Requirement) Intersection(o *Requirement) *Requirement {
	out := &Requirement{Key: r.Key, greaterThan: maxPtr(r.greaterThan, o.greaterThan), lessThan: minPtr(r.lessThan, o.lessThan)}
	out.MinValues = maxPtr(r.MinValues, o.MinValues)
	out.requireExists = r.requireExists || o.requireExists
	switch {
	case r.complement && o.complement:
		out.complement = true
		out.values = r.values.Union(o.values)
	case r.complement:
		out.values = sets.New[string]()
		for v := range o.values {
			if r.Has(v) {
				out.values.Insert(v)
			}
		}
	case o.complement:
		out.values = sets.New[string]()
		for v := range r.values {
			if o.Has(v) {
				out.values.Insert(v)
			}
		}
	default:
		out.values = r.values.Intersection(o.values)
	}
	if !out.complement && (out.greaterThan != nil || out.lessThan != nil) {
		for v := range out.values {
			if !out.withinBounds(v) {
				out.values.Delete(v)
			}
		}
		out.greaterThan, out.lessThan = nil, nil
	}
	return out
}

// Overlaps reports whether some value is allowed by both, without building the
// intersection: the hot path of instance-type filtering.
func (r *Requirement) Overlaps(o *Requirement) bool {
	switch {
	case !r.complement:
		for v := range r.values {
			if o.Has(v) && r.withinBounds(v) {
				return true
			}
		}
		return false
	case !o.complement:
		for v := range o.values {
			if r.Has(v) && o.withinBounds(v) {
				return true
			}
		}
		return false
	default:
		gt, lt := maxPtr(r.greaterThan, o.greaterThan), minPtr(r.lessThan, o.lessThan)
		return gt == nil || lt == nil || integerBetween(*gt, *lt)
	}
}

// integerBetween reports whether some integer v has gt < v < lt, without the
// overflow of lt-gt on far-apart bounds.
func integerBetween(gt, lt int) bool {
	return gt < math.MaxInt && gt+1 < lt
}

// Empty reports whether no value is allowed. A DoesNotExist requirement is empty: it
// is satisfied only by the label's absence.
func (r *Requirement) Empty() bool {
	if r.complement {
		return r.greaterThan != nil && r.lessThan != nil && !integerBetween(*r.greaterThan, *r.lessThan)
	}
	return r.values.Len() == 0
}

func (r *Requirement) String() string {
	op := r.Operator()
	switch op {
	case v1.OpExists, v1.OpDoesNotExist:
		return fmt.Sprintf("%s %s", r.Key, op)
	case v1.OpGt, v1.OpLt:
		var parts []string
		if r.greaterThan != nil {
			parts = append(parts, fmt.Sprintf("%s Gt %d", r.Key, *r.greaterThan))
		}
		if r.lessThan != nil {
			parts = append(parts, fmt.Sprintf("%s Lt %d", r.Key, *r.lessThan))
		}
		if r.values.Len() > 0 {
			parts = append(parts, fmt.Sprintf("%s NotIn [%s]", r.Key, strings.Join(sets.List(r.values), ",")))
		}
		return strings.Join(parts, ", ")
	default:
		vals := sets.List(r.values)
		if len(vals) > 5 {
			vals = append(vals[:5], fmt.Sprintf("and %d others", r.values.Len()-5))
		}
		return fmt.Sprintf("%s %s [%s]", r.Key, op, strings.Join(vals, ","))
	}
}

func maxPtr(a, b *int) *int {
	if a == nil {
		return b
	}
	if b == nil || *a > *b {
		return a
	}
	return b
}

func minPtr(a, b *int) *int {
	if a == nil {
		return b
	}
	if b == nil || *a < *b {
		return a
	}
	return b
}

// Requirements is a conjunction of requirements, one per key.
type Requirements map[string]*Requirement

// NewRequirements combines requirements, intersecting those on the same key.
func NewRequirements(reqs ...*Requirement) Requirements {
	out := Requirements{}
	for _, r := range reqs {
		out.Add(r)
	}
	return out
}

// Add intersects r into the set.
func (rs Requirements) Add(r *Requirement) {
	if existing, ok := rs[r.Key]; ok {
		rs[r.Key] = existing.Intersection(r)
		return
	}
	rs[r.Key] = r
}

// Copy returns a shallow copy; Requirement values are never mutated in place.
func (rs Requirements) Copy() Requirements {
	out := make(Requirements, len(rs))
	for k, v := range rs {
		out[k] = v
	}
	return out
}

// Get returns the requirement on key, or Exists-anything when there is none.
func (rs Requirements) Get(key string) *Requirement {
	if r, ok := rs[key]; ok {
		return r
	}
	return &Requirement{Key: key, complement: true, values: sets.New[string]()}
}

// Keys returns the keys, sorted.
func (rs Requirements) Keys() []string {
	keys := make([]string, 0, len(rs))
	for k := range rs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func (rs Requirements) String() string {
	parts := make([]string, 0, len(rs))
	for _, k := range rs.Keys() {
		parts = append(parts, rs[k].String())
	}
	return strings.Join(parts, ", ")
}

// Intersects reports whether some node could satisfy both sets, and if not, why. Keys
// present only in the pod's set (o) must be well-known (an instance type provides
// them) or allow the label to be absent: a NodePool cannot grow a custom label it does
// not declare.
func (rs Requirements) Intersects(o Requirements) error {
	for key, want := range o {
		have, ok := rs[key]
		if !ok {
			if v1.WellKnownLabels.Has(key) || want.AllowsAbsent() {
				continue
			}
			return fmt.Errorf("label %q does not exist on the node, but the pod requires %s", key, want)
		}
		if have.AllowsAbsent() && want.AllowsAbsent() {
			continue
		}
		if !have.Overlaps(want) {
			return fmt.Errorf("%s does not match the node's %s", want, have)
		}
	}
	return nil
}

// Labels returns the single-valued requirements as labels: what a node launched under
// these requirements is known to carry.
func (rs Requirements) Labels() map[string]string {
	out := map[string]string{}
	for k, r := range rs {
		if !r.complement && r.values.Len() == 1 {
			out[k] = sets.List(r.values)[0]
		}
	}
	return out
}

// FromNodeSelectorTerm converts one node-affinity term.
func FromNodeSelectorTerm(term corev1.NodeSelectorTerm) (Requirements, error) {
	rs := Requirements{}
	for _, e := range term.MatchExpressions {
		r, err := NewRequirement(e.Key, v1.RequirementOperator(e.Operator), e.Values...)
		if err != nil {
			return nil, err
		}
		rs.Add(r)
	}
	return rs, nil
}

// FromLabels turns labels into In requirements.
func FromLabels(labels map[string]string) Requirements {
	rs := Requirements{}
	for k, v := range labels {
		rs.Add(MustRequirement(k, v1.OpIn, v))
	}
	return rs
}

// FromNodePoolRequirements converts a NodePool template's requirements.
func FromNodePoolRequirements(reqs []v1.NodePoolRequirement) (Requirements, error) {
	rs := Requirements{}
	for _, e := range reqs {
		r, err := NewRequirement(e.Key, e.Operator, e.Values...)
		if err != nil {
			return nil, err
		}
		r.MinValues = e.MinValues
		rs.Add(r)
	}
	return rs, nil
}

// ToNodeSelectorRequirements renders the set for a NodeClaim spec.
func (rs Requirements) ToNodeSelectorRequirements() []v1.NodeSelectorRequirementWithMinValues {
	out := make([]v1.NodeSelectorRequirementWithMinValues, 0, len(rs))
	for _, k := range rs.Keys() {
		r := rs[k]
		body := v1.RequirementBody{MinValues: r.MinValues}
		switch op := r.Operator(); op {
		case v1.OpGt, v1.OpLt:
			// A bounded complement may carry both bounds; emit each as its own term.
			if r.greaterThan != nil {
				out = append(out, v1.NodeSelectorRequirementWithMinValues{Key: k, RequirementBody: v1.RequirementBody{Operator: v1.OpGt, Values: []string{strconv.Itoa(*r.greaterThan)}}})
			}
			if r.lessThan != nil {
				out = append(out, v1.NodeSelectorRequirementWithMinValues{Key: k, RequirementBody: v1.RequirementBody{Operator: v1.OpLt, Values: []string{strconv.Itoa(*r.lessThan)}}})
			}
			if r.values.Len() > 0 {
				out = append(out, v1.NodeSelectorRequirementWithMinValues{Key: k, RequirementBody: v1.RequirementBody{Operator: v1.OpNotIn, Values: sets.List(r.values)}})
			}
			continue
		default:
			body.Operator = op
			body.Values = sets.List(r.values)
		}
		out = append(out, v1.NodeSelectorRequirementWithMinValues{Key: k, RequirementBody: body})
	}
	return out
}
