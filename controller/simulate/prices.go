package simulate

import (
	"slices"
	"strconv"

	dovetailv1alpha1 "github.com/dovetail-sh/dovetail/controller/apis/dovetail/v1alpha1"
	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/controller/apis/v1alpha1"
	"github.com/dovetail-sh/dovetail/controller/catalog"
)

// pricedAsPlanned is the catalog with each offering the input's NodeClaims were
// launched into priced as the controller planned it (dovetail.sh/planned-price):
// the controller prices from the cloud (spot prices, the Pricing API) where the
// catalog has only list prices, and a claim's price is the snapshot's word for
// what it paid. The newest claim of an offering wins. Claims a commitment covers
// or a NodeOverlay priced are left out: their planned price is not the offering's.
func pricedAsPlanned(cat *catalog.File, claims []*v1.NodeClaim) *catalog.File {
	type offering struct{ instanceType, zone, capacityType string }
	price := map[offering]float64{}
	newest := map[offering]*v1.NodeClaim{}
	for _, nc := range claims {
		raw, ok := nc.Annotations[dovetailv1alpha1.PlannedPriceAnnotationKey]
		if !ok || nc.Annotations[dovetailv1alpha1.CoveredByAnnotationKey] != "" || nc.Annotations[v1alpha1.PriceOverlayAppliedAnnotationKey] == "true" {
			continue
		}
		p, err := strconv.ParseFloat(raw, 64)
		if err != nil || p <= 0 {
			continue
		}
		o := offering{nc.Labels[v1.LabelInstanceType], nc.Labels[v1.LabelTopologyZone], nc.Labels[v1.LabelCapacityType]}
		if prev, ok := newest[o]; ok && prev.CreationTimestamp.After(nc.CreationTimestamp.Time) {
			continue
		}
		newest[o], price[o] = nc, p
	}
	if len(price) == 0 {
		return cat
	}
	out := &catalog.File{InstanceTypes: slices.Clone(cat.InstanceTypes)}
	for i := range out.InstanceTypes {
		e := &out.InstanceTypes[i]
		// The offerings are the given catalog's until one is repriced.
		cloned := false
		for j, o := range e.Offerings {
			if p, ok := price[offering{e.Name, o.Zone, o.CapacityType}]; ok {
				if !cloned {
					e.Offerings, cloned = slices.Clone(e.Offerings), true
				}
				e.Offerings[j].Price = p
			}
		}
	}
	return out
}
