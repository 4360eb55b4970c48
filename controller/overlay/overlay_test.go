package overlay

import (
	"math"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/controller/apis/v1alpha1"
	"github.com/dovetail-sh/dovetail/controller/scheduling"
)

func testType(name, family string, price float64) *scheduling.InstanceType {
	return scheduling.NewInstanceType(name, map[string]string{v1.LabelArch: "amd64", v1.LabelInstanceFamily: family},
		corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("16Gi"), corev1.ResourcePods: resource.MustParse("58")},
		[]scheduling.Offering{
			{Zone: "a", CapacityType: v1.CapacityTypeOnDemand, Price: price, Available: true},
			{Zone: "b", CapacityType: v1.CapacityTypeOnDemand, Price: price, Available: true},
			{Zone: "a", CapacityType: v1.CapacityTypeSpot, Price: price / 2, Available: true},
		}, scheduling.DefaultAllocatableSettings())
}

func nodePool(name string, labels map[string]string) *v1.NodePool {
	np := &v1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: name}}
	np.Spec.Template.Labels = labels
	return np
}

func nodeOverlay(name string, weight int32, mutate func(*v1alpha1.NodeOverlaySpec), reqs ...v1alpha1.NodeSelectorRequirement) *v1alpha1.NodeOverlay {
	o := &v1alpha1.NodeOverlay{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1alpha1.NodeOverlaySpec{Requirements: reqs}}
	if weight > 0 {
		o.Spec.Weight = &weight
	}
	mutate(&o.Spec)
	return o
}

func in(key string, values ...string) v1alpha1.NodeSelectorRequirement {
	return v1alpha1.NodeSelectorRequirement{Key: key, Operator: corev1.NodeSelectorOpIn, Values: values}
}

func ptr[T any](v T) *T { return &v }

func find(types []*scheduling.InstanceType, name string) *scheduling.InstanceType {
	for _, it := range types {
		if it.Name == name {
			return it
		}
	}
	return nil
}

func TestNodeOverlayAdjustedPrice(t *testing.T) {
	for _, tc := range []struct {
		base   float64
		change string
		want   float64
	}{{10, "-10%", 9}, {10, "-100%", 0}, {10, "+50%", 15}, {10, "-15", 0}, {1.25, "+0.75", 2}, {82781, "80.0", 80}, {3, "", 3}} {
		got, err := AdjustedPrice(tc.base, tc.change)
		if err != nil || math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("%v adjusted by %q: %v (%v), want %v", tc.base, tc.change, got, err, tc.want)
		}
	}
	if _, err := AdjustedPrice(1, "+x%"); err == nil {
		t.Error("a share that is no number was accepted")
	}
}

