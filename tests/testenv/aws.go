package testenv

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	ssmtypes "github.com/aws/aws-sdk-go-v2/service/ssm/types"
	"github.com/aws/smithy-go/middleware"

	dtaws "github.com/dovetail-sh/dovetail/controller/cloudprovider/aws"
)

// SSMPrefix is where tests publish EKS image parameters: AWS reserves /aws, and the
// emulator has none of its own.
const SSMPrefix = "/dovetail-test/service"

// KubernetesVersion is the version the local kube-apiserver reports.
const KubernetesVersion = "1.33"

// SeededAWS is what SeedAWS created.
type SeededAWS struct {
	VPC            string
	Subnets        map[string]string // zone → subnet id
	SecurityGroup  string
	Role           string
	Images         map[string]string // EC2 architecture → image id
	DiscoveryValue string
}

// SeedAWS creates what an EC2NodeClass selects in the emulator: a VPC with a subnet
// per zone and a security group tagged karpenter.sh/discovery=<discovery>, the node
// role, and AL2023 image parameters for both architectures.
func SeedAWS(t testing.TB, ctx context.Context, clients *dtaws.Clients, discovery, cidrPrefix string, zones ...string) *SeededAWS {
	t.Helper()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	out := &SeededAWS{Subnets: map[string]string{}, Images: map[string]string{}, DiscoveryValue: discovery, Role: "KarpenterNodeRole-" + discovery}
	vpc, err := clients.EC2.CreateVpc(ctx, &ec2.CreateVpcInput{CidrBlock: aws.String(cidrPrefix + ".0.0/16")})
	must(err)
	out.VPC = aws.ToString(vpc.Vpc.VpcId)
	tags := []ec2types.Tag{{Key: aws.String("karpenter.sh/discovery"), Value: aws.String(discovery)}}
	for i, zone := range zones {
		s, err := clients.EC2.CreateSubnet(ctx, &ec2.CreateSubnetInput{VpcId: vpc.Vpc.VpcId, CidrBlock: aws.String(fmt.Sprintf("%s.%d.0/24", cidrPrefix, i+1)), AvailabilityZone: aws.String(zone),
			TagSpecifications: []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeSubnet, Tags: tags}}})
		must(err)
		out.Subnets[zone] = aws.ToString(s.Subnet.SubnetId)
	}
	sg, err := clients.EC2.CreateSecurityGroup(ctx, &ec2.CreateSecurityGroupInput{GroupName: aws.String("nodes-" + discovery), Description: aws.String("nodes"), VpcId: vpc.Vpc.VpcId,
		TagSpecifications: []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeSecurityGroup, Tags: tags}}})
	must(err)
	out.SecurityGroup = aws.ToString(sg.GroupId)
	for _, arch := range []string{"x86_64", "arm64"} {
		images, err := clients.EC2.DescribeImages(ctx, &ec2.DescribeImagesInput{Filters: []ec2types.Filter{{Name: aws.String("architecture"), Values: []string{arch}}}})
		if err != nil || len(images.Images) == 0 {
			t.Fatalf("no %s image in the emulator: %v", arch, err)
		}
		out.Images[arch] = aws.ToString(images.Images[0].ImageId)
		_, err = clients.SSM.PutParameter(ctx, &ssm.PutParameterInput{Name: aws.String(fmt.Sprintf("%s/eks/optimized-ami/%s/amazon-linux-2023/%s/standard/recommended/image_id", SSMPrefix, KubernetesVersion, arch)),
			Value: images.Images[0].ImageId, Type: ssmtypes.ParameterTypeString, Overwrite: aws.Bool(true)})
		must(err)
	}
	_, err = clients.IAM.CreateRole(ctx, &iam.CreateRoleInput{RoleName: aws.String(out.Role),
		AssumeRolePolicyDocument: aws.String(`{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"Service":"ec2.amazonaws.com"},"Action":"sts:AssumeRole"}]}`)})
	must(err)
	return out
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
		o.APIOptions = append(o.APIOptions, func(stack *middleware.Stack) error {
			return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("RefuseCapacity", func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
				fleet, ok := in.Parameters.(*ec2.CreateFleetInput)
				if !ok {
					return next.HandleInitialize(ctx, in)
				}
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
		})
	}
}
