// Package settings holds the controller's settings: its flags, the environment
// variables they read, and their validation. Predictions (`dovetail simulate`,
// `explain`, the provider's plan-time impact) read the same settings from the
// controller's Deployment, so this package links none of the controllers.
package settings

import (
	"cmp"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"flag"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/aws/smithy-go/middleware"
	"github.com/go-logr/logr"
	"go.uber.org/zap/zapcore"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/dovetail-sh/dovetail/controller/operator/settings/nodecosts"
	"github.com/dovetail-sh/dovetail/controller/repair"
	"github.com/dovetail-sh/dovetail/controller/scheduling"
	"github.com/dovetail-sh/dovetail/controller/scheduling/defaultspread"
)

// Options are the controller's settings. Each flag also reads an environment
// variable, so the Deployment the Terraform provider renders can set them as env.
type Options struct {
	ClusterName             string
	CloudProvider           string
	KwokCatalog             string
	BatchIdleDuration       time.Duration
	BatchMaxDuration        time.Duration
	FeatureGates            FeatureGates
	BindAddress             string
	MetricsPort             int
	HealthProbePort         int
	LeaderElect             bool
	LeaderElectionNamespace string
	// The lease's timing, as kube-controller-manager names it: a follower takes
	// over at most LeaseDuration (plus a RetryPeriod) after the leader last renewed.
	LeaderElectionLeaseDuration time.Duration
	LeaderElectionRenewDeadline time.Duration
	LeaderElectionRetryPeriod   time.Duration
	LogLevel                    string
	// LogOutputPaths and LogErrorOutputPaths are Karpenter's: where logs and the
	// logger's own errors go, each stdout or stderr (comma-separated).
	LogOutputPaths          string
	LogErrorOutputPaths     string
	VMMemoryOverheadPercent float64
	RegistrationTTL         time.Duration
	// DriftOnMetadata replaces nodes when their pool's template labels or
	// annotations change (Karpenter's behaviour) instead of updating them in place.
	DriftOnMetadata bool
	// DisruptionPeriod and ConsolidationValidationDelay pace voluntary disruption.
	DisruptionPeriod             time.Duration
	ConsolidationValidationDelay time.Duration
	// ProvisioningRequestInitialBackoff and ProvisioningRequestMaxBackoff bound
	// how soon a ProvisioningRequest whose capacity was not found is tried again
	// (doubling from the first to the second), as in Cluster Autoscaler.
	ProvisioningRequestInitialBackoff time.Duration
	ProvisioningRequestMaxBackoff     time.Duration
	KubeClientQPS                     float64
	KubeClientBurst                   int
	// MemoryLimit is Karpenter's MEMORY_LIMIT: the container's memory limit in bytes
	// (the chart fills it from limits.memory). The Go runtime's soft limit is set to
	// 90% of it, so the heap is collected hard before the kernel OOM-kills the pod.
	MemoryLimit int64
	// EnableProfiling serves Go's pprof on the metrics endpoint (Karpenter's
	// ENABLE_PROFILING).
	EnableProfiling bool
	// Logger is where this controller logs; a Logger without a sink (the zero
	// Logger, and logr.Discard()) means controller-runtime's global one. Tests that
	// run several controllers in one process give each its own, because the global
	// logger can be set only once. controller-runtime's own package loggers (its
	// cache, metrics and health servers) always use the global one.
	Logger logr.Logger
	// AWS provider settings, named as Karpenter names them.
	AWSRegion          string
	ClusterEndpoint    string
	IsolatedVPC        bool
	ReservedENIs       int
	AWSEndpoints       Endpoints
	SSMParameterPrefix string
	InterruptionQueue  string
	// ClusterCABundle is the API server's CA (base64 PEM) written into node user data;
	// empty takes it from EKS DescribeCluster or else the controller's own kubeconfig.
	ClusterCABundle string
	// EKSControlPlane reads the CA and service CIDR from EKS DescribeCluster even when
	// the endpoint is given.
	EKSControlPlane bool
	// Karpenter settings Dovetail takes only at the value that describes what it does,
	// so that a Karpenter values file or env carries over and a value that would
	// change behaviour is refused instead of ignored. Their zero values are
	// Dovetail's behaviour; PlanDRARequests is --ignore-dra-requests inverted.
	PreferencePolicy                 string
	MinValuesPolicy                  string
	PlanDRARequests                  bool
	DisableClusterStateObservability bool
	DisableDryRun                    bool
	EnableZonalShift                 bool
	// AMIRefreshInterval and SubnetRefreshInterval are how often a Ready
	// EC2NodeClass's images and subnets (and the rest of its status) are resolved
	// again; the class is looked at as often as the shorter asks.
	AMIRefreshInterval    time.Duration
	SubnetRefreshInterval time.Duration
	// SecurityGroupRefreshInterval is how often a Ready class's security groups are
	// resolved again, on their own (Karpenter v1.15).
	SecurityGroupRefreshInterval time.Duration
	// AWSFeatureGates are Karpenter's AWS gates, each taken only turned off.
	AWSFeatureGates AWSFeatureGates
	// LegacyNodeRepair is Karpenter v1.15's switch back to its standalone node repair
	// controller. Off, as in Karpenter v1.15, node repair is a disruption method.
	LegacyNodeRepair bool
	// SchedulerConfig is Karpenter v1.15's scheduler configuration: the cluster's
	// default topology spread constraints, as kube-scheduler is configured with them
	// (see defaultspread).
	SchedulerConfig string
	// RepairPolicies replace the AWS repair policies repair as a disruption method
	// uses; not a flag: a test cannot age a Node past a 30-minute toleration (a
	// condition counts from no earlier than its Node's creation).
	RepairPolicies []repair.Policy
	// AWSAPIOptions are added to every AWS client's middleware stack; not a flag:
	// tests record the controller's AWS calls with them.
	AWSAPIOptions []func(*middleware.Stack) error
	// UnavailableOfferingsTTL is how long an offering EC2 refused for want of
	// capacity stays out of plans (3 minutes when 0); not a flag: a test cannot
	// wait that long for capacity to return.
	UnavailableOfferingsTTL time.Duration
	// NodeCosts is what a node costs beyond its instance, for the packing objective.
	NodeCosts scheduling.NodeCosts
	// AllowRepeatedControllers lets one process run several managers, as tests do;
	// controller-runtime otherwise refuses a controller name it has seen.
	AllowRepeatedControllers bool
	// envErrors are environment variables the flags could not parse.
	envErrors []string
}

