package metrics

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/dovetail-sh/dovetail/controller/cloudprovider/fake"
	"github.com/dovetail-sh/dovetail/controller/scheduling"
)

// Two pools sharing a type serve each series once (a registry refuses duplicates),
// the pool first by name gives a shared offering's value, and a newer list
// replaces the older one: a type the provider no longer returns is no longer served.
func TestInstanceTypeGaugesServeTheLatestListsOnce(t *testing.T) {
	shared := fake.InstanceType("m5.large", "2", "8Gi", "zone-a", "zone-b")
	cheaper := fake.InstanceType("m5.large", "2", "8Gi", "zone-a")
	cheaper.Offerings[0].Price = 0.05
	cheaper.Offerings[0].Available = false
	gone := fake.InstanceType("c5.xlarge", "4", "8Gi", "zone-a")

	c := &instanceTypeCollector{}
	c.record("b-pool", []*scheduling.InstanceType{cheaper})
	c.record("a-pool", []*scheduling.InstanceType{shared, gone})
	registry := prometheus.NewPedanticRegistry()
	registry.MustRegister(c)

	want := `
# HELP karpenter_cloudprovider_instance_type_cpu_cores vCPUs of the instance type.
# TYPE karpenter_cloudprovider_instance_type_cpu_cores gauge
karpenter_cloudprovider_instance_type_cpu_cores{instance_type="c5.xlarge"} 4
karpenter_cloudprovider_instance_type_cpu_cores{instance_type="m5.large"} 2
# HELP karpenter_cloudprovider_instance_type_offering_available 1 when the offering can be launched now, 0 when the provider marked it unavailable.
# TYPE karpenter_cloudprovider_instance_type_offering_available gauge
karpenter_cloudprovider_instance_type_offering_available{capacity_type="on-demand",instance_type="c5.xlarge",zone="zone-a"} 1
karpenter_cloudprovider_instance_type_offering_available{capacity_type="on-demand",instance_type="m5.large",zone="zone-a"} 1
karpenter_cloudprovider_instance_type_offering_available{capacity_type="on-demand",instance_type="m5.large",zone="zone-b"} 1
`
	names := []string{"karpenter_cloudprovider_instance_type_cpu_cores", "karpenter_cloudprovider_instance_type_offering_available"}
	if err := testutil.GatherAndCompare(registry, strings.NewReader(want), names...); err != nil {
		t.Fatal(err)
	}
	if n := testutil.CollectAndCount(c); n != 2*2+2*3 {
		t.Fatalf("served %d series, want 10 (2 types x cpu and memory, 3 offerings x available and price)", n)
	}

	c.record("a-pool", []*scheduling.InstanceType{shared})
	want = `
# HELP karpenter_cloudprovider_instance_type_offering_price_estimate Hourly price the engine plans the offering with.
# TYPE karpenter_cloudprovider_instance_type_offering_price_estimate gauge
karpenter_cloudprovider_instance_type_offering_price_estimate{capacity_type="on-demand",instance_type="m5.large",zone="zone-a"} 0.1
karpenter_cloudprovider_instance_type_offering_price_estimate{capacity_type="on-demand",instance_type="m5.large",zone="zone-b"} 0.1
`
	if err := testutil.GatherAndCompare(registry, strings.NewReader(want), "karpenter_cloudprovider_instance_type_offering_price_estimate"); err != nil {
		t.Fatal(err)
	}
	if n := testutil.CollectAndCount(c, "karpenter_cloudprovider_instance_type_cpu_cores"); n != 1 {
		t.Fatalf("served cpu cores of %d types after c5.xlarge left the list, want 1", n)
	}
}
