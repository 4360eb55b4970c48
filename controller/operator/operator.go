// Package operator is the one place where controllers are wired into a
// controller-runtime manager; their settings are package settings.
package operator

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"strconv"
	"time"

	"github.com/dovetail-sh/dovetail/controller/apis/scheme"
	"github.com/dovetail-sh/dovetail/controller/buffer"
	"github.com/dovetail-sh/dovetail/controller/overlay"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/dovetail-sh/dovetail/controller/catalog"
	"github.com/dovetail-sh/dovetail/controller/cloudprovider"
	dtaws "github.com/dovetail-sh/dovetail/controller/cloudprovider/aws"
	"github.com/dovetail-sh/dovetail/controller/cloudprovider/kwok"
	cpmetrics "github.com/dovetail-sh/dovetail/controller/cloudprovider/metrics"
	"github.com/dovetail-sh/dovetail/controller/cloudprovider/overlaid"
	"github.com/dovetail-sh/dovetail/controller/commitment"
	"github.com/dovetail-sh/dovetail/controller/controllers/capacitybuffer"
	commitmentcontroller "github.com/dovetail-sh/dovetail/controller/controllers/commitment"
	"github.com/dovetail-sh/dovetail/controller/controllers/disruption"
	"github.com/dovetail-sh/dovetail/controller/controllers/node/health"
	"github.com/dovetail-sh/dovetail/controller/controllers/nodeclaim/expiration"
	"github.com/dovetail-sh/dovetail/controller/controllers/nodeclaim/garbagecollection"
	claimhash "github.com/dovetail-sh/dovetail/controller/controllers/nodeclaim/hash"
	"github.com/dovetail-sh/dovetail/controller/controllers/nodeclaim/lifecycle"
	"github.com/dovetail-sh/dovetail/controller/controllers/nodeclaim/metadata"
	"github.com/dovetail-sh/dovetail/controller/controllers/nodeclaim/reboot"
	"github.com/dovetail-sh/dovetail/controller/controllers/nodeclaim/termination"
	"github.com/dovetail-sh/dovetail/controller/controllers/nodeoverlay"
	"github.com/dovetail-sh/dovetail/controller/controllers/nodepool/counter"
	"github.com/dovetail-sh/dovetail/controller/controllers/nodepool/static"
	"github.com/dovetail-sh/dovetail/controller/controllers/provisioning"
	"github.com/dovetail-sh/dovetail/controller/controllers/provisioningrequest"
	"github.com/dovetail-sh/dovetail/controller/metrics"
	"github.com/dovetail-sh/dovetail/controller/provreq"
	"github.com/dovetail-sh/dovetail/controller/repair"
	"github.com/dovetail-sh/dovetail/controller/scheduling"
	"github.com/dovetail-sh/dovetail/controller/scheduling/defaultspread"
	"github.com/dovetail-sh/dovetail/controller/state"
)

// Controller is what every controller provides to be wired.
type Controller interface {
	Name() string
	Register(ctx context.Context, mgr manager.Manager) error
}

// PodNodeNameIndex indexes Pods by spec.nodeName, for draining.
const PodNodeNameIndex = "spec.nodeName"

// Scheme is the API machinery the controller speaks.
func Scheme() *runtime.Scheme { return scheme.New() }

// CloudProviderFactory builds a cloud provider on the manager's client.
type CloudProviderFactory func(kube client.Client) (cloudprovider.CloudProvider, error)

// Cloud is a cloud provider with the controllers and background work it brings.
type Cloud struct {
	Provider    cloudprovider.CloudProvider
	Controllers []Controller
	Runnables   []manager.Runnable
	// WithProvisioner adds controllers that launch through the provisioner.
	WithProvisioner func(p *provisioning.Provisioner, recorder record.EventRecorder) []Controller
}

// Run builds the manager with every controller and runs it until ctx ends, with the
// cloud provider the options name.
func Run(ctx context.Context, opts Options, cfg *rest.Config) error {
	return run(ctx, opts, cfg, func(ctx context.Context, mgr manager.Manager) (*Cloud, error) {
		return newCloud(ctx, opts, cfg, mgr)
	})
}

