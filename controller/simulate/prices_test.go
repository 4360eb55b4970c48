package simulate

import (
	"math"
	"testing"

	dovetailv1alpha1 "github.com/dovetail-sh/dovetail/controller/apis/dovetail/v1alpha1"
	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
)

// A node is priced as its claim was planned (dovetail.sh/planned-price, the spot
// price the controller saw), not at the catalog's list price; a claim a
// commitment covered keeps the catalog's; and the catalog given is not changed.
func TestPredictionsPriceNodesAsTheControllerPlannedThem(t *testing.T) {
	types := westCatalog(t, westZones...)
	listPrice := func() float64 {
		for _, e := range types.InstanceTypes {
			if e.Name != "m6i.xlarge" {
				continue
			}
			for _, o := range e.Offerings {
				if o.Zone == "us-west-2a" && o.CapacityType == v1.CapacityTypeSpot {
					return o.Price
				}
			}
		}
		t.Fatal("the catalog has no spot m6i.xlarge in us-west-2a")
		return 0
	}
	list := listPrice()
	sc := newSnapshotCluster(t, types, onlyM6i)
	planned := sc.node("m6i.xlarge", "us-west-2a", v1.CapacityTypeSpot)
	sc.pod(planned, "3", "8Gi", map[string]string{"app": "a"})
	claim := sc.objects[len(sc.objects)-3].(*v1.NodeClaim)
	claim.Annotations = map[string]string{dovetailv1alpha1.PlannedPriceAnnotationKey: "0.050000"}
	covered := sc.node("m6i.xlarge", "us-west-2a", v1.CapacityTypeSpot)
	sc.pod(covered, "3", "8Gi", map[string]string{"app": "b"})
	claim = sc.objects[len(sc.objects)-3].(*v1.NodeClaim)
	claim.Annotations = map[string]string{dovetailv1alpha1.PlannedPriceAnnotationKey: "0.000000", dovetailv1alpha1.CoveredByAnnotationKey: "ri-1"}

	report, table := sc.consolidate(types, false)
	// Both nodes are the same offering: the one plain planned price prices both.
	if want := 2 * 0.05; math.Abs(report.Summary.PricePerHourBefore-want) > 1e-6 {
		t.Errorf("the nodes cost $%.4f/h before; want their planned $%.4f/h, not the list $%.4f/h each\n%s", report.Summary.PricePerHourBefore, want, list, table)
	}
	if listPrice() != list {
		t.Errorf("the catalog given was changed: spot m6i.xlarge now $%.4f/h, was $%.4f/h", listPrice(), list)
	}
}