// envInUsage finds the environment variable a flag's usage names, as "[NAME]".
var envInUsage = regexp.MustCompile(`\[([A-Z][A-Z0-9_]*)\]$`)

// Endpoints are per-service AWS endpoint overrides, "ec2=URL,ssm=URL".
type Endpoints map[string]string

// AWSServices are the services an endpoint can be given for.
var AWSServices = []string{"ec2", "ssm", "iam", "eks", "pricing", "sqs"}

func (e *Endpoints) String() string {
	parts := make([]string, 0, len(*e))
	for _, s := range AWSServices {
		if url, ok := (*e)[s]; ok {
			parts = append(parts, s+"="+url)
		}
	}
	return strings.Join(parts, ",")
}

// Set parses "service=URL,...".
func (e *Endpoints) Set(v string) error {
	if *e == nil {
		*e = Endpoints{}
	}
	for _, part := range strings.Split(v, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		service, url, ok := strings.Cut(part, "=")
		if !ok || url == "" {
			return fmt.Errorf("endpoint %q: want service=URL, e.g. ec2=https://vpce-123.ec2.us-west-2.vpce.amazonaws.com", part)
		}
		known := false
		for _, s := range AWSServices {
			known = known || s == service
		}
		if !known {
			return fmt.Errorf("endpoint %q: unknown service %q; known services are %s", part, service, strings.Join(AWSServices, ", "))
		}
		(*e)[service] = url
	}
	return nil
}

// FeatureGates are the toggles Karpenter users know, by Karpenter's names, so that a
// Karpenter configuration carries over.
type FeatureGates struct {
	SpotToSpotConsolidation bool
	NodeRepair              bool
	// ReservedCapacity is on unless turned off: capacity reservations the classes
	// select are offered as reserved capacity.
	ReservedCapacity bool
	NodeOverlay      bool
	StaticCapacity   bool
	CapacityBuffer   bool
	// TerminateFirstDrift and TerminateFirstRepair let a node that cannot be
	// replaced while it runs (its slot in a full capacity reservation, or its static
	// pool at limits.nodes) go first, its replacement launching after it.
	TerminateFirstDrift  bool
	TerminateFirstRepair bool
	// reservedCapacitySet records that ReservedCapacity was given.
	reservedCapacitySet bool
	// notYetOn are gates of Karpenter's that Dovetail takes only turned off, given
	// as true: Validate refuses them.
	notYetOn []string
}

