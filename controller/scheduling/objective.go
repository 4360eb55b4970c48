package scheduling

import "math"

// chooseTarget picks the instance type a new claim is sized for: the one with the
// lowest price per share of the outstanding demand it can hold. While much demand
// remains this is the type with the best price for the demand's cpu:memory mix; near
// the end it is the cheapest type that holds what is left.
func chooseTarget(options []*InstanceType, reqs Requirements, overhead, demand Resources) *InstanceType {
	var best *InstanceType
	bestScore := math.Inf(1)
	for _, it := range options {
		o, ok := it.cheapestOffering(reqs)
		if !ok {
			continue
		}
		usable := it.Allocatable.Sub(overhead)
		frac := 1.0
		if demand.MilliCPU > 0 {
			frac = min(frac, float64(usable.MilliCPU)/float64(demand.MilliCPU))
		}
		if demand.Memory > 0 {
			frac = min(frac, float64(usable.Memory)/float64(demand.Memory))
		}
		if demand.Pods > 0 {
			frac = min(frac, float64(usable.Pods)/float64(demand.Pods))
		}
		for k, v := range demand.Extended {
			if v > 0 {
				frac = min(frac, float64(usable.Extended[k])/float64(v))
			}
		}
		if frac <= 0 {
			continue
		}
		score := o.Price / frac
		if best == nil || score < bestScore-1e-12 {
			best, bestScore = it, score
		}
	}
	if best == nil {
		return options[0]
	}
	return best
}