// RunWith is Run with the cloud provider given; tests use it to fail launches.
func RunWith(ctx context.Context, opts Options, cfg *rest.Config, newProvider CloudProviderFactory) error {
	return run(ctx, opts, cfg, func(_ context.Context, mgr manager.Manager) (*Cloud, error) {
		p, err := newProvider(mgr.GetClient())
		return &Cloud{Provider: p}, err
	})
}

func run(ctx context.Context, opts Options, cfg *rest.Config, build func(context.Context, manager.Manager) (*Cloud, error)) error {
	if err := opts.Validate(); err != nil {
		return err
	}
	logger := opts.Logger
	if logger.GetSink() == nil {
		logger = ctrl.Log
	}
	// What run builds (the cloud provider, the controllers) logs through ctx.
	ctx = log.IntoContext(ctx, logger)
	cfg = rest.CopyConfig(cfg)
	if opts.KubeClientQPS > 0 {
		cfg.QPS, cfg.Burst = float32(opts.KubeClientQPS), opts.KubeClientBurst
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme: Scheme(),
		Logger: logger,
		// Runnables (the disruption pass, the provisioner, the periodic loops) get
		// their context from here, not from the one Start is given.
		BaseContext:             func() context.Context { return log.IntoContext(context.Background(), logger) },
		Metrics:                 metricsserver.Options{BindAddress: portAddress(opts.BindAddress, opts.MetricsPort), ExtraHandlers: profilingHandlers(opts.EnableProfiling)},
		HealthProbeBindAddress:  portAddress(opts.BindAddress, opts.HealthProbePort),
		LeaderElection:          opts.LeaderElect,
		LeaderElectionID:        "dovetail-leader-election",
		LeaderElectionNamespace: opts.LeaderElectionNamespace,
		// A replica that stops cleanly (a rollout, a drained node) gives the lease up
		// at once, so its successor does not wait out the 15 s lease. Safe because
		// run returns, and the process exits, only after every runnable has stopped.
		LeaderElectionReleaseOnCancel: true,
		LeaseDuration:                 positive(opts.LeaderElectionLeaseDuration),
		RenewDeadline:                 positive(opts.LeaderElectionRenewDeadline),
		RetryPeriod:                   positive(opts.LeaderElectionRetryPeriod),
		// Managed fields are most of a cached object's size and never read here.
		Cache: cache.Options{DefaultTransform: cache.TransformStripManagedFields(),
			ByObject: map[client.Object]cache.ByObject{&corev1.Pod{}: {Transform: trimPod}}},
		Controller: ctrlconfig.Controller{SkipNameValidation: &opts.AllowRepeatedControllers},
	})
	if err != nil {
		return fmt.Errorf("creating manager, %w", err)
	}
	if err := mgr.GetFieldIndexer().IndexField(ctx, &corev1.Pod{}, PodNodeNameIndex, func(o client.Object) []string {
		return []string{o.(*corev1.Pod).Spec.NodeName}
	}); err != nil {
		return fmt.Errorf("indexing pods by node, %w", err)
	}
	if err := mgr.GetFieldIndexer().IndexField(ctx, &corev1.Pod{}, termination.PodControllerIndex, termination.PodController); err != nil {
		return fmt.Errorf("indexing pods by controller, %w", err)
	}
	built, err := build(ctx, mgr)
	if err != nil {
		return err
	}
	provider := built.Provider
	var overlays *overlay.Store
	if opts.FeatureGates.NodeOverlay {
		overlays = &overlay.Store{}
		provider = overlaid.Decorate(built.Provider, overlays)
	}
	// Each caller has its own decorator, so the cloudprovider metrics say which
	// controller made a call, as Karpenter's do.
	cloudFor := func(controller string) cloudprovider.CloudProvider {
		return cpmetrics.Decorate(provider, clock.RealClock{}, controller)
	}
	cloud := cloudFor("provisioner")
	metrics.RegisterCluster(mgr.GetClient())
	for _, r := range built.Runnables {
		if err := mgr.Add(r); err != nil {
			return err
		}
	}
	clk := clock.RealClock{}
	recorder := mgr.GetEventRecorderFor("dovetail")
	schedulerConfig, err := defaultspread.Parse(opts.SchedulerConfig)
	if err != nil {
		return fmt.Errorf("--scheduler-config, %w", err)
	}
	if cs := schedulerConfig.Constraints(); len(cs) > 0 {
		log.FromContext(ctx).Info("planning pods without topology spread constraints of their own under the cluster's defaults (--scheduler-config)", "defaultConstraints", cs)
	}
	cluster := state.NewCluster(mgr.GetClient(), clk).WithInformers(mgr.GetCache()).WithDefaultSpread(schedulerConfig.Constraints())
	repairs, err := repairMethod(opts)
	if err != nil {
		return err
	}
	provisioner := provisioning.NewProvisioner(mgr.GetClient(), cluster, cloud, clk, recorder,
		provisioning.NewBatcher(clk, opts.BatchIdleDuration, opts.BatchMaxDuration), opts.NodeCosts)
	if err := mgr.Add(provisioner); err != nil {
		return fmt.Errorf("adding provisioner, %w", err)
	}
	commitments := &commitment.Store{}
	poolCounter := counter.NewController(mgr.GetClient(), clk, cloudFor("nodepool.counter"))
	poolCounter.StaticCapacity = opts.FeatureGates.StaticCapacity
	poolCounter.Commitments = commitments
	controllers := []Controller{
		provisioning.NewPodController(mgr.GetClient(), provisioner),
		lifecycle.NewController(mgr.GetClient(), cloudFor("nodeclaim.lifecycle"), clk, recorder, opts.RegistrationTTL),
		termination.NewController(mgr.GetClient(), cloudFor("nodeclaim.termination"), clk, recorder),
		// Registered whatever the gates say, as Karpenter's: a reboot committed
		// before a restart with other settings is still seen through.
		reboot.NewController(mgr.GetClient(), cloudFor("nodeclaim.reboot"), clk, recorder),
		poolCounter,
		garbagecollection.NewController(mgr.GetClient(), cloudFor("nodeclaim.garbagecollection"), clk),
		expiration.NewController(mgr.GetClient(), clk, recorder),
		claimhash.NewController(mgr.GetClient()),
		disruption.NewController(mgr.GetClient(), cloudFor("disruption"), provisioner, clk, recorder, disruption.Options{
			Period: opts.DisruptionPeriod, ValidationDelay: opts.ConsolidationValidationDelay,
			ReplacementTimeout: disruption.DefaultOptions().ReplacementTimeout, SpotToSpotConsolidation: opts.FeatureGates.SpotToSpotConsolidation,
			DriftOnMetadata: opts.DriftOnMetadata, Repair: repairs,
			TerminateFirstDrift: opts.FeatureGates.TerminateFirstDrift, TerminateFirstRepair: opts.FeatureGates.TerminateFirstRepair,
		}),
	}
	provisioner.WithCommitments(commitments)
	controllers = append(controllers, commitmentcontroller.NewController(mgr.GetClient(), cloudFor("commitment"), commitments, clk))
	if !opts.DriftOnMetadata {
		controllers = append(controllers, metadata.NewController(mgr.GetClient(), recorder))
	}
	if opts.FeatureGates.CapacityBuffer {
		buffers := buffer.NewCache()
		provisioner.WithBuffers(buffers)
		controllers = append(controllers, capacitybuffer.NewController(mgr.GetClient(), buffers, provisioner, clk))
	}
	bookings := provreq.NewCache()
	provisioner.WithBookings(bookings)
	controllers = append(controllers, provisioningrequest.NewController(mgr.GetClient(), mgr.GetAPIReader(), provisioner, bookings, clk, recorder,
		provisioningrequest.Options{InitialBackoff: opts.ProvisioningRequestInitialBackoff, MaxBackoff: opts.ProvisioningRequestMaxBackoff}))
	if opts.FeatureGates.NodeRepair && opts.LegacyNodeRepair {
		// The kwok provider stands in for AWS, so both repair by AWS's policies.
		controllers = append(controllers, health.NewController(mgr.GetClient(), clk, recorder, health.AWSRepairPolicies))
	}
	if opts.FeatureGates.StaticCapacity {
		controllers = append(controllers, static.NewController(mgr.GetClient(), mgr.GetAPIReader(), cloudFor("nodepool.static"), provisioner, clk))
	}
	if overlays != nil {
		// The controller reads the types without overlays, so they never compound.
		controllers = append(controllers, nodeoverlay.NewController(mgr.GetClient(), cpmetrics.Decorate(built.Provider, clk, "nodeoverlay"), overlays, clk))
	}
	controllers = append(controllers, built.Controllers...)
	if built.WithProvisioner != nil {
		controllers = append(controllers, built.WithProvisioner(provisioner, recorder)...)
	}
	for _, c := range controllers {
		if err := c.Register(ctx, mgr); err != nil {
			return fmt.Errorf("registering %s, %w", c.Name(), err)
		}
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("cache", func(req *http.Request) error {
		if !mgr.GetCache().WaitForCacheSync(req.Context()) {
			return fmt.Errorf("informer caches are not synced")
		}
		return nil
	}); err != nil {
		return err
	}
	logger.WithName("operator").Info("starting", "cloudProvider", cloud.Name(), "clusterName", opts.ClusterName,
		"batchIdleDuration", opts.BatchIdleDuration.String(), "batchMaxDuration", opts.BatchMaxDuration.String(), "featureGates", opts.FeatureGates.String())
	return mgr.Start(ctx)
}