// notYetGates are Karpenter v1.15's gates Dovetail accepts only at their default,
// false, with what turning one on would ask for. Accepting them keeps a Karpenter
// configuration carrying over; refusing true keeps a setting from being ignored.
var notYetGates = map[string]string{
	"PodDeletionCostManagement": "managing ReplicaSet pods' pod-deletion-cost annotations",
}

// notYetAWSGates are Karpenter v1.15's AWS feature gates (--aws-feature-gates),
// all accepted only at false.
var notYetAWSGates = map[string]string{
	"NodeClassCEL": "CEL expressions in an EC2NodeClass's kubelet settings",
	"DRANVIDIAGPU": "planning for the NVIDIA GPU driver's DRA devices",
	"DRAEFA":       "planning for the dranet driver's EFA devices",
}

// parseGates reads "Name=bool,..." and calls set for each; unknown names are
// refused with the known ones listed.
func parseGates(v string, known []string, set func(name string, on bool) bool) error {
	for _, part := range strings.Split(v, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		name, val, ok := strings.Cut(part, "=")
		if !ok {
			return fmt.Errorf("feature gate %q: want Name=true or Name=false", part)
		}
		b, err := strconv.ParseBool(val)
		if err != nil {
			return fmt.Errorf("feature gate %s: %q is not true or false", name, val)
		}
		if !set(name, b) {
			return fmt.Errorf("unknown feature gate %q; known gates are %s", name, strings.Join(known, ", "))
		}
	}
	return nil
}

// AWSFeatureGates are Karpenter's AWS provider gates (AWS_FEATURE_GATES); none is
// carried out yet, so each is taken only turned off.
type AWSFeatureGates struct {
	// RebootForRepair reboots a node in place for the GPU faults a reboot clears,
	// with node repair as a disruption method.
	RebootForRepair bool
	notYetOn        []string
}

func (g *AWSFeatureGates) String() string { return strings.Join(g.notYetOn, ",") }

// Set parses "Name=bool,Name=bool".
func (g *AWSFeatureGates) Set(v string) error {
	return parseGates(v, append([]string{"RebootForRepair"}, sets.List(sets.KeySet(notYetAWSGates))...), func(name string, on bool) bool {
		if name == "RebootForRepair" {
			g.RebootForRepair = on
			return true
		}
		if _, ok := notYetAWSGates[name]; !ok {
			return false
		}
		if on {
			g.notYetOn = append(g.notYetOn, name)
		}
		return true
	})
}

// ReservedCapacityOn says whether reserved capacity is offered: on by default, as
// in Karpenter since v1.6.
func (f *FeatureGates) ReservedCapacityOn() bool { return !f.reservedCapacitySet || f.ReservedCapacity }

func (f *FeatureGates) String() string {
	return fmt.Sprintf("SpotToSpotConsolidation=%t,NodeRepair=%t,ReservedCapacity=%t,NodeOverlay=%t,StaticCapacity=%t,CapacityBuffer=%t,TerminateFirstDrift=%t,TerminateFirstRepair=%t",
		f.SpotToSpotConsolidation, f.NodeRepair, f.ReservedCapacityOn(), f.NodeOverlay, f.StaticCapacity, f.CapacityBuffer, f.TerminateFirstDrift, f.TerminateFirstRepair)
}

