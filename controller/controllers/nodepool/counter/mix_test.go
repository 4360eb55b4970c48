package counter

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/controller/capacitymix"
)

// dovetail_nodepool_capacity_mix_nodes reports a pool's nodes by capacity type
// when the pool states a mix, counting a claim still launching that may be spot
// as spot; a pool without a mix has no series.
func TestCapacityMixMetric(t *testing.T) {
	as := func(ct string) func(*v1.NodeClaim) {
		return func(nc *v1.NodeClaim) { nc.Labels[v1.LabelCapacityType] = ct }
	}
	mixed := pool("mixed", "default")
	mixed.Annotations = map[string]string{capacitymix.OnDemandBaseAnnotationKey: "1", capacitymix.SpotPercentAnnotationKey: "50"}
	launching := launched("mixed-c", "mixed", "4", "16Gi")
	launching.Status.ProviderID = ""
	kube, c := setup(t, mixed, pool("plain", "default"), readyClass("default"),
		launched("mixed-a", "mixed", "4", "16Gi", as(v1.CapacityTypeOnDemand)),
		launched("mixed-b", "mixed", "4", "16Gi", as(v1.CapacityTypeSpot)),
		launching,
		launched("plain-a", "plain", "4", "16Gi", as(v1.CapacityTypeSpot)))
	for _, name := range []string{"mixed", "plain"} {
		np := &v1.NodePool{}
		if err := kube.Get(context.Background(), client.ObjectKey{Name: name}, np); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Reconcile(context.Background(), np); err != nil {
			t.Fatal(err)
		}
	}
	if od, spot := testutil.ToFloat64(capacityMix.WithLabelValues("mixed", v1.CapacityTypeOnDemand)), testutil.ToFloat64(capacityMix.WithLabelValues("mixed", v1.CapacityTypeSpot)); od != 1 || spot != 2 {
		t.Errorf("mixed: %v on-demand, %v spot; want 1 and 2 (the launching claim may be spot)", od, spot)
	}
	capacityMix.DeleteLabelValues("mixed", v1.CapacityTypeOnDemand)
	capacityMix.DeleteLabelValues("mixed", v1.CapacityTypeSpot)
	if n := testutil.CollectAndCount(capacityMix); n != 0 {
		t.Errorf("%d series besides the mixed pool's; a pool without a mix has none", n)
	}
}
