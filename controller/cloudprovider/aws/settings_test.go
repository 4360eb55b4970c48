package aws_test

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"

	dtaws "github.com/dovetail-sh/dovetail/controller/cloudprovider/aws"
	"github.com/dovetail-sh/dovetail/tests/testenv"
)

// What the user sets wins; EKS fills the rest, and is asked only when the endpoint is
// missing or --eks-control-plane says to (Karpenter's EKS_CONTROL_PLANE).
func TestDiscoverClusterFillsWhatIsNotSet(t *testing.T) {
	ctx := context.Background()
	clients := testenv.AWSClients(t, testenv.StartMoto(t), "us-west-2")
	vpc, err := clients.EC2.CreateVpc(ctx, &ec2.CreateVpcInput{CidrBlock: aws.String("10.0.0.0/16")})
	if err != nil {
		t.Fatal(err)
	}
	subnet, err := clients.EC2.CreateSubnet(ctx, &ec2.CreateSubnetInput{VpcId: vpc.Vpc.VpcId, CidrBlock: aws.String("10.0.1.0/24")})
	if err != nil {
		t.Fatal(err)
	}
	created, err := clients.EKS.CreateCluster(ctx, &eks.CreateClusterInput{Name: aws.String("prod"), RoleArn: aws.String("arn:aws:iam::123456789012:role/eks"),
		ResourcesVpcConfig: &ekstypes.VpcConfigRequest{SubnetIds: []string{aws.ToString(subnet.Subnet.SubnetId)}}})
	if err != nil {
		t.Fatal(err)
	}
	eksEndpoint := aws.ToString(created.Cluster.Endpoint)
	eksCA := aws.ToString(created.Cluster.CertificateAuthority.Data)
	if eksEndpoint == "" || eksCA == "" {
		t.Fatalf("the emulator's cluster has endpoint %q and CA %q", eksEndpoint, eksCA)
	}
	const userEndpoint, userCA = "https://api.prod.internal", "dXNlcg=="
	for name, c := range map[string]struct {
		in               dtaws.Settings
		wantEndpoint     string
		wantCA           string
		wantCIDRFromEKS  bool
		wantDescribeCall bool
	}{
		"nothing set":                      {dtaws.Settings{}, eksEndpoint, eksCA, true, true},
		"the CA set":                       {dtaws.Settings{ClusterCABundle: userCA}, eksEndpoint, userCA, true, true},
		"the endpoint set":                 {dtaws.Settings{ClusterEndpoint: userEndpoint}, userEndpoint, "", false, false},
		"the endpoint set, EKS asked":      {dtaws.Settings{ClusterEndpoint: userEndpoint, EKSControlPlane: true}, userEndpoint, eksCA, true, true},
		"both set, EKS asked for the rest": {dtaws.Settings{ClusterEndpoint: userEndpoint, ClusterCABundle: userCA, EKSControlPlane: true}, userEndpoint, userCA, true, true},
	} {
		t.Run(name, func(t *testing.T) {
			s := c.in
			s.ClusterName = "prod"
			calls := &countingEKS{api: clients.EKS}
			if err := dtaws.DiscoverCluster(ctx, calls, &s); err != nil {
				t.Fatal(err)
			}
			if s.ClusterEndpoint != c.wantEndpoint || s.ClusterCABundle != c.wantCA {
				t.Errorf("endpoint %q CA %q; want %q %q", s.ClusterEndpoint, s.ClusterCABundle, c.wantEndpoint, c.wantCA)
			}
			if (s.ClusterCIDR != "") != c.wantCIDRFromEKS {
				t.Errorf("service CIDR %q; from EKS: %v", s.ClusterCIDR, c.wantCIDRFromEKS)
			}
			if (calls.n > 0) != c.wantDescribeCall {
				t.Errorf("%d DescribeCluster calls; want a call: %v", calls.n, c.wantDescribeCall)
			}
		})
	}
	s := dtaws.Settings{ClusterName: "staging"}
	if err := dtaws.DiscoverCluster(ctx, clients.EKS, &s); err == nil {
		t.Error("a cluster EKS does not know was discovered")
	}
}

type countingEKS struct {
	api dtaws.EKSAPI
	n   int
}

func (c *countingEKS) DescribeCluster(ctx context.Context, in *eks.DescribeClusterInput, opts ...func(*eks.Options)) (*eks.DescribeClusterOutput, error) {
	c.n++
	return c.api.DescribeCluster(ctx, in, opts...)
}