// Set parses "Name=bool,Name=bool".
func (f *FeatureGates) Set(v string) error {
	known := append([]string{"SpotToSpotConsolidation", "NodeRepair", "ReservedCapacity", "NodeOverlay", "StaticCapacity", "CapacityBuffer", "TerminateFirstDrift", "TerminateFirstRepair"}, sets.List(sets.KeySet(notYetGates))...)
	return parseGates(v, known, func(name string, b bool) bool {
		switch name {
		case "SpotToSpotConsolidation":
			f.SpotToSpotConsolidation = b
		case "NodeRepair":
			f.NodeRepair = b
		case "ReservedCapacity":
			f.ReservedCapacity, f.reservedCapacitySet = b, true
		case "NodeOverlay":
			f.NodeOverlay = b
		case "StaticCapacity":
			f.StaticCapacity = b
		case "CapacityBuffer":
			f.CapacityBuffer = b
		case "TerminateFirstDrift":
			f.TerminateFirstDrift = b
		case "TerminateFirstRepair":
			f.TerminateFirstRepair = b
		default:
			if _, ok := notYetGates[name]; !ok {
				return false
			}
			if b {
				f.notYetOn = append(f.notYetOn, name)
			}
		}
		return true
	})
}

// AddFlags registers the options on fs, each taking the environment variable its
// usage names from the process's environment.
func (o *Options) AddFlags(fs *flag.FlagSet) { o.AddFlagsFrom(fs, os.LookupEnv) }

