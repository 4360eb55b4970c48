package localstack

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	ssmtypes "github.com/aws/aws-sdk-go-v2/service/ssm/types"
	"github.com/go-logr/logr"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	awsv1 "github.com/dovetail-sh/dovetail/controller/apis/aws/v1"
	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/controller/catalog"
	dtaws "github.com/dovetail-sh/dovetail/controller/cloudprovider/aws"
	"github.com/dovetail-sh/dovetail/controller/cloudprovider/aws/awserr"
	"github.com/dovetail-sh/dovetail/controller/cloudprovider/aws/pricing"
	"github.com/dovetail-sh/dovetail/controller/scheduling"
)

// SSMPrefix is where the local stack publishes EKS image parameters: AWS reserves /aws, and the
// emulator has none of its own.
const SSMPrefix = "/dovetail-test/service"

// KubernetesVersion is the version the local kube-apiserver reports.
const KubernetesVersion = "1.33"

// SeededAWS is what SeedAWS created.
type SeededAWS struct {
	VPC            string
	Subnets        map[string]string // zone → subnet id
	SecurityGroup  string
	RouteTable     string // of the subnets, for gateway endpoints
	Role           string
	Images         map[string]string // EC2 architecture → image id
	DiscoveryValue string
}

// SeedAWS creates what an EC2NodeClass selects in the emulator: a VPC with a subnet
// per zone and a security group tagged karpenter.sh/discovery=<discovery>, the node
// role, and AL2023 image parameters for both architectures.
func SeedAWS(ctx context.Context, clients *dtaws.Clients, discovery, cidrPrefix string, zones ...string) (*SeededAWS, error) {
	out := &SeededAWS{Subnets: map[string]string{}, Images: map[string]string{}, DiscoveryValue: discovery, Role: "KarpenterNodeRole-" + discovery}
	vpc, err := clients.EC2.CreateVpc(ctx, &ec2.CreateVpcInput{CidrBlock: aws.String(cidrPrefix + ".0.0/16")})
	if err != nil {
		return nil, fmt.Errorf("creating the VPC, %w", err)
	}
	out.VPC = aws.ToString(vpc.Vpc.VpcId)
	tags := []ec2types.Tag{{Key: aws.String("karpenter.sh/discovery"), Value: aws.String(discovery)}}
	// The SDK retries a request whose response was cut off ("use of closed network
	// connection"), so a create the emulator already did can come back as a conflict:
	// each create below then finds what the first attempt made.
	//
	// A /20 a zone, 4,091 addresses: a /24 holds 251 instances, fewer than one
	// zone of a 2,000-node fleet, and the emulator fails a launch into a full
	// subnet with an internal error where EC2 answers
	// InsufficientFreeAddressesInSubnet.
	for i, zone := range zones {
		cidr := fmt.Sprintf("%s.%d.0/20", cidrPrefix, 16*i)
		s, err := clients.EC2.CreateSubnet(ctx, &ec2.CreateSubnetInput{VpcId: vpc.Vpc.VpcId, CidrBlock: aws.String(cidr), AvailabilityZone: aws.String(zone),
			TagSpecifications: []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeSubnet, Tags: tags}}})
		switch {
		case err == nil:
			out.Subnets[zone] = aws.ToString(s.Subnet.SubnetId)
		case awserr.IsCode(err, "InvalidSubnet.Conflict"):
			found, derr := clients.EC2.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{Filters: []ec2types.Filter{
				{Name: aws.String("vpc-id"), Values: []string{out.VPC}}, {Name: aws.String("cidr-block"), Values: []string{cidr}}}})
			if derr != nil || len(found.Subnets) != 1 {
				return nil, fmt.Errorf("creating the subnet in %s, %w (looking it up: %v)", zone, err, derr)
			}
			out.Subnets[zone] = aws.ToString(found.Subnets[0].SubnetId)
		default:
			return nil, fmt.Errorf("creating the subnet in %s, %w", zone, err)
		}
	}
	groupName := "nodes-" + discovery
	sg, err := clients.EC2.CreateSecurityGroup(ctx, &ec2.CreateSecurityGroupInput{GroupName: aws.String(groupName), Description: aws.String("nodes"), VpcId: vpc.Vpc.VpcId,
		TagSpecifications: []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeSecurityGroup, Tags: tags}}})
	switch {
	case err == nil:
		out.SecurityGroup = aws.ToString(sg.GroupId)
	case awserr.IsCode(err, "InvalidGroup.Duplicate"):
		found, derr := clients.EC2.DescribeSecurityGroups(ctx, &ec2.DescribeSecurityGroupsInput{Filters: []ec2types.Filter{
			{Name: aws.String("vpc-id"), Values: []string{out.VPC}}, {Name: aws.String("group-name"), Values: []string{groupName}}}})
		if derr != nil || len(found.SecurityGroups) != 1 {
			return nil, fmt.Errorf("creating the security group, %w (looking it up: %v)", err, derr)
		}
		out.SecurityGroup = aws.ToString(found.SecurityGroups[0].GroupId)
	default:
		return nil, fmt.Errorf("creating the security group, %w", err)
	}
	rt, err := clients.EC2.CreateRouteTable(ctx, &ec2.CreateRouteTableInput{VpcId: vpc.Vpc.VpcId})
	if err != nil {
		return nil, fmt.Errorf("creating the route table, %w", err)
	}
	out.RouteTable = aws.ToString(rt.RouteTable.RouteTableId)
	for _, arch := range []string{"x86_64", "arm64"} {
		images, err := clients.EC2.DescribeImages(ctx, &ec2.DescribeImagesInput{Filters: []ec2types.Filter{{Name: aws.String("architecture"), Values: []string{arch}}}})
		if err != nil || len(images.Images) == 0 {
			return nil, fmt.Errorf("no %s image in the emulator: %v", arch, err)
		}
		out.Images[arch] = aws.ToString(images.Images[0].ImageId)
		_, err = clients.SSM.PutParameter(ctx, &ssm.PutParameterInput{Name: aws.String(fmt.Sprintf("%s/eks/optimized-ami/%s/amazon-linux-2023/%s/standard/recommended/image_id", SSMPrefix, KubernetesVersion, arch)),
			Value: images.Images[0].ImageId, Type: ssmtypes.ParameterTypeString, Overwrite: aws.Bool(true)})
		if err != nil {
			return nil, fmt.Errorf("publishing the %s image parameter, %w", arch, err)
		}
		if arch != "x86_64" {
			continue
		}
		// The EKS Windows images (Server Core, amd64 only), for windows20xx@latest.
		for _, year := range []string{"2019", "2022", "2025"} {
			_, err = clients.SSM.PutParameter(ctx, &ssm.PutParameterInput{Name: aws.String(fmt.Sprintf("%s/ami-windows-latest/Windows_Server-%s-English-Core-EKS_Optimized-%s/image_id", SSMPrefix, year, KubernetesVersion)),
				Value: images.Images[0].ImageId, Type: ssmtypes.ParameterTypeString, Overwrite: aws.Bool(true)})
			if err != nil {
				return nil, fmt.Errorf("publishing the Windows %s image parameter, %w", year, err)
			}
		}
	}
	_, err = clients.IAM.CreateRole(ctx, &iam.CreateRoleInput{RoleName: aws.String(out.Role),
		AssumeRolePolicyDocument: aws.String(`{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"Service":"ec2.amazonaws.com"},"Action":"sts:AssumeRole"}]}`)})
	if err != nil && !awserr.IsCode(err, "EntityAlreadyExists") {
		return nil, fmt.Errorf("creating the node role, %w", err)
	}
	return out, nil
}

