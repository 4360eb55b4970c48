package scheduling

import (
	"fmt"
	"sort"

	"k8s.io/apimachinery/pkg/util/sets"

	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
)

// TemplatePlan is a claim of the pool for no pod: a static pool's node, launched
// from the pool's template as the cheapest type its requirements allow (with the
// others as options, cheapest first), as Karpenter lets the cloud provider pick.
func TemplatePlan(np *v1.NodePool, types []*InstanceType) (*NodeClaimPlan, error) {
	reqs, err := templateRequirements(np)
	if err != nil {
		return nil, err
	}
	prices := map[*InstanceType]Offering{}
	var options []*InstanceType
	for _, it := range types {
		if !it.compatible(reqs) {
			continue
		}
		if o, ok := it.cheapestOffering(reqs); ok {
			prices[it] = o
			options = append(options, it)
		}
	}
	if len(options) == 0 {
		return nil, fmt.Errorf("nodepool %s: no instance type with an available offering meets its requirements", np.Name)
	}
	sort.SliceStable(options, func(i, j int) bool {
		pi, pj := prices[options[i]].Price, prices[options[j]].Price
		if pi != pj {
			return pi < pj
		}
		return options[i].Name < options[j].Name
	})
	names := make([]string, len(options))
	for i, it := range options {
		names[i] = it.Name
	}
	itReq := MustRequirement(v1.LabelInstanceType, v1.OpIn, names...)
	if existing := reqs.Get(v1.LabelInstanceType); existing != nil {
		itReq.MinValues = existing.MinValues
	}
	reqs[v1.LabelInstanceType] = itReq
	return &NodeClaimPlan{
		NodePool: np.Name, Requirements: reqs,
		Labels: np.Spec.Template.Labels, Annotations: np.Spec.Template.Annotations,
		Taints: np.Spec.Template.Spec.Taints, StartupTaints: np.Spec.Template.Spec.StartupTaints,
		InstanceTypeOptions: options, InstanceType: options[0], Offering: prices[options[0]],
	}, nil
}

// templateRequirements are what a node from the pool's template requires.
func templateRequirements(np *v1.NodePool) (Requirements, error) {
	reqs, err := FromNodePoolRequirements(np.Spec.Template.Spec.Requirements)
	if err != nil {
		return nil, fmt.Errorf("nodepool %s: spec.template.spec.requirements: %w", np.Name, err)
	}
	for k, v := range np.Spec.Template.Labels {
		reqs.Add(MustRequirement(k, v1.OpIn, v))
	}
	reqs.Add(MustRequirement(v1.LabelNodePool, v1.OpIn, np.Name))
	return reqs, nil
}

// TemplateReservationsFull reports whether a node from the pool's template can only
// be launched into capacity reservations, all of them full (as Karpenter's static
// pools check before terminating first); offered names those reservations, whose
// nodes free a place for the template when they go.
func TemplateReservationsFull(np *v1.NodePool, types []*InstanceType) (full bool, offered sets.Set[string], err error) {
	reqs, err := templateRequirements(np)
	if err != nil {
		return false, nil, err
	}
	zone, ct := reqs.Get(v1.LabelTopologyZone), reqs.Get(v1.LabelCapacityType)
	offered = sets.New[string]()
	for _, it := range types {
		if !it.labelsMeet(reqs) {
			continue
		}
		for _, o := range it.Offerings {
			if !zone.Has(o.Zone) || !ct.Has(o.CapacityType) {
				continue
			}
			if o.CapacityType != v1.CapacityTypeReserved || o.Available {
				return false, nil, nil
			}
			offered.Insert(o.ReservationID)
		}
	}
	return offered.Len() > 0, offered, nil
}