// AddFlagsFrom registers the options on fs, each taking the environment variable its
// usage names from lookup: a prediction reads the controller's Deployment this way.
func (o *Options) AddFlagsFrom(fs *flag.FlagSet, lookup func(string) (string, bool)) {
	fs.StringVar(&o.ClusterName, "cluster-name", "", "name of the cluster, used to tag and find its instances [CLUSTER_NAME]")
	fs.StringVar(&o.CloudProvider, "cloud-provider", "aws", "cloud provider: aws (EC2), or kwok (local, simulated instances) [CLOUD_PROVIDER]")
	fs.StringVar(&o.AWSRegion, "aws-region", "", "AWS region of the cluster [AWS_REGION]")
	fs.StringVar(&o.ClusterEndpoint, "cluster-endpoint", "", "API server URL nodes join; default: read from EKS DescribeCluster [CLUSTER_ENDPOINT]")
	fs.BoolVar(&o.IsolatedVPC, "isolated-vpc", false, "the cluster has no route to the internet: never call the Pricing API, which has no VPC endpoint [ISOLATED_VPC]")
	fs.IntVar(&o.ReservedENIs, "reserved-enis", 0, "ENIs per instance kept for other uses, lowering max pods [RESERVED_ENIS]")
	fs.Var(&o.AWSEndpoints, "aws-endpoints", "per-service endpoint overrides, service=URL,... (ec2, ssm, iam, eks, pricing, sqs) [AWS_ENDPOINTS]")
	fs.StringVar(&o.InterruptionQueue, "interruption-queue", "", "SQS queue EventBridge sends spot interruptions, rebalance recommendations, state changes and scheduled maintenance to; empty turns interruption handling off [INTERRUPTION_QUEUE]")
	fs.StringVar(&o.ClusterCABundle, "cluster-ca-bundle", "", "API server CA (base64 PEM) nodes trust; default: from EKS DescribeCluster, else the controller's kubeconfig [CLUSTER_CA_BUNDLE]")
	fs.BoolVar(&o.EKSControlPlane, "eks-control-plane", false, "read the CA and service CIDR from EKS DescribeCluster even when --cluster-endpoint is set [EKS_CONTROL_PLANE]")
	fs.StringVar(&o.PreferencePolicy, "preference-policy", "Respect", "how preferred affinities and ScheduleAnyway spreads are treated: Respect (held, then relaxed one at a time); Ignore is not supported yet [PREFERENCE_POLICY]")
	fs.BoolVar(&o.EnableZonalShift, "enable-zonal-shift", false, "avoid zones under an ARC zonal shift: only false is supported yet [ENABLE_ZONAL_SHIFT]")
	fs.DurationVar(&o.AMIRefreshInterval, "ami-refresh-interval", 5*time.Minute, "how often a Ready EC2NodeClass's images are resolved again, at least 1m [AMI_REFRESH_INTERVAL]")
	fs.DurationVar(&o.SubnetRefreshInterval, "subnet-refresh-interval", 5*time.Minute, "how often a Ready EC2NodeClass's subnets are resolved again, at least 1m [SUBNET_REFRESH_INTERVAL]")
	fs.DurationVar(&o.SecurityGroupRefreshInterval, "security-group-refresh-interval", time.Minute, "how often a Ready EC2NodeClass's security groups are resolved again, at least 1m [SECURITY_GROUP_REFRESH_INTERVAL]")
	fs.Var(&o.AWSFeatureGates, "aws-feature-gates", "Karpenter's AWS gates, Name=bool,... (RebootForRepair, with NodeRepair and --legacy-node-repair=false; NodeClassCEL, DRANVIDIAGPU, DRAEFA: only false is supported yet) [AWS_FEATURE_GATES]")
	fs.BoolVar(&o.LegacyNodeRepair, "legacy-node-repair", false, "with gate NodeRepair: true repairs by the standalone repair controller, which only replaces nodes; false, as in Karpenter v1.15, repairs as a disruption method (replacement first, Unhealthy budgets, a bounded drain, reboots, karpenter.sh/do-not-repair) [LEGACY_NODE_REPAIR]")
	fs.StringVar(&o.SchedulerConfig, "scheduler-config", "", "the cluster's kube-scheduler defaults to mirror, as YAML: {podTopologySpread: {defaultConstraints: [...]}}, applied to pods without constraints of their own (Karpenter v1.15) [SCHEDULER_CONFIG]")
	fs.StringVar(&o.MinValuesPolicy, "min-values-policy", "Strict", "a requirement's minValues that cannot be met: Strict (nothing is launched); BestEffort is not supported yet [MIN_VALUES_POLICY]")
	o.PlanDRARequests = false
	fs.Var(invertedBool{&o.PlanDRARequests}, "ignore-dra-requests", "pods' dynamic resource allocation claims are not planned for; false is not supported yet [IGNORE_DRA_REQUESTS]")
	fs.BoolVar(&o.DisableClusterStateObservability, "disable-cluster-state-observability", false, "cluster state metrics are always exposed; true is not supported yet [DISABLE_CLUSTER_STATE_OBSERVABILITY]")
	fs.BoolVar(&o.DisableDryRun, "disable-dry-run", false, "accepted for Karpenter compatibility: Dovetail validates an EC2NodeClass by its Describe calls and makes no dry-run calls either way [DISABLE_DRY_RUN]")
	fs.StringVar(&o.SSMParameterPrefix, "ssm-parameter-prefix", "/aws/service", "SSM path under which amiSelectorTerms aliases find EKS images [SSM_PARAMETER_PREFIX]")
	fs.StringVar(&o.KwokCatalog, "kwok-catalog", "", "instance-type catalog for the kwok provider; default: the embedded AWS catalog [KWOK_CATALOG]")
	fs.DurationVar(&o.BatchIdleDuration, "batch-idle-duration", time.Second, "close a provisioning batch after this long without new pending pods [BATCH_IDLE_DURATION]")
	fs.DurationVar(&o.BatchMaxDuration, "batch-max-duration", 10*time.Second, "close a provisioning batch after this long regardless [BATCH_MAX_DURATION]")
	fs.Var(&o.FeatureGates, "feature-gates", "Name=bool,... (SpotToSpotConsolidation, ReservedCapacity, NodeOverlay, StaticCapacity, NodeRepair, CapacityBuffer, TerminateFirstDrift, TerminateFirstRepair) [FEATURE_GATES]")
	fs.StringVar(&o.BindAddress, "bind-address", "", "address the metrics and health servers listen on; empty means all [BIND_ADDRESS]")
	fs.IntVar(&o.MetricsPort, "metrics-port", 8080, "port of the Prometheus /metrics endpoint; 0 turns it off [METRICS_PORT]")
	fs.IntVar(&o.HealthProbePort, "health-probe-port", 8081, "port of /healthz and /readyz; 0 turns them off [HEALTH_PROBE_PORT]")
	fs.BoolVar(&o.LeaderElect, "leader-elect", true, "elect a leader so replicas do not act twice [LEADER_ELECT]")
	fs.StringVar(&o.LeaderElectionNamespace, "leader-election-namespace", "kube-system", "namespace of the leader-election lease [POD_NAMESPACE]")
	fs.DurationVar(&o.LeaderElectionLeaseDuration, "leader-election-lease-duration", 15*time.Second, "how long followers wait after the leader last renewed before taking over [LEADER_ELECTION_LEASE_DURATION]")
	fs.DurationVar(&o.LeaderElectionRenewDeadline, "leader-election-renew-deadline", 10*time.Second, "how long the leader tries to renew before it stops leading, under the lease duration [LEADER_ELECTION_RENEW_DEADLINE]")
	fs.DurationVar(&o.LeaderElectionRetryPeriod, "leader-election-retry-period", 2*time.Second, "how often replicas try to acquire or renew the lease [LEADER_ELECTION_RETRY_PERIOD]")
	fs.StringVar(&o.LogLevel, "log-level", "info", "debug, info or error [LOG_LEVEL]")
	fs.StringVar(&o.LogOutputPaths, "log-output-paths", "stderr", "where logs go: stdout, stderr or both, comma-separated [LOG_OUTPUT_PATHS]")
	fs.StringVar(&o.LogErrorOutputPaths, "log-error-output-paths", "stderr", "where the logger's own errors go: stdout, stderr or both [LOG_ERROR_OUTPUT_PATHS]")
	fs.Float64Var(&o.VMMemoryOverheadPercent, "vm-memory-overhead-percent", 0.075, "share of instance memory the hypervisor keeps [VM_MEMORY_OVERHEAD_PERCENT]")
	fs.BoolVar(&o.DriftOnMetadata, "drift-on-metadata", false, "replace nodes when their NodePool template's labels or annotations change, as Karpenter does; by default those are applied to the NodeClaims and Nodes in place [DRIFT_ON_METADATA]")
	fs.DurationVar(&o.RegistrationTTL, "registration-ttl", 15*time.Minute, "delete a NodeClaim whose node has not registered after this long [REGISTRATION_TTL]")
	fs.DurationVar(&o.DisruptionPeriod, "disruption-period", 10*time.Second, "how often disruption looks for nodes to remove or replace [DISRUPTION_PERIOD]")
	fs.DurationVar(&o.ConsolidationValidationDelay, "consolidation-validation-delay", 15*time.Second, "how long a consolidation decision must hold before it is carried out [CONSOLIDATION_VALIDATION_DELAY]")
	fs.DurationVar(&o.ProvisioningRequestInitialBackoff, "provisioning-request-initial-backoff-time", time.Minute, "how soon a ProvisioningRequest whose capacity was not found is tried again the first time; each retry waits twice as long [PROVISIONING_REQUEST_INITIAL_BACKOFF_TIME]")
	fs.DurationVar(&o.ProvisioningRequestMaxBackoff, "provisioning-request-max-backoff-time", 10*time.Minute, "the longest a ProvisioningRequest whose capacity was not found waits to be tried again [PROVISIONING_REQUEST_MAX_BACKOFF_TIME]")
	fs.Float64Var(&o.KubeClientQPS, "kube-client-qps", 200, "requests per second to the API server [KUBE_CLIENT_QPS]")
	fs.IntVar(&o.KubeClientBurst, "kube-client-burst", 300, "burst of requests to the API server [KUBE_CLIENT_BURST]")
	fs.BoolVar(&o.EnableProfiling, "enable-profiling", false, "serve Go's pprof under /debug/pprof/ on the metrics port [ENABLE_PROFILING]")
	fs.Int64Var(&o.MemoryLimit, "memory-limit", -1, "the container's memory limit in bytes; the Go soft memory limit is set to 90% of it (GOMEMLIMIT, when set, wins); -1 leaves it unset [MEMORY_LIMIT]")
	nodecosts.AddFlags(fs, &o.NodeCosts)
	// Each variable set is parsed by its flag, so one that does not parse is an
	// error at start, not a silent default; flags given on the command line are
	// parsed after, and win.
	o.envErrors = nil
	fs.VisitAll(func(f *flag.Flag) {
		m := envInUsage.FindStringSubmatch(f.Usage)
		if m == nil {
			return
		}
		if v, ok := lookup(m[1]); ok {
			if err := f.Value.Set(v); err != nil {
				o.envErrors = append(o.envErrors, fmt.Sprintf("%s=%q (--%s): %v", m[1], v, f.Name, err))
			}
		}
	})
}

