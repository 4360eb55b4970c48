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

// Launch and termination failures, named and labelled as Karpenter's AWS provider's.
var (
	InstanceLaunchFailures = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "karpenter", Subsystem: "cloudprovider", Name: "instance_launch_failures_total",
		Help: "Instance launch failures from CreateFleet, one per offering EC2 refused, by zone, zone ID, capacity type and EC2's error code.",
	}, []string{"zone", "zone_id", "capacity_type", "reason"})
	InstanceTerminationFailures = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "karpenter", Subsystem: "cloudprovider", Name: "instance_termination_failures_total",
		Help: "TerminateInstances calls that failed, by the instance's zone and zone ID.",
	}, []string{"zone", "zone_id"})
)

func init() {
	crmetrics.Registry.MustRegister(InstanceTypeRefreshErrors, InstanceLaunchFailures, InstanceTerminationFailures)
}
