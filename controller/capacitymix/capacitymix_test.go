package capacitymix

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
)

// Growing one node at a time, each new node spot when the mix allows it, a pool
// of base 2 and 50% spot has its first 3 nodes on-demand, then alternates; and
// every count reached this way holds.
func TestMixGrowsAsEC2AutoScalingsBaseAndPercentage(t *testing.T) {
	m := Mix{OnDemandBase: 2, SpotPercent: 50}
	var c Counts
	var got []string
	for range 8 {
		if m.AllowsSpot(c) {
			c.Spot++
			got = append(got, "s")
		} else {
			c.OnDemand++
			got = append(got, "o")
		}
		if !m.Holds(c) {
			t.Fatalf("%s does not hold after %v", c, got)
		}
	}
	if want := "o o o s o s o s"; join(got) != want {
		t.Errorf("launched %s; want %s", join(got), want)
	}
	if (Mix{OnDemandBase: 0, SpotPercent: 100}).Holds(Counts{Spot: 5}) != true || (Mix{OnDemandBase: 1, SpotPercent: 100}).Holds(Counts{Spot: 1}) {
		t.Error("an all-spot mix refuses spot, or a base of 1 takes a lone spot node")
	}
}

func join(s []string) string {
	out := ""
	for i, x := range s {
		if i > 0 {
			out += " "
		}
		out += x
	}
	return out
}

func TestOfNamesTheAnnotationThatDoesNotParse(t *testing.T) {
	pool := func(a map[string]string) *karpv1.NodePool {
		return &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "p", Annotations: a}}
	}
	if _, ok, err := Of(pool(nil)); ok || err != nil {
		t.Errorf("a pool without the annotations has a mix: %v %v", ok, err)
	}
	if m, ok, err := Of(pool(map[string]string{OnDemandBaseAnnotationKey: "3"})); !ok || err != nil || m.OnDemandBase != 3 || m.SpotPercent != 100 {
		t.Errorf("base alone: %+v %v %v; want base 3, any share of spot beyond it", m, ok, err)
	}
	for _, bad := range []map[string]string{{SpotPercentAnnotationKey: "101"}, {SpotPercentAnnotationKey: "-1"}, {OnDemandBaseAnnotationKey: "x"}} {
		if _, _, err := Of(pool(bad)); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
}

// A removal of on-demand capacity or a spot replacement that would break the
// mix is refused; one that brings a broken mix closer is allowed.
func TestBreaks(t *testing.T) {
	m := Mix{OnDemandBase: 1, SpotPercent: 50}
	od := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{karpv1.LabelCapacityType: karpv1.CapacityTypeOnDemand}}, Status: karpv1.NodeClaimStatus{ProviderID: "x"}}
	spot := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{karpv1.LabelCapacityType: karpv1.CapacityTypeSpot}}, Status: karpv1.NodeClaimStatus{ProviderID: "y"}}
	before := Counts{OnDemand: 2, Spot: 1}
	if after := before.Without(od); !m.Breaks(before, Counts{OnDemand: after.OnDemand, Spot: after.Spot + 1}) {
		t.Error("replacing an on-demand node with spot (1 od, 2 spot) is allowed")
	}
	if !m.Breaks(before, before.Without(od)) {
		t.Error("removing an on-demand node (1 od, 1 spot) is allowed")
	}
	if m.Breaks(before, before.Without(spot)) {
		t.Error("removing the spot node is refused")
	}
	broken := Counts{OnDemand: 0, Spot: 3}
	if after := broken.Without(spot); m.Breaks(broken, Counts{OnDemand: after.OnDemand + 1, Spot: after.Spot}) {
		t.Error("a move toward the mix from a broken one is refused")
	}
}