// Validate reports bad settings by flag name, with the fix.
func (o *Options) Validate() error {
	errs := append([]string(nil), o.envErrors...)
	if o.BatchIdleDuration <= 0 {
		errs = append(errs, "--batch-idle-duration must be positive")
	}
	if o.BatchMaxDuration < o.BatchIdleDuration {
		errs = append(errs, "--batch-max-duration must be at least --batch-idle-duration")
	}
	switch o.CloudProvider {
	case "kwok":
	case "aws":
		if o.ClusterName == "" {
			errs = append(errs, "--cluster-name is required with --cloud-provider aws: instances are tagged and found by it")
		}
		if o.AWSRegion == "" {
			errs = append(errs, "--aws-region (AWS_REGION) is required with --cloud-provider aws")
		}
		if o.ReservedENIs < 0 {
			errs = append(errs, "--reserved-enis must not be negative")
		}
		if err := validateCABundle(o.ClusterCABundle); err != nil {
			errs = append(errs, "--cluster-ca-bundle (CLUSTER_CA_BUNDLE): "+err.Error())
		}
	default:
		errs = append(errs, fmt.Sprintf("--cloud-provider %q is not available; use aws or kwok", o.CloudProvider))
	}
	errs = append(errs, nodecosts.Validate(o.NodeCosts)...)
	if o.EnableZonalShift {
		errs = append(errs, "--enable-zonal-shift (ENABLE_ZONAL_SHIFT): avoiding zones under an ARC zonal shift is not supported yet; remove it or set false")
	}
	for flagName, d := range map[string]time.Duration{"--ami-refresh-interval (AMI_REFRESH_INTERVAL)": o.AMIRefreshInterval, "--subnet-refresh-interval (SUBNET_REFRESH_INTERVAL)": o.SubnetRefreshInterval,
		"--security-group-refresh-interval (SECURITY_GROUP_REFRESH_INTERVAL)": o.SecurityGroupRefreshInterval} {
		if d != 0 && d < time.Minute {
			errs = append(errs, flagName+" must be at least 1m, as in Karpenter")
		}
	}
	errs = append(errs, o.unsupportedKarpenterSettings()...)
	if o.DisruptionPeriod <= 0 {
		errs = append(errs, "--disruption-period must be positive")
	}
	// Unset (0) is controller-runtime's default: 15s, 10s, 2s.
	lease, renew, retry := cmp.Or(o.LeaderElectionLeaseDuration, 15*time.Second), cmp.Or(o.LeaderElectionRenewDeadline, 10*time.Second), cmp.Or(o.LeaderElectionRetryPeriod, 2*time.Second)
	// client-go's own rule: the renew deadline must outlast a jittered retry (×1.2).
	if o.LeaderElect && (retry <= 0 || renew <= retry*12/10 || lease <= renew) {
		errs = append(errs, fmt.Sprintf("--leader-election-retry-period (%s) × 1.2 < --leader-election-renew-deadline (%s) < --leader-election-lease-duration (%s) must hold, all positive",
			retry, renew, lease))
	}
	if o.ProvisioningRequestInitialBackoff < 0 || o.ProvisioningRequestMaxBackoff < 0 ||
		(o.ProvisioningRequestMaxBackoff > 0 && o.ProvisioningRequestMaxBackoff < o.ProvisioningRequestInitialBackoff) {
		errs = append(errs, "--provisioning-request-initial-backoff-time must not be negative nor more than --provisioning-request-max-backoff-time")
	}
	if o.ConsolidationValidationDelay < 0 {
		errs = append(errs, "--consolidation-validation-delay must not be negative")
	}
	if o.VMMemoryOverheadPercent < 0 || o.VMMemoryOverheadPercent >= 1 {
		errs = append(errs, "--vm-memory-overhead-percent must be in [0, 1), e.g. 0.075")
	}
	for flagName, paths := range map[string]string{"--log-output-paths (LOG_OUTPUT_PATHS)": o.LogOutputPaths, "--log-error-output-paths (LOG_ERROR_OUTPUT_PATHS)": o.LogErrorOutputPaths} {
		if _, err := LogStreams(paths); err != nil {
			errs = append(errs, flagName+": "+err.Error())
		}
	}
	switch o.LogLevel {
	case "debug", "info", "error":
	default:
		errs = append(errs, fmt.Sprintf("--log-level %q: use debug, info or error", o.LogLevel))
	}
	if len(errs) > 0 {
		return fmt.Errorf("invalid options: %s", strings.Join(errs, "; "))
	}
	return nil
}