// InstanceTypes are a pool's instance types as a controller running the AWS
// provider in isolated-VPC mode sees them on the emulator: its types, offerings and
// spot prices, so a prediction is priced as the launches are. The pool's node class
// must be resolved (Ready).
func InstanceTypes(ctx context.Context, kube client.Client, clients *dtaws.Clients, cluster, region string, pool *v1.NodePool) ([]*scheduling.InstanceType, error) {
	provider, err := controllerProvider(ctx, kube, clients, cluster, region)
	if err != nil {
		return nil, err
	}
	return provider.GetInstanceTypes(ctx, pool)
}

// Offered is the region's types with the offerings the pool's class gets, priced
// as the controller prices them, and the class: what a prediction plans with.
func Offered(ctx context.Context, kube client.Client, clients *dtaws.Clients, cluster, region string, pool *v1.NodePool) (*catalog.File, *awsv1.EC2NodeClass, error) {
	provider, err := controllerProvider(ctx, kube, clients, cluster, region)
	if err != nil {
		return nil, nil, err
	}
	return provider.Offered(ctx, pool)
}

// controllerProvider is the AWS provider as the controller runs it, its spot
// prices read.
func controllerProvider(ctx context.Context, kube client.Client, clients *dtaws.Clients, cluster, region string) (*dtaws.CloudProvider, error) {
	clk := clock.RealClock{}
	prices := pricing.NewProvider(clients.EC2, clients.Pricing, region, true, clk, logr.Discard())
	if err := prices.UpdateSpot(ctx); err != nil {
		return nil, fmt.Errorf("reading spot prices, %w", err)
	}
	return dtaws.New(kube, clients.EC2, dtaws.Settings{ClusterName: cluster, Region: region, VMMemoryOverheadPercent: scheduling.DefaultAllocatableSettings().VMMemoryOverheadPercent}, prices, clk), nil
}
