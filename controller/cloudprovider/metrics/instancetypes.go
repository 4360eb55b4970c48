package metrics

import (
	"slices"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/dovetail-sh/dovetail/controller/scheduling"
)

var (
	offeringLabels    = []string{"instance_type", "capacity_type", "zone"}
	offeringAvailable = prometheus.NewDesc("karpenter_cloudprovider_instance_type_offering_available",
		"1 when the offering can be launched now, 0 when the provider marked it unavailable.", offeringLabels, nil)
	offeringPrice = prometheus.NewDesc("karpenter_cloudprovider_instance_type_offering_price_estimate",
		"Hourly price the engine plans the offering with.", offeringLabels, nil)
	typeCPU = prometheus.NewDesc("karpenter_cloudprovider_instance_type_cpu_cores",
		"vCPUs of the instance type.", []string{"instance_type"}, nil)
	typeMemory = prometheus.NewDesc("karpenter_cloudprovider_instance_type_memory_bytes",
		"Memory of the instance type.", []string{"instance_type"}, nil)
)

var instanceTypes = &instanceTypeCollector{}

// instanceTypeCollector serves the instance type and offering gauges when scraped,
// from the list the provider last returned for each NodePool. Gauge vectors would
// keep a child per type, capacity type and zone: about 12 MB of heap with the full
// catalog, held for values the provider's own cache already has.
type instanceTypeCollector struct {
	mu     sync.Mutex
	byPool map[string][]*scheduling.InstanceType
}

// record keeps the list a pool's types were last returned as. Providers hand out
// lists they do not change afterwards: a change comes as a new list.
func (c *instanceTypeCollector) record(pool string, types []*scheduling.InstanceType) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.byPool == nil {
		c.byPool = map[string][]*scheduling.InstanceType{}
	}
	c.byPool[pool] = types
}

func (c *instanceTypeCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{offeringAvailable, offeringPrice, typeCPU, typeMemory} {
		ch <- d
	}
}

// Collect emits each type and offering once. Pools can price the same offering
// differently (overlays); the pool first by name gives the value, so a scrape is
// stable.
func (c *instanceTypeCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	pools := make([]string, 0, len(c.byPool))
	for pool := range c.byPool {
		pools = append(pools, pool)
	}
	slices.Sort(pools)
	lists := make([][]*scheduling.InstanceType, len(pools))
	for i, pool := range pools {
		lists[i] = c.byPool[pool]
	}
	c.mu.Unlock()

	type offering struct{ instanceType, capacityType, zone string }
	types, offerings := map[string]bool{}, map[offering]bool{}
	for _, list := range lists {
		for _, it := range list {
			if !types[it.Name] {
				types[it.Name] = true
				ch <- prometheus.MustNewConstMetric(typeCPU, prometheus.GaugeValue, float64(it.Capacity.MilliCPU)/1000, it.Name)
				ch <- prometheus.MustNewConstMetric(typeMemory, prometheus.GaugeValue, float64(it.Capacity.Memory), it.Name)
			}
			for _, o := range it.Offerings {
				key := offering{it.Name, o.CapacityType, o.Zone}
				if offerings[key] {
					continue
				}
				offerings[key] = true
				available := 0.0
				if o.Available {
					available = 1
				}
				ch <- prometheus.MustNewConstMetric(offeringAvailable, prometheus.GaugeValue, available, it.Name, o.CapacityType, o.Zone)
				ch <- prometheus.MustNewConstMetric(offeringPrice, prometheus.GaugeValue, o.Price, it.Name, o.CapacityType, o.Zone)
			}
		}
	}
}