// unsupportedKarpenterSettings refuses the values of Karpenter's settings that would
// change behaviour Dovetail does not have yet.
func (o *Options) unsupportedKarpenterSettings() []string {
	var errs []string
	for _, p := range []struct{ flag, env, value, supported, known, why string }{
		{"--preference-policy", "PREFERENCE_POLICY", o.PreferencePolicy, "Respect", "Ignore", "preferences are held and relaxed one at a time, as with Respect"},
		{"--min-values-policy", "MIN_VALUES_POLICY", o.MinValuesPolicy, "Strict", "BestEffort", "minValues that cannot be met launch nothing, as with Strict"},
	} {
		switch p.value {
		case "", p.supported:
		case p.known:
			errs = append(errs, fmt.Sprintf("%s (%s) %s is not supported yet: %s; remove it or set %s", p.flag, p.env, p.value, p.why, p.supported))
		default:
			errs = append(errs, fmt.Sprintf("%s (%s) %q: use %s", p.flag, p.env, p.value, p.supported))
		}
	}
	if o.PlanDRARequests {
		errs = append(errs, "--ignore-dra-requests=false (IGNORE_DRA_REQUESTS): planning for dynamic resource allocation claims is not supported yet; remove it or set true")
	}
	if o.DisableClusterStateObservability {
		errs = append(errs, "--disable-cluster-state-observability (DISABLE_CLUSTER_STATE_OBSERVABILITY): turning cluster state metrics off is not supported yet; remove it or set false")
	}
	for _, name := range o.FeatureGates.notYetOn {
		errs = append(errs, fmt.Sprintf("--feature-gates (FEATURE_GATES) %s=true: %s is not supported yet; remove it or set false", name, notYetGates[name]))
	}
	for _, name := range o.AWSFeatureGates.notYetOn {
		errs = append(errs, fmt.Sprintf("--aws-feature-gates (AWS_FEATURE_GATES) %s=true: %s is not supported yet; remove it or set false", name, notYetAWSGates[name]))
	}
	if _, err := defaultspread.Parse(o.SchedulerConfig); err != nil {
		errs = append(errs, fmt.Sprintf("--scheduler-config (SCHEDULER_CONFIG): %v", err))
	}
	return errs
}

