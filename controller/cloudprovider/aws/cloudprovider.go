package aws

import (
	"context"
	"fmt"
	"sync"

	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	awsv1 "github.com/dovetail-sh/dovetail/controller/apis/aws/v1"
	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/controller/catalog"
	"github.com/dovetail-sh/dovetail/controller/cloudprovider"
	"github.com/dovetail-sh/dovetail/controller/cloudprovider/aws/nodeclass"
	"github.com/dovetail-sh/dovetail/controller/cloudprovider/aws/pricing"
	"github.com/dovetail-sh/dovetail/controller/scheduling"
)

// EC2FleetAPI is the part of EC2 launching, finding and terminating instances use.
type EC2FleetAPI interface {
	EC2API
	LaunchTemplateAPI
	pricing.SpotAPI
	nodeclass.CapacityReservationAPI
	CreateFleet(context.Context, *ec2.CreateFleetInput, ...func(*ec2.Options)) (*ec2.CreateFleetOutput, error)
	DescribeInstances(context.Context, *ec2.DescribeInstancesInput, ...func(*ec2.Options)) (*ec2.DescribeInstancesOutput, error)
	TerminateInstances(context.Context, *ec2.TerminateInstancesInput, ...func(*ec2.Options)) (*ec2.TerminateInstancesOutput, error)
	RebootInstances(context.Context, *ec2.RebootInstancesInput, ...func(*ec2.Options)) (*ec2.RebootInstancesOutput, error)
}

// ProviderIDPrefix starts every providerID: aws:///<zone>/<instance-id>.
const ProviderIDPrefix = "aws:///"

// CloudProvider launches NodeClaims as EC2 instances.
type CloudProvider struct {
	kube        client.Client
	ec2         EC2FleetAPI
	describer   *batcher[*ec2types.Instance]
	launchedFor *batcher[*ec2types.Instance]
	terminator  *batcher[ec2types.InstanceStateName]
	settings    Settings
	types       *InstanceTypeProvider
	prices      *pricing.Provider
	unavailable *UnavailableOfferings
	templates   *LaunchTemplates
	reserved    *reservationCounts
	clock       clock.Clock

	mu    sync.Mutex
	cache map[string]classTypes
	// listed answers drift checks from one listing of the cluster's instances.
	listed instanceListing
	// launchFailures counts, per claim, launches EC2 answered with a failure.
	launchFailures map[string]int
	// reservedTemplates maps the launch templates that target a capacity
	// reservation to its id, to label what a fleet launched from them.
	reservedTemplates map[string]string
}

// classTypes are the engine's instance types for one version of a class.
type classTypes struct {
	key    string
	types  []*scheduling.InstanceType
	priced *catalog.File
}

// New builds the provider.
func New(kube client.Client, api EC2FleetAPI, settings Settings, prices *pricing.Provider, clk clock.Clock) *CloudProvider {
	return &CloudProvider{
		kube: kube, ec2: api, settings: settings, prices: prices, clock: clk, describer: newInstanceDescriber(api),
		launchedFor:       newLaunchedLookup(api, settings.ClusterName),
		terminator:        newTerminator(api),
		types:             NewInstanceTypeProvider(api, settings.Region, settings, clk),
		unavailable:       NewUnavailableOfferings(clk, settings.UnavailableTTL),
		templates:         NewLaunchTemplates(api, settings.ClusterName, clk),
		reserved:          newReservationCounts(api, clk),
		cache:             map[string]classTypes{},
		reservedTemplates: map[string]string{},
	}
}

func (c *CloudProvider) Name() string { return "aws" }

// WarmUp loads the region's instance types, which the first launch would
// otherwise wait for: a follower that has them takes over ready to launch.
func (c *CloudProvider) WarmUp(ctx context.Context) error {
	_, err := c.types.List(ctx)
	return err
}

// Unavailable is the provider's cache of offerings EC2 refused.
func (c *CloudProvider) Unavailable() *UnavailableOfferings { return c.unavailable }

// LaunchTemplates is the provider's launch template store.
func (c *CloudProvider) LaunchTemplates() *LaunchTemplates { return c.templates }

// nodeClass returns the class a NodePool or NodeClaim refers to, ready to launch.
func (c *CloudProvider) nodeClass(ctx context.Context, ref *v1.NodeClassReference) (*awsv1.EC2NodeClass, error) {
	if ref == nil || ref.Name == "" {
		return nil, fmt.Errorf("nodeClassRef is not set; point it at an EC2NodeClass")
	}
	if ref.Kind != "" && ref.Kind != "EC2NodeClass" {
		return nil, fmt.Errorf("nodeClassRef kind %q is not EC2NodeClass", ref.Kind)
	}
	nc := &awsv1.EC2NodeClass{}
	if err := c.kube.Get(ctx, client.ObjectKey{Name: ref.Name}, nc); err != nil {
		return nil, fmt.Errorf("getting EC2NodeClass %q, %w", ref.Name, err)
	}
	if nc.DeletionTimestamp != nil {
		return nil, fmt.Errorf("EC2NodeClass %q is being deleted", nc.Name)
	}
	if cond := meta.FindStatusCondition(nc.Status.Conditions, awsv1.ConditionTypeReady); cond == nil || cond.Status != metav1.ConditionTrue {
		why := "its status has not been resolved yet"
		for _, c := range nc.Status.Conditions {
			if c.Type != awsv1.ConditionTypeReady && c.Status == metav1.ConditionFalse {
				why = c.Type + ": " + c.Message
				break
			}
		}
		err := fmt.Errorf("EC2NodeClass %q is not ready (%s)", nc.Name, why)
		if cond != nil && cond.Status == metav1.ConditionFalse {
			// Resolved and found wanting: no launch succeeds until someone fixes it.
			return nil, cloudprovider.NewNodeClassNotReadyError(err)
		}
		return nil, err
	}
	return nc, nil
}
