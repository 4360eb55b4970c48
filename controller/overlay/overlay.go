// Package overlay applies NodeOverlays (karpenter.sh/v1alpha1) to the instance
// types a NodePool plans with: a price, a price adjustment or extended capacity
// for the types and offerings an overlay's requirements select, as Karpenter does.
// It does no I/O: the controller, `dovetail simulate` and the tests apply the same
// overlays the same way.
package overlay

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/controller/apis/v1alpha1"
	"github.com/dovetail-sh/dovetail/controller/scheduling"
)

// Condition reasons of an overlay that is not applied.
const (
	ReasonRuntimeValidation = "RuntimeValidation"
	ReasonConflict          = "Conflict"
)

// Verdict says whether an overlay applies, and if not why.
type Verdict struct {
	Applied bool
	Reason  string
	Message string
}

// Pool is a NodePool with the instance types it plans with, before overlays.
type Pool struct {
	NodePool *v1.NodePool
	Types    []*scheduling.InstanceType
}

// Order sorts overlays as Karpenter applies them: highest weight first (no weight
// counts 0), then by name, last first. The first overlay that sets a price or a
// resource wins.
func Order(overlays []*v1alpha1.NodeOverlay) []*v1alpha1.NodeOverlay {
	out := slices.Clone(overlays)
	slices.SortStableFunc(out, func(a, b *v1alpha1.NodeOverlay) int {
		if wa, wb := weight(a), weight(b); wa != wb {
			return int(wb - wa)
		}
		return strings.Compare(b.Name, a.Name)
	})
	return out
}

func weight(o *v1alpha1.NodeOverlay) int32 {
	if o.Spec.Weight == nil {
		return 0
	}
	return *o.Spec.Weight
}

