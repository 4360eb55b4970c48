package pricing

import (
	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/controller/catalog"
)

// Offering is what the controller plans an offering at: the on-demand price it
// knows for the type (else the one listed), and for spot the zone's latest spot
// price when lower (spot never costs more; without history, plan with that).
func (p *Provider) Offering(instanceType, zone, capacityType string, listed float64) float64 {
	price := listed
	if od, ok := p.OnDemand(instanceType); ok {
		price = od
	}
	if capacityType == v1.CapacityTypeSpot {
		if s, ok := p.Spot(instanceType, zone); ok && s < price {
			price = s
		}
	}
	return price
}

// Priced is the catalog with every on-demand and spot offering at Offering's
// price; other offerings (reserved) keep theirs.
func (p *Provider) Priced(f *catalog.File) *catalog.File {
	out := &catalog.File{InstanceTypes: make([]catalog.Entry, len(f.InstanceTypes))}
	for i, e := range f.InstanceTypes {
		offerings := make([]catalog.Offering, len(e.Offerings))
		for j, o := range e.Offerings {
			if o.CapacityType == v1.CapacityTypeOnDemand || o.CapacityType == v1.CapacityTypeSpot {
				o.Price = p.Offering(e.Name, o.Zone, o.CapacityType, o.Price)
			}
			offerings[j] = o
		}
		e.Offerings = offerings
		out.InstanceTypes[i] = e
	}
	return out
}
