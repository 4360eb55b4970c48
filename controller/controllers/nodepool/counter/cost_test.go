package counter

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	fakecloud "github.com/dovetail-sh/dovetail/controller/cloudprovider/fake"
	"github.com/dovetail-sh/dovetail/controller/metrics"
)

// karpenter_nodepools_cost_total is the hourly price of the pool's launched nodes at
// their offerings' prices; a node whose offering has no price counts as an error.
func TestNodePoolCost(t *testing.T) {
	on := func(instanceType, zone string) func(*v1.NodeClaim) {
		return func(nc *v1.NodeClaim) {
			nc.Labels[v1.LabelInstanceType], nc.Labels[v1.LabelTopologyZone], nc.Labels[v1.LabelCapacityType] = instanceType, zone, v1.CapacityTypeOnDemand
		}
	}
	notLaunched := launched("cost-c", "cost", "4", "16Gi", on("m.xlarge", "zone-a"))
	notLaunched.Status.ProviderID = ""
	kube, c := setup(t, pool("cost", "default"), readyClass("default"),
		launched("cost-a", "cost", "4", "16Gi", on("m.xlarge", "zone-a")),
		launched("cost-b", "cost", "4", "16Gi", on("m.xlarge", "zone-a")),
		launched("cost-gone", "cost", "4", "16Gi", on("m.retired", "zone-a")),
		notLaunched)
	c.cloud = fakecloud.New(clocktesting.NewFakeClock(start), fakecloud.InstanceType("m.xlarge", "4", "16Gi", "zone-a"))
	errorsBefore := testutil.ToFloat64(metrics.NodePoolCostTrackerErrors.WithLabelValues("cost"))
	np := &v1.NodePool{}
	if err := kube.Get(context.Background(), client.ObjectKey{Name: "cost"}, np); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Reconcile(context.Background(), np); err != nil {
		t.Fatal(err)
	}
	// Two m.xlarge at the fake's 0.1/h; the retired type has no price; the claim not
	// launched yet costs nothing.
	if got := testutil.ToFloat64(metrics.NodePoolCost.WithLabelValues("cost")); got < 0.1999 || got > 0.2001 {
		t.Errorf("cost %v, want 0.2", got)
	}
	if got := testutil.ToFloat64(metrics.NodePoolCostTrackerErrors.WithLabelValues("cost")) - errorsBefore; got != 1 {
		t.Errorf("cost tracker errors rose by %v, want 1 (the retired type)", got)
	}
}
