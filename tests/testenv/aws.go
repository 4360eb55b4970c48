package testenv

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/smithy-go/middleware"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dtaws "github.com/dovetail-sh/dovetail/controller/cloudprovider/aws"
	"github.com/dovetail-sh/dovetail/tests/localstack"
)

// SSMPrefix is where tests publish EKS image parameters (see localstack.SSMPrefix).
const SSMPrefix = localstack.SSMPrefix

// KubernetesVersion is the version the local kube-apiserver reports.
const KubernetesVersion = localstack.KubernetesVersion

// SeededAWS is what SeedAWS created.
type SeededAWS = localstack.SeededAWS

// SeedAWS is localstack.SeedAWS failing the test on error.
func SeedAWS(t testing.TB, ctx context.Context, clients *dtaws.Clients, discovery, cidrPrefix string, zones ...string) *SeededAWS {
	t.Helper()
	seeded, err := localstack.SeedAWS(ctx, clients, discovery, cidrPrefix, zones...)
	if err != nil {
		t.Fatal(err)
	}
	return seeded
}

// StartKubeletStandIn runs the kubelet stand-in until the test ends.
func StartKubeletStandIn(t testing.TB, kube client.Client, api *ec2.Client, cluster string, securityGroups ...string) *localstack.KubeletStandIn {
	t.Helper()
	k := localstack.StartKubeletStandIn(kube, api, cluster, t.Logf, securityGroups...)
	t.Cleanup(k.Stop)
	return k
}

// AddSystemNodes registers n kwok nodes no NodePool owns (see localstack.AddSystemNodes).
func AddSystemNodes(t testing.TB, kube client.Client, n int) {
	t.Helper()
	if err := localstack.AddSystemNodes(context.Background(), kube, n); err != nil {
		t.Fatal(err)
	}
}

// Eventually retries cond until it returns nil or the timeout passes.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var err error
	for time.Now().Before(deadline) {
		if err = cond(); err == nil {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("%s: not within %s: %v", what, timeout, err)
}

// RefuseCapacity returns an EC2 client option under which CreateFleet behaves as if
// EC2 had no capacity for the offerings refuse picks: they are taken out of the
// request and reported in the response's Errors as InsufficientInstanceCapacity, as
// EC2 reports them. The emulator never runs out of capacity by itself.
func RefuseCapacity(refuse func(instanceType, zone string) bool) func(*ec2.Options) {
	return func(o *ec2.Options) {
		o.APIOptions = append(o.APIOptions, RefuseCapacityPerCall(func() func(string, string) bool { return refuse }))
	}
}

// RefuseCapacityPerCall is RefuseCapacity for any AWS client's middleware stack
// (operator.Options.AWSAPIOptions), deciding for each CreateFleet call anew: refuse
// is called once a call and picks that call's refused offerings.
func RefuseCapacityPerCall(perCall func() func(instanceType, zone string) bool) func(*middleware.Stack) error {
	return func(stack *middleware.Stack) error {
		return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("RefuseCapacity", func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
			fleet, ok := in.Parameters.(*ec2.CreateFleetInput)
			if !ok {
				return next.HandleInitialize(ctx, in)
			}
			refuse := perCall()
			kept := *fleet
			kept.LaunchTemplateConfigs = nil
			var refused []ec2types.CreateFleetError
			for _, cfg := range fleet.LaunchTemplateConfigs {
				keptCfg := cfg
				keptCfg.Overrides = nil
				for _, o := range cfg.Overrides {
					if !refuse(string(o.InstanceType), aws.ToString(o.AvailabilityZone)) {
						keptCfg.Overrides = append(keptCfg.Overrides, o)
						continue
					}
					refused = append(refused, ec2types.CreateFleetError{
						ErrorCode:    aws.String("InsufficientInstanceCapacity"),
						ErrorMessage: aws.String("We currently do not have sufficient capacity in the Availability Zone you requested."),
						Lifecycle:    ec2types.InstanceLifecycle(fleet.TargetCapacitySpecification.DefaultTargetCapacityType),
						LaunchTemplateAndOverrides: &ec2types.LaunchTemplateAndOverridesResponse{Overrides: &ec2types.FleetLaunchTemplateOverrides{
							InstanceType: o.InstanceType, AvailabilityZone: o.AvailabilityZone, SubnetId: o.SubnetId}},
					})
				}
				if len(keptCfg.Overrides) > 0 {
					kept.LaunchTemplateConfigs = append(kept.LaunchTemplateConfigs, keptCfg)
				}
			}
			if len(kept.LaunchTemplateConfigs) == 0 {
				return middleware.InitializeOutput{Result: &ec2.CreateFleetOutput{Errors: refused}}, middleware.Metadata{}, nil
			}
			in.Parameters = &kept
			out, md, err := next.HandleInitialize(ctx, in)
			if err == nil {
				if res, ok := out.Result.(*ec2.CreateFleetOutput); ok {
					res.Errors = append(res.Errors, refused...)
				}
			}
			return out, md, err
		}), middleware.Before)
	}
}

// NoSpotServiceLinkedRole makes EC2 answer every spot CreateFleet as it does in an
// account without the spot service-linked role that the caller may not create:
// each override fails with AuthFailure.ServiceLinkedRoleCreationNotPermitted and
// nothing launches. On-demand launches go through.
func NoSpotServiceLinkedRole() func(*ec2.Options) {
	return func(o *ec2.Options) {
		o.APIOptions = append(o.APIOptions, func(stack *middleware.Stack) error {
			return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("NoSpotServiceLinkedRole", func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
				fleet, ok := in.Parameters.(*ec2.CreateFleetInput)
				if !ok || fleet.TargetCapacitySpecification == nil || fleet.TargetCapacitySpecification.DefaultTargetCapacityType != ec2types.DefaultTargetCapacityTypeSpot {
					return next.HandleInitialize(ctx, in)
				}
				var errs []ec2types.CreateFleetError
				for _, cfg := range fleet.LaunchTemplateConfigs {
					for _, o := range cfg.Overrides {
						errs = append(errs, ec2types.CreateFleetError{
							ErrorCode:    aws.String("AuthFailure.ServiceLinkedRoleCreationNotPermitted"),
							ErrorMessage: aws.String("The provided credentials do not have permission to create the service-linked role for EC2 Spot Instances."),
							Lifecycle:    ec2types.InstanceLifecycleSpot,
							LaunchTemplateAndOverrides: &ec2types.LaunchTemplateAndOverridesResponse{Overrides: &ec2types.FleetLaunchTemplateOverrides{
								InstanceType: o.InstanceType, AvailabilityZone: o.AvailabilityZone, SubnetId: o.SubnetId}},
						})
					}
				}
				return middleware.InitializeOutput{Result: &ec2.CreateFleetOutput{Errors: errs}}, middleware.Metadata{}, nil
			}), middleware.Before)
		})
	}
}
