// Package metrics wraps a CloudProvider to record Karpenter's
// karpenter_cloudprovider_* metrics for every call, whichever provider it is.
package metrics

import (
	"context"
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
		Help: "Cloud provider method calls that failed, by calling controller, method, provider, error kind and the nodepool of the claim or pool the call was about.",
	}, []string{"controller", "method", "provider", "error", "nodepool"})
)

// Collectors are the cloud provider metrics, registered at start.
var Collectors = []prometheus.Collector{duration, errorsTotal, instanceTypes}

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

// observe records a call about nodePool ("" when it is about none, as List is).
func (d *decorated) observe(method, nodePool string, start time.Time, err error) {
	if err != nil {
		// Karpenter v1.15's name for an error of no kind it knows.
		kind := "unknown"
		switch {
		case cloudprovider.IsNodeClaimNotFound(err):
			kind = "NodeClaimNotFoundError"
		case cloudprovider.IsInsufficientCapacity(err):
			kind = "InsufficientCapacityError"
		case cloudprovider.IsNodeClassNotReady(err):
			kind = "NodeClassNotReadyError"
		}
		errorsTotal.WithLabelValues(d.controller, method, d.Name(), kind, nodePool).Inc()
	}
	duration.WithLabelValues(d.controller, method, d.Name()).Observe(d.clock.Since(start).Seconds())
}

func (d *decorated) Create(ctx context.Context, nc *v1.NodeClaim) (*v1.NodeClaim, error) {
	start := d.clock.Now()
	out, err := d.CloudProvider.Create(ctx, nc)
	d.observe("Create", poolOf(nc), start, err)
	return out, err
}

func (d *decorated) Delete(ctx context.Context, nc *v1.NodeClaim) error {
	start := d.clock.Now()
	err := d.CloudProvider.Delete(ctx, nc)
	d.observe("Delete", poolOf(nc), start, err)
	return err
}

func (d *decorated) Reboot(ctx context.Context, nc *v1.NodeClaim, operationID string) error {
	start := d.clock.Now()
	err := d.CloudProvider.Reboot(ctx, nc, operationID)
	d.observe("Reboot", poolOf(nc), start, err)
	return err
}

func (d *decorated) Get(ctx context.Context, providerID string) (*v1.NodeClaim, error) {
	start := d.clock.Now()
	out, err := d.CloudProvider.Get(ctx, providerID)
	d.observe("Get", poolOf(out), start, err)
	return out, err
}

func (d *decorated) List(ctx context.Context) ([]*v1.NodeClaim, error) {
	start := d.clock.Now()
	out, err := d.CloudProvider.List(ctx)
	d.observe("List", "", start, err)
	return out, err
}

func (d *decorated) GetInstanceTypes(ctx context.Context, np *v1.NodePool) ([]*scheduling.InstanceType, error) {
	start := d.clock.Now()
	out, err := d.CloudProvider.GetInstanceTypes(ctx, np)
	d.observe("GetInstanceTypes", np.Name, start, err)
	if err == nil {
		instanceTypes.record(np.Name, out)
	}
	return out, err
}

func (d *decorated) IsDrifted(ctx context.Context, nc *v1.NodeClaim) (cloudprovider.DriftReason, error) {
	start := d.clock.Now()
	out, err := d.CloudProvider.IsDrifted(ctx, nc)
	d.observe("IsDrifted", poolOf(nc), start, err)
	return out, err
}

// poolOf is the claim's nodepool, "" for no claim.
func poolOf(nc *v1.NodeClaim) string {
	if nc == nil {
		return ""
	}
	return nc.Labels[v1.LabelNodePool]
}
