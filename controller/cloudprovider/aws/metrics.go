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

// UserDataBytes is the size of a class's rendered user data, measured as a launch
// template is made (Karpenter's gauge): EC2 refuses more than 16 KiB, so its
// growth (certificate bundles, custom user data) shows before a launch fails.
var UserDataBytes = prometheus.NewGaugeVec(prometheus.GaugeOpts{
	Namespace: "karpenter", Subsystem: "ec2nodeclasses", Name: "userdata_bytes",
	Help: "Size in bytes of the rendered user data (raw, pre-base64) for the EC2NodeClass",
}, []string{"nodeclass"})

// userDataWarnBytes is where a rendering is logged as close to EC2's 16 KiB limit.
const userDataWarnBytes = 16384 * 9 / 10

func init() {
	crmetrics.Registry.MustRegister(InstanceTypeRefreshErrors, InstanceLaunchFailures, InstanceTerminationFailures, UserDataBytes)
}
