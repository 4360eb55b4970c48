package operator

import (
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"strings"
	"time"

	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	dtaws "github.com/dovetail-sh/dovetail/controller/cloudprovider/aws"
	"github.com/dovetail-sh/dovetail/controller/cloudprovider/aws/nodeclass"
	"github.com/dovetail-sh/dovetail/controller/cloudprovider/aws/pricing"
	"github.com/dovetail-sh/dovetail/controller/controllers/capacityreservation/expiration"
	"github.com/dovetail-sh/dovetail/controller/controllers/ec2nodeclass/launchtemplates"
	"github.com/dovetail-sh/dovetail/controller/controllers/ec2nodeclass/status"
	"github.com/dovetail-sh/dovetail/controller/controllers/interruption"
	"github.com/dovetail-sh/dovetail/controller/controllers/provisioning"
)

// newAWSCloud builds the EC2 provider with its EC2NodeClass controller, launch
// template collector and price refresher.
func newAWSCloud(ctx context.Context, opts Options, cfg *rest.Config, mgr manager.Manager) (*Cloud, error) {
	settings := dtaws.Settings{
		ClusterName: opts.ClusterName, ClusterEndpoint: opts.ClusterEndpoint, Region: opts.AWSRegion,
		Endpoints: opts.AWSEndpoints, IsolatedVPC: opts.IsolatedVPC, ReservedENIs: opts.ReservedENIs,
		VMMemoryOverheadPercent: opts.VMMemoryOverheadPercent, SSMPrefix: opts.SSMParameterPrefix,
		APIOptions: opts.AWSAPIOptions, DisableReservedCapacity: !opts.FeatureGates.ReservedCapacityOn(),
		ClusterCABundle: opts.ClusterCABundle, EKSControlPlane: opts.EKSControlPlane, UnavailableTTL: opts.UnavailableOfferingsTTL,
	}
	clients, err := dtaws.NewClients(ctx, settings)
	if err != nil {
		return nil, err
	}
	if err := dtaws.DiscoverCluster(ctx, clients.EKS, &settings); err != nil {
		return nil, err
	}
	if settings.ClusterCABundle == "" {
		// The API server's CA is the one the controller already trusts.
		settings.ClusterCABundle, err = caBundle(cfg)
		if err != nil {
			return nil, err
		}
	}
	version, err := kubernetesVersion(cfg)
	if err != nil {
		return nil, err
	}
	settings.KubernetesVersion = version
	clk := clock.RealClock{}
	logger := log.FromContext(ctx).WithName("aws")
	prices := pricing.NewProvider(clients.EC2, clients.Pricing, settings.Region, settings.IsolatedVPC, clk, logger.WithName("pricing"))
	provider := dtaws.New(mgr.GetClient(), clients.EC2, settings, prices, clk)
	amis := &nodeclass.AMIResolver{EC2: clients.EC2, SSM: clients.SSM, SSMPrefix: settings.SSMPrefix, KubernetesVersion: version}
	classStatus := status.NewController(mgr.GetClient(), clients.EC2, amis, clients.IAM, settings.ClusterName, settings.Region, clk)
	classStatus.LaunchTemplates = provider.LaunchTemplates()
	// A class's security groups are resolved on their own interval, the rest of it
	// as often as the shorter of the image and subnet intervals asks; unset (zero)
	// leaves the controller's defaults.
	for _, d := range []time.Duration{opts.AMIRefreshInterval, opts.SubnetRefreshInterval} {
		if d > 0 && (classStatus.Refresh == 0 || d < classStatus.Refresh) {
			classStatus.Refresh = d
		}
	}
	classStatus.SecurityGroupRefresh = opts.SecurityGroupRefreshInterval
	cloud := &Cloud{
		Provider: provider,
		Controllers: []Controller{classStatus, launchtemplates.NewController(mgr.GetClient(), provider.LaunchTemplates(), clk),
			expiration.NewController(mgr.GetClient(), clk, mgr.GetEventRecorderFor("dovetail"))},
		// Prices and instance types are only read from AWS, so every replica keeps
		// them: a follower that takes over launches at once instead of first
		// loading the region's catalog.
		Runnables: []manager.Runnable{everyReplica(prices.Run), everyReplica(func(ctx context.Context) error {
			if err := provider.WarmUp(ctx); err != nil {
				logger.Error(err, "loading instance types ahead of the first launch; the first launch will load them")
			}
			return nil
		})},
	}
	// EC2's instance status is read with or without a queue; with one, both act
	// through the same controller, so a claim both report is acted on once.
	cloud.WithProvisioner = func(p *provisioning.Provisioner, recorder record.EventRecorder) []Controller {
		c := interruption.NewController(mgr.GetClient(), clients.SQS, opts.InterruptionQueue, p, provider.Unavailable(), recorder, clk)
		out := []Controller{interruption.NewInstanceStatus(c, clients.EC2)}
		if opts.InterruptionQueue != "" {
			out = append(out, c)
		}
		return out
	}
	if opts.InterruptionQueue == "" {
		logger.Info("no --interruption-queue: spot interruptions and AWS Health scheduled changes are not handled ahead of time")
	}
	return cloud, nil
}

// kubernetesVersion is the API server's "major.minor", which picks alias images.
func kubernetesVersion(cfg *rest.Config) (string, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return "", fmt.Errorf("building a discovery client, %w", err)
	}
	v, err := dc.ServerVersion()
	if err != nil {
		return "", fmt.Errorf("reading the API server's version, %w", err)
	}
	return v.Major + "." + strings.TrimSuffix(v.Minor, "+"), nil
}

func caBundle(cfg *rest.Config) (string, error) {
	data := cfg.CAData
	if len(data) == 0 && cfg.CAFile != "" {
		var err error
		if data, err = os.ReadFile(cfg.CAFile); err != nil {
			return "", fmt.Errorf("reading the cluster CA for node user data, %w", err)
		}
	}
	return base64.StdEncoding.EncodeToString(data), nil
}

// everyReplica runs on every replica, leader or not.
type everyReplica func(context.Context) error

func (f everyReplica) Start(ctx context.Context) error { return f(ctx) }

func (everyReplica) NeedLeaderElection() bool { return false }
