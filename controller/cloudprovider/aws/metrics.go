package aws

import (
	"github.com/prometheus/client_golang/prometheus"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// InstanceTypeRefreshErrors counts instance-type refreshes that failed; while it
// grows the provider plans with the last good list, so alert on a sustained rate.
var InstanceTypeRefreshErrors = prometheus.NewCounter(prometheus.CounterOpts{
	Namespace: "karpenter", Subsystem: "cloudprovider", Name: "instance_type_refresh_errors_total",
	Help: "Instance-type refreshes from EC2 that failed; the last good list was served instead.",
})

func init() {
	crmetrics.Registry.MustRegister(InstanceTypeRefreshErrors)
}
