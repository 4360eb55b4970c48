package scheduling

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// explainNoInstanceType says which constraint ruled out every instance type.
func (s *solver) explainNoInstanceType(ps *poolState, reqs Requirements, need Resources) error {
	if len(ps.instanceTypes) == 0 {
		return fmt.Errorf("no instance type satisfies the NodePool's requirements%s", s.blockingRequirement(ps))
	}
	compatible, fitting := 0, 0
	var biggest Resources
	for _, it := range ps.instanceTypes {
		if !it.compatible(reqs) {
			continue
		}
		compatible++
		if need.Fits(it.Allocatable) {
			fitting++
		}
		if it.Allocatable.MilliCPU >= biggest.MilliCPU {
			biggest = it.Allocatable
		}
	}
	switch {
	case compatible == 0:
		return fmt.Errorf("no instance type satisfies requirements %s", reqs)
	case fitting == 0:
		return fmt.Errorf("no instance type has enough resources for requests %s (with daemonset overhead); %d types match the requirements, short of %s", need, compatible, strings.Join(need.Exceeding(biggest), ", "))
	case ps.spendCapped:
		return fmt.Errorf("the NodePool's limits %s would be exceeded: it spends %s of its %s limit of %s", formatLimits(ps.limits), FormatDollars(ps.spend), ResourceSpendPerHour, FormatDollars(ps.spendLimit))
	default:
		return fmt.Errorf("the NodePool's limits %s would be exceeded", formatLimits(ps.limits))
	}
}

// blockingRequirement names the NodePool requirements that no instance type meets on
// their own, so the user knows which line to change.
func (s *solver) blockingRequirement(ps *poolState) string {
	var all []*InstanceType
	seen := map[*InstanceType]bool{}
	for _, types := range s.catalogs {
		for _, it := range types {
			if !seen[it] {
				seen[it] = true
				all = append(all, it)
			}
		}
	}
	var blocking []string
	for _, key := range ps.requirements.Keys() {
		single := Requirements{key: ps.requirements[key]}
		ok := false
		for _, it := range all {
			if it.compatible(single) {
				ok = true
				break
			}
		}
		if !ok {
			blocking = append(blocking, ps.requirements[key].String())
		}
	}
	if len(blocking) == 0 {
		return " together"
	}
	return ": none offers " + strings.Join(blocking, "; ")
}

func formatLimits(l corev1.ResourceList) string {
	keys := make([]string, 0, len(l))
	for k := range l {
		keys = append(keys, string(k))
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		q := l[corev1.ResourceName(k)]
		parts = append(parts, fmt.Sprintf("%s=%s", k, q.String()))
	}
	return "{" + strings.Join(parts, ", ") + "}"
}