// Validate checks what the CRD cannot: each requirement as a NodePool's would be
// checked, and no capacity for the resources a node's own size decides.
func Validate(o *v1alpha1.NodeOverlay) error {
	var errs []error
	for i, r := range o.Spec.Requirements {
		if _, err := requirement(r); err != nil {
			errs = append(errs, fmt.Errorf("spec.requirements[%d]: %w", i, err))
		}
		for _, msg := range validation.IsQualifiedName(r.Key) {
			errs = append(errs, fmt.Errorf("spec.requirements[%d].key %q: %s", i, r.Key, msg))
		}
		if r.Key == v1.LabelCapacityType && r.Operator == corev1.NodeSelectorOpIn &&
			!slices.ContainsFunc(r.Values, func(v string) bool {
				return v == v1.CapacityTypeOnDemand || v == v1.CapacityTypeSpot || v == v1.CapacityTypeReserved
			}) {
			errs = append(errs, fmt.Errorf("spec.requirements[%d]: %s must allow one of on-demand, spot or reserved", i, v1.LabelCapacityType))
		}
	}
	for name := range o.Spec.Capacity {
		switch name {
		case corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourceEphemeralStorage, corev1.ResourcePods:
			errs = append(errs, fmt.Errorf("spec.capacity: %s cannot be overlaid (a node's own size decides it); overlay extended resources only", name))
		}
	}
	if o.Spec.Price != nil && o.Spec.PriceAdjustment != nil {
		errs = append(errs, errors.New("spec: set price or priceAdjustment, not both"))
	}
	for _, p := range []*string{o.Spec.Price, o.Spec.PriceAdjustment} {
		if p != nil {
			if _, err := AdjustedPrice(1, *p); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

func requirement(r v1alpha1.NodeSelectorRequirement) (*scheduling.Requirement, error) {
	return scheduling.NewRequirement(r.Key, v1.RequirementOperator(r.Operator), r.Values...)
}

// AdjustedPrice is the price after an overlay: "1.5" replaces it; "+0.5"/"-0.5"
// add to it; "+10%"/"-10%" scale it. An adjustment never takes a price below 0.
func AdjustedPrice(base float64, change string) (float64, error) {
	if change == "" {
		return base, nil
	}
	if change[0] != '+' && change[0] != '-' {
		p, err := strconv.ParseFloat(change, 64)
		if err != nil || p < 0 {
			return 0, fmt.Errorf("spec.price %q is not a price in dollars per hour such as \"0.25\"", change)
		}
		return p, nil
	}
	var adjusted float64
	if pct, ok := strings.CutSuffix(change, "%"); ok {
		f, err := strconv.ParseFloat(pct, 64)
		if err != nil {
			return 0, fmt.Errorf("spec.priceAdjustment %q is not a share such as \"+10%%\" or \"-15%%\"", change)
		}
		adjusted = base * (1 + f/100)
	} else {
		f, err := strconv.ParseFloat(change, 64)
		if err != nil {
			return 0, fmt.Errorf("spec.priceAdjustment %q is not an amount such as \"+0.5\" or \"-0.1\"", change)
		}
		adjusted = base + f
	}
	return math.Max(adjusted, 0), nil
}

// overlaid is what the overlays accepted so far set in one pool: per type, the
// weight that set each offering's price and each resource.
type overlaid struct {
	price    map[string]map[int]int32
	capacity map[string]map[corev1.ResourceName]int32
}

func newOverlaid() *overlaid {
	return &overlaid{price: map[string]map[int]int32{}, capacity: map[string]map[corev1.ResourceName]int32{}}
}

// matches says which offerings of the type (by index) the overlay selects; none
// when the type's labels (with the pool's name and template labels) do not meet it.
func matches(reqs []*scheduling.Requirement, np *v1.NodePool, it *scheduling.InstanceType) []int {
	labels := it.Requirements.Labels()
	labels[v1.LabelNodePool] = np.Name
	for k, v := range np.Spec.Template.Labels {
		labels[k] = v
	}
	var offeringReqs []*scheduling.Requirement
	for _, r := range reqs {
		if r.Key == v1.LabelTopologyZone || r.Key == v1.LabelCapacityType {
			offeringReqs = append(offeringReqs, r)
			continue
		}
		if !meets(r, labels) {
			return nil
		}
	}
	var selected []int
	for i, o := range it.Offerings {
		offering := map[string]string{v1.LabelTopologyZone: o.Zone, v1.LabelCapacityType: o.CapacityType}
		if !slices.ContainsFunc(offeringReqs, func(r *scheduling.Requirement) bool { return !meets(r, offering) }) {
			selected = append(selected, i)
		}
	}
	return selected
}

func meets(r *scheduling.Requirement, labels map[string]string) bool {
	if v, ok := labels[r.Key]; ok {
		return r.Has(v)
	}
	return r.AllowsAbsent()
}

// conflict reports whether accepting the overlay on the pool would set, at the
// same weight, a price or resource an accepted overlay set: Karpenter refuses such
// an overlay everywhere rather than pick one by name.
func (s *overlaid) conflict(o *v1alpha1.NodeOverlay, reqs []*scheduling.Requirement, pool Pool) bool {
	w := weight(o)
	for _, it := range pool.Types {
		offerings := matches(reqs, pool.NodePool, it)
		if len(offerings) == 0 {
			continue
		}
		if o.Spec.Price != nil || o.Spec.PriceAdjustment != nil {
			for _, i := range offerings {
				if set, ok := s.price[it.Name][i]; ok && set == w {
					return true
				}
			}
		}
		for name := range o.Spec.Capacity {
			if set, ok := s.capacity[it.Name][name]; ok && set == w {
				return true
			}
		}
	}
	return false
}

// accept records what the overlay sets on the pool, where nothing set it first.
func (s *overlaid) accept(o *v1alpha1.NodeOverlay, reqs []*scheduling.Requirement, pool Pool) {
	w := weight(o)
	for _, it := range pool.Types {
		offerings := matches(reqs, pool.NodePool, it)
		if len(offerings) == 0 {
			continue
		}
		if o.Spec.Price != nil || o.Spec.PriceAdjustment != nil {
			if s.price[it.Name] == nil {
				s.price[it.Name] = map[int]int32{}
			}
			for _, i := range offerings {
				if _, ok := s.price[it.Name][i]; !ok {
					s.price[it.Name][i] = w
				}
			}
		}
		for name := range o.Spec.Capacity {
			if s.capacity[it.Name] == nil {
				s.capacity[it.Name] = map[corev1.ResourceName]int32{}
			}
			if _, ok := s.capacity[it.Name][name]; !ok {
				s.capacity[it.Name][name] = w
			}
		}
	}
}

// Evaluate decides which overlays apply: in Order, an overlay whose requirements
// or capacity are invalid, or that would set at the same weight what an accepted
// overlay set on any pool, applies nowhere. It returns the accepted overlays, in
// the order they apply, and a verdict per overlay name.
func Evaluate(overlays []*v1alpha1.NodeOverlay, pools []Pool) ([]*v1alpha1.NodeOverlay, map[string]Verdict) {
	verdicts := map[string]Verdict{}
	state := make([]*overlaid, len(pools))
	for i := range pools {
		state[i] = newOverlaid()
	}
	var accepted []*v1alpha1.NodeOverlay
	for _, o := range Order(overlays) {
		if err := Validate(o); err != nil {
			verdicts[o.Name] = Verdict{Reason: ReasonRuntimeValidation, Message: err.Error()}
			continue
		}
		reqs := requirementsOf(o)
		conflict := ""
		for i, p := range pools {
			if state[i].conflict(o, reqs, p) {
				conflict = p.NodePool.Name
				break
			}
		}
		if conflict != "" {
			verdicts[o.Name] = Verdict{Reason: ReasonConflict, Message: fmt.Sprintf("conflict with another overlay of weight %d over the same offerings or resources of nodepool %s; give one a higher weight", weight(o), conflict)}
			continue
		}
		for i, p := range pools {
			state[i].accept(o, reqs, p)
		}
		accepted = append(accepted, o)
		verdicts[o.Name] = Verdict{Applied: true}
	}
	return accepted, verdicts
}

func requirementsOf(o *v1alpha1.NodeOverlay) []*scheduling.Requirement {
	out := make([]*scheduling.Requirement, 0, len(o.Spec.Requirements))
	for _, r := range o.Spec.Requirements {
		if req, err := requirement(r); err == nil {
			out = append(out, req)
		}
	}
	return out
}

// Apply returns the pool's types with the accepted overlays (in Evaluate's order)
// applied: each offering takes the price of the first overlay that selects it,
// each type the resources of the first overlay that sets each. Types an overlay
// changes are copies; the rest are shared.
func Apply(accepted []*v1alpha1.NodeOverlay, np *v1.NodePool, types []*scheduling.InstanceType) []*scheduling.InstanceType {
	if len(accepted) == 0 {
		return types
	}
	reqs := make([][]*scheduling.Requirement, len(accepted))
	for i, o := range accepted {
		reqs[i] = requirementsOf(o)
	}
	out := make([]*scheduling.InstanceType, len(types))
	for t, it := range types {
		out[t] = it
		var priced map[int]bool
		var copied *scheduling.InstanceType
		own := func() *scheduling.InstanceType {
			if copied == nil {
				c := *it
				c.Offerings = slices.Clone(it.Offerings)
				c.Capacity.Extended = cloneExtended(it.Capacity.Extended)
				copied = &c
			}
			return copied
		}
		var added map[corev1.ResourceName]bool
		for i, o := range accepted {
			offerings := matches(reqs[i], np, it)
			if len(offerings) == 0 {
				continue
			}
			if change := priceChange(o); change != "" {
				for _, idx := range offerings {
					if priced[idx] {
						continue
					}
					if priced == nil {
						priced = map[int]bool{}
					}
					priced[idx] = true
					c := own()
					// Validate accepted the change; a parse error cannot happen here.
					c.Offerings[idx].Price, _ = AdjustedPrice(it.Offerings[idx].Price, change)
					c.PriceOverlaid = true
				}
			}
			for name, q := range o.Spec.Capacity {
				if added[name] {
					continue
				}
				if added == nil {
					added = map[corev1.ResourceName]bool{}
				}
				added[name] = true
				c := own()
				c.Capacity.Extended[name] = scheduling.FromResourceList(corev1.ResourceList{name: q}).Extended[name]
				c.CapacityOverlaid = true
			}
		}
		if copied != nil {
			copied.Refresh()
			out[t] = copied
		}
	}
	return out
}

func priceChange(o *v1alpha1.NodeOverlay) string {
	switch {
	case o.Spec.Price != nil:
		return *o.Spec.Price
	case o.Spec.PriceAdjustment != nil:
		return *o.Spec.PriceAdjustment
	}
	return ""
}

func cloneExtended(m map[corev1.ResourceName]int64) map[corev1.ResourceName]int64 {
	out := make(map[corev1.ResourceName]int64, len(m)+1)
	for k, v := range m {
		out[k] = v
	}
	return out
}