func newCloud(ctx context.Context, opts Options, cfg *rest.Config, mgr manager.Manager) (*Cloud, error) {
	if opts.CloudProvider == "aws" {
		return newAWSCloud(ctx, opts, cfg, mgr)
	}
	settings := scheduling.DefaultAllocatableSettings()
	settings.VMMemoryOverheadPercent = opts.VMMemoryOverheadPercent
	var cat *catalog.File
	var err error
	if opts.KwokCatalog != "" {
		cat, err = catalog.Load(opts.KwokCatalog)
	} else {
		cat, err = catalog.EmbeddedAWS()
	}
	if err != nil {
		return nil, fmt.Errorf("loading the kwok provider's catalog (--kwok-catalog), %w", err)
	}
	return &Cloud{Provider: kwok.New(mgr.GetClient(), cat, settings, opts.ReservedENIs)}, nil
}

func portAddress(host string, port int) string {
	if port == 0 {
		return "0"
	}
	return net.JoinHostPort(host, strconv.Itoa(port))
}

// positive is d, or nil (controller-runtime's default) when it is not set.
func positive(d time.Duration) *time.Duration {
	if d <= 0 {
		return nil
	}
	return &d
}

// profilingHandlers are Go's pprof handlers when profiling is on.
func profilingHandlers(on bool) map[string]http.Handler {
	if !on {
		return nil
	}
	return map[string]http.Handler{
		"/debug/pprof/":        http.HandlerFunc(pprof.Index),
		"/debug/pprof/cmdline": http.HandlerFunc(pprof.Cmdline),
		"/debug/pprof/profile": http.HandlerFunc(pprof.Profile),
		"/debug/pprof/symbol":  http.HandlerFunc(pprof.Symbol),
		"/debug/pprof/trace":   http.HandlerFunc(pprof.Trace),
	}
}

// repairMethod is the policy matcher of node repair as a disruption method, as in
// Karpenter v1.15: nil when the NodeRepair gate is off or --legacy-node-repair
// hands repair to the standalone controller.
func repairMethod(opts Options) (*repair.Matcher, error) {
	if !opts.FeatureGates.NodeRepair || opts.LegacyNodeRepair {
		return nil, nil
	}
	// The kwok provider stands in for AWS, so both repair by AWS's policies.
	policies := dtaws.RepairPolicies(opts.AWSFeatureGates.RebootForRepair)
	if opts.RepairPolicies != nil {
		policies = opts.RepairPolicies
	}
	m, err := repair.NewMatcher(policies, sets.New(repair.Replace, repair.Reboot))
	if err != nil {
		return nil, fmt.Errorf("node repair policies, %w", err)
	}
	return m, nil
}
