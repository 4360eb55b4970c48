package scheduling

import (
	"fmt"
	"sort"

	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
)

// TemplatePlan is a claim of the pool for no pod: a static pool's node, launched
// from the pool's template as the cheapest type its requirements allow (with the
// others as options, cheapest first), as Karpenter lets the cloud provider pick.
func TemplatePlan(np *v1.NodePool, types []*InstanceType) (*NodeClaimPlan, error) {
	reqs, err := FromNodePoolRequirements(np.Spec.Template.Spec.Requirements)
	if err != nil {
		return nil, fmt.Errorf("nodepool %s: spec.template.spec.requirements: %w", np.Name, err)
	}
	for k, v := range np.Spec.Template.Labels {
		reqs.Add(MustRequirement(k, v1.OpIn, v))
	}
	reqs.Add(MustRequirement(v1.LabelNodePool, v1.OpIn, np.Name))
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
