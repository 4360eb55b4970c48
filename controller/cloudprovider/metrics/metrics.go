// Package metrics wraps a CloudProvider to record Karpenter's
// karpenter_cloudprovider_* metrics for every call, whichever provider it is.
package metrics

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/utils/clock"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/controller/cloudprovider"
	"github.com/dovetail-sh/dovetail/controller/scheduling"
)

var (
	duration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: "karpenter", Subsystem: "cloudprovider", Name: "duration_seconds",
		Help:    "Duration of cloud provider method calls. Labeled by the controller, method name and provider.",
		Buckets: prometheus.ExponentialBuckets(0.005, 2, 14),
	}, []string{"controller", "method", "provider"})
	errorsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "karpenter", Subsystem: "cloudprovider", Name: "errors_total",
		Help: "Cloud provider method calls that failed, by calling controller, method, provider and error kind.",
	}, []string{"controller", "method", "provider", "error"})

	offeringLabels    = []string{"instance_type", "capacity_type", "zone"}
	offeringAvailable = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: "karpenter", Subsystem: "cloudprovider", Name: "instance_type_offering_available",
		Help: "1 when the offering can be launched now, 0 when the provider marked it unavailable.",
	}, offeringLabels)
	offeringPrice = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: "karpenter", Subsystem: "cloudprovider", Name: "instance_type_offering_price_estimate",
		Help: "Hourly price the engine plans the offering with.",
	}, offeringLabels)
	typeCPU = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: "karpenter", Subsystem: "cloudprovider", Name: "instance_type_cpu_cores",
		Help: "vCPUs of the instance type.",
	}, []string{"instance_type"})
	typeMemory = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: "karpenter", Subsystem: "cloudprovider", Name: "instance_type_memory_bytes",
		Help: "Memory of the instance type.",
	}, []string{"instance_type"})
)

// Collectors are the cloud provider metrics, registered at start.
var Collectors = []prometheus.Collector{duration, errorsTotal, offeringAvailable, offeringPrice, typeCPU, typeMemory}

func init() { crmetrics.Registry.MustRegister(Collectors...) }

// Decorate records every call controller makes of cp, timed by clk.
func Decorate(cp cloudprovider.CloudProvider, clk clock.PassiveClock, controller string) cloudprovider.CloudProvider {
	return &decorated{CloudProvider: cp, clock: clk, controller: controller}
}

type decorated struct {
	cloudprovider.CloudProvider
	clock      clock.PassiveClock
	controller string
}

// recorded are the instance type lists the gauges were set from, by first element:
// providers return the same list until something in it changes, and every solve
// asks for every pool's.
var recorded struct {
	sync.Mutex
	lists map[*scheduling.InstanceType]int
}

// recordTypes sets the instance type gauges from a list the provider returned.
func recordTypes(types []*scheduling.InstanceType) {
	if len(types) == 0 {
		return
	}
	recorded.Lock()
	defer recorded.Unlock()
	if n, ok := recorded.lists[types[0]]; ok && n == len(types) {
		return
	}
	if recorded.lists == nil || len(recorded.lists) > 256 {
		// Lists replaced by newer ones are forgotten here.
		recorded.lists = map[*scheduling.InstanceType]int{}
	}
	recorded.lists[types[0]] = len(types)
	for _, it := range types {
		typeCPU.WithLabelValues(it.Name).Set(float64(it.Capacity.MilliCPU) / 1000)
		typeMemory.WithLabelValues(it.Name).Set(float64(it.Capacity.Memory))
		for _, o := range it.Offerings {
			available := 0.0
			if o.Available {
				available = 1
			}
			offeringAvailable.WithLabelValues(it.Name, o.CapacityType, o.Zone).Set(available)
			offeringPrice.WithLabelValues(it.Name, o.CapacityType, o.Zone).Set(o.Price)
		}
	}
}

func (d *decorated) observe(method string, start time.Time, err error) {
	kind := ""
	if err != nil {
		kind = "error"
		if cloudprovider.IsNodeClaimNotFound(err) {
			kind = "NodeClaimNotFoundError"
		} else if cloudprovider.IsInsufficientCapacity(err) {
			kind = "InsufficientCapacityError"
		}
		errorsTotal.WithLabelValues(d.controller, method, d.Name(), kind).Inc()
	}
	duration.WithLabelValues(d.controller, method, d.Name()).Observe(d.clock.Since(start).Seconds())
}

func (d *decorated) Create(ctx context.Context, nc *v1.NodeClaim) (*v1.NodeClaim, error) {
	start := d.clock.Now()
	out, err := d.CloudProvider.Create(ctx, nc)
	d.observe("Create", start, err)
	return out, err
}

func (d *decorated) Delete(ctx context.Context, nc *v1.NodeClaim) error {
	start := d.clock.Now()
	err := d.CloudProvider.Delete(ctx, nc)
	d.observe("Delete", start, err)
	return err
}

func (d *decorated) Get(ctx context.Context, providerID string) (*v1.NodeClaim, error) {
	start := d.clock.Now()
	out, err := d.CloudProvider.Get(ctx, providerID)
	d.observe("Get", start, err)
	return out, err
}

func (d *decorated) List(ctx context.Context) ([]*v1.NodeClaim, error) {
	start := d.clock.Now()
	out, err := d.CloudProvider.List(ctx)
	d.observe("List", start, err)
	return out, err
}

func (d *decorated) GetInstanceTypes(ctx context.Context, np *v1.NodePool) ([]*scheduling.InstanceType, error) {
	start := d.clock.Now()
	out, err := d.CloudProvider.GetInstanceTypes(ctx, np)
	d.observe("GetInstanceTypes", start, err)
	if err == nil {
		recordTypes(out)
	}
	return out, err
}

func (d *decorated) IsDrifted(ctx context.Context, nc *v1.NodeClaim) (cloudprovider.DriftReason, error) {
	start := d.clock.Now()
	out, err := d.CloudProvider.IsDrifted(ctx, nc)
	d.observe("IsDrifted", start, err)
	return out, err
}