// TestNodeOverlayPriceAndCapacity: overlays select types by label, the pool's name
// and its template labels, and offerings by zone and capacity type; a price goes
// on the offerings selected, capacity on the whole type; weight decides, and equal
// weights over the same offerings conflict.
func TestNodeOverlayPriceAndCapacity(t *testing.T) {
	types := []*scheduling.InstanceType{testType("m.xlarge", "m", 0.2), testType("c.xlarge", "c", 0.17)}
	general, gpu := nodePool("general", nil), nodePool("gpu", map[string]string{"team": "ml"})
	pools := []Pool{{general, types}, {gpu, types}}
	overlays := []*v1alpha1.NodeOverlay{
		// Savings plan on m, on-demand only: 30% off.
		nodeOverlay("m-savings", 10, func(s *v1alpha1.NodeOverlaySpec) { s.PriceAdjustment = ptr("-30%") },
			in(v1.LabelInstanceFamily, "m"), in(v1.LabelCapacityType, v1.CapacityTypeOnDemand)),
		// A weightier flat price for m in zone b.
		nodeOverlay("m-zone-b", 20, func(s *v1alpha1.NodeOverlaySpec) { s.Price = ptr("0.05") },
			in(v1.LabelInstanceFamily, "m"), in(v1.LabelTopologyZone, "b")),
		// Hugepages on the ml team's pool only.
		nodeOverlay("hugepages", 0, func(s *v1alpha1.NodeOverlaySpec) {
			s.Capacity = corev1.ResourceList{"hugepages-2Mi": resource.MustParse("1Gi")}
		}, in("team", "ml")),
		// Same weight as m-savings over the same offerings: refused everywhere.
		nodeOverlay("a-clash", 10, func(s *v1alpha1.NodeOverlaySpec) { s.Price = ptr("1") }, in(v1.LabelInstanceFamily, "m")),
		nodeOverlay("bad", 0, func(s *v1alpha1.NodeOverlaySpec) {
			s.Capacity = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}
		}),
	}
	accepted, verdicts := Evaluate(overlays, pools)
	for name, want := range map[string]string{"m-savings": "", "m-zone-b": "", "hugepages": "", "a-clash": ReasonConflict, "bad": ReasonRuntimeValidation} {
		v := verdicts[name]
		if v.Applied != (want == "") || v.Reason != want {
			t.Errorf("%s: %+v, want reason %q", name, v, want)
		}
	}
	if !strings.Contains(verdicts["bad"].Message, "spec.capacity: cpu cannot be overlaid") {
		t.Errorf("bad's message: %s", verdicts["bad"].Message)
	}
	if len(accepted) != 3 || accepted[0].Name != "m-zone-b" {
		t.Fatalf("accepted %v; want m-zone-b first (weight 20)", accepted)
	}
	out := Apply(accepted, general, types)
	m := find(out, "m.xlarge")
	wantPrices := []float64{0.2 * 0.7, 0.05, 0.1}
	for i, o := range m.Offerings {
		if math.Abs(o.Price-wantPrices[i]) > 1e-9 {
			t.Errorf("m.xlarge %s/%s costs %v, want %v", o.Zone, o.CapacityType, o.Price, wantPrices[i])
		}
	}
	if !m.PriceOverlaid || m.CapacityOverlaid || math.Abs(m.CheapestPrice-0.05) > 1e-9 {
		t.Errorf("m.xlarge: price overlaid %v, capacity overlaid %v, cheapest %v", m.PriceOverlaid, m.CapacityOverlaid, m.CheapestPrice)
	}
	if c := find(out, "c.xlarge"); c != types[1] {
		t.Error("c.xlarge, which no overlay selects, was copied")
	}
	if types[0].Offerings[0].Price != 0.2 || types[0].PriceOverlaid {
		t.Error("Apply changed the types it was given")
	}
	ml := find(Apply(accepted, gpu, types), "c.xlarge")
	hugepages := int64(1 << 30)
	if !ml.CapacityOverlaid || ml.Capacity.Extended["hugepages-2Mi"] != hugepages || ml.Allocatable.Extended["hugepages-2Mi"] != hugepages {
		t.Errorf("c.xlarge of the ml pool: capacity %v, allocatable %v; want 1Gi of hugepages-2Mi", ml.Capacity.Extended, ml.Allocatable.Extended)
	}
	if got, want := ml.Allocatable.Memory, types[1].Allocatable.Memory-hugepages; got != want {
		t.Errorf("allocatable memory %d with 1Gi of hugepages, want %d", got, want)
	}
	if find(Apply(accepted, general, types), "c.xlarge").CapacityOverlaid {
		t.Error("hugepages applied to the general pool, whose template has no team=ml label")
	}
}

// TestNodeOverlayWeights: the heavier overlay's price stands (no stacking);
// capacity merges per resource, the heavier overlay's value winning.
func TestNodeOverlayWeights(t *testing.T) {
	types := []*scheduling.InstanceType{testType("m.xlarge", "m", 2)}
	np := nodePool("default", nil)
	overlays := []*v1alpha1.NodeOverlay{
		nodeOverlay("light", 10, func(s *v1alpha1.NodeOverlaySpec) {
			s.PriceAdjustment = ptr("-1.5")
			s.Capacity = corev1.ResourceList{"smarter-devices/fuse": resource.MustParse("5"), "hugepages-1Gi": resource.MustParse("2Gi")}
		}),
		nodeOverlay("heavy", 20, func(s *v1alpha1.NodeOverlaySpec) {
			s.PriceAdjustment = ptr("+201")
			s.Capacity = corev1.ResourceList{"smarter-devices/fuse": resource.MustParse("99")}
		}),
	}
	accepted, verdicts := Evaluate(overlays, []Pool{{np, types}})
	if !verdicts["light"].Applied || !verdicts["heavy"].Applied {
		t.Fatalf("verdicts %+v; overlays of different weights never conflict", verdicts)
	}
	m := Apply(accepted, np, types)[0]
	if m.Offerings[0].Price != 203 {
		t.Errorf("price %v, want 2+201 (the heavier overlay's, not stacked)", m.Offerings[0].Price)
	}
	if m.Capacity.Extended["smarter-devices/fuse"] != 99 || m.Capacity.Extended["hugepages-1Gi"] != 2<<30 {
		t.Errorf("capacity %v; want fuse 99 from heavy and 2Gi of hugepages-1Gi from light", m.Capacity.Extended)
	}
}