// LogStreams reads a log output path list; empty is stderr. Files are refused: in a
// pod the container log collects stdout and stderr, and a file would need a volume.
func LogStreams(paths string) ([]zapcore.WriteSyncer, error) {
	if strings.TrimSpace(paths) == "" {
		return []zapcore.WriteSyncer{os.Stderr}, nil
	}
	var out []zapcore.WriteSyncer
	for _, p := range strings.Split(paths, ",") {
		switch strings.TrimSpace(p) {
		case "stdout":
			out = append(out, os.Stdout)
		case "stderr":
			out = append(out, os.Stderr)
		default:
			return nil, fmt.Errorf("%q: writing logs to files is not supported yet; use stdout or stderr, which the container log collects", strings.TrimSpace(p))
		}
	}
	return out, nil
}

// invertedBool is a boolean flag that stores its negation.
type invertedBool struct{ p *bool }

func (b invertedBool) String() string {
	if b.p == nil {
		return "true"
	}
	return strconv.FormatBool(!*b.p)
}

func (b invertedBool) Set(s string) error {
	v, err := strconv.ParseBool(s)
	if err != nil {
		return err
	}
	*b.p = !v
	return nil
}

func (invertedBool) IsBoolFlag() bool { return true }

// validateCABundle checks the bundle is what EKS returns: base64 of PEM certificates.
func validateCABundle(bundle string) error {
	if bundle == "" {
		return nil
	}
	raw, err := base64.StdEncoding.DecodeString(bundle)
	if err != nil {
		return fmt.Errorf("not base64 (%v); give the PEM certificate base64-encoded, as `aws eks describe-cluster` prints certificateAuthority.data", err)
	}
	block, _ := pem.Decode(raw)
	if block == nil || block.Type != "CERTIFICATE" {
		return fmt.Errorf("does not decode to a PEM certificate; give the PEM certificate base64-encoded, as `aws eks describe-cluster` prints certificateAuthority.data")
	}
	if _, err := x509.ParseCertificate(block.Bytes); err != nil {
		return fmt.Errorf("its PEM block is not an X.509 certificate (%v): nodes could not trust the API server with it", err)
	}
	return nil
}
