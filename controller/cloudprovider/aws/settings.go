package aws

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/aws/aws-sdk-go-v2/service/pricing"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	"github.com/aws/smithy-go/middleware"
)

// Settings are the AWS provider's settings, named as Karpenter names them.
type Settings struct {
	ClusterName string
	// UnavailableTTL is how long an offering EC2 refused stays out of plans
	// (UnavailableTTL when 0); not a flag: a test cannot wait for it.
	UnavailableTTL time.Duration
	// ClusterEndpoint and ClusterCABundle go into node user data; when the endpoint
	// is empty, what is not set is read from EKS DescribeCluster.
	ClusterEndpoint string
	ClusterCABundle string
	// ClusterCIDR is the service CIDR, which AL2023's nodeadm needs; read from EKS
	// with the endpoint.
	ClusterCIDR string
	// EKSControlPlane reads EKS DescribeCluster even when the endpoint is set.
	EKSControlPlane bool
	Region          string
	// Endpoints overrides the endpoint of a service ("ec2", "ssm", "iam", "sqs",
	// "pricing", "eks"): private clusters use VPC endpoint URLs, tests the emulator.
	Endpoints map[string]string
	// IsolatedVPC skips the Pricing API, which has no VPC endpoint.
	IsolatedVPC bool
	// ReservedENIs are ENIs kept for other uses, lowering max pods.
	ReservedENIs int
	// VMMemoryOverheadPercent is the share of memory the hypervisor keeps.
	VMMemoryOverheadPercent float64
	// SSMPrefix is where the EKS image parameters live (DefaultSSMPrefix in AWS).
	SSMPrefix string
	// KubernetesVersion ("1.33") picks the image parameters of aliases.
	KubernetesVersion string
	// DisableReservedCapacity (the ReservedCapacity=false feature gate) leaves the
	// classes' capacity reservations unused.
	DisableReservedCapacity bool
	// APIOptions are added to every client's middleware stack: tests record each
	// call there and check it against the IAM policy Dovetail ships.
	APIOptions []func(*middleware.Stack) error
}

// Clients are the AWS API clients the provider uses.
type Clients struct {
	EC2     *ec2.Client
	SSM     *ssm.Client
	IAM     *iam.Client
	EKS     *eks.Client
	Pricing *pricing.Client
	SQS     *sqs.Client
	Region  string
}

// PricingRegion is where the Pricing API answers for every region.
const PricingRegion = "us-east-1"

// NewClients loads the default credential chain (environment, shared files, IRSA,
// Pod Identity) for the region, with each service's endpoint override applied.
func NewClients(ctx context.Context, s Settings) (*Clients, error) {
	if s.Region == "" {
		return nil, fmt.Errorf("the AWS region is not set; set AWS_REGION or the provider's region setting")
	}
	cfg, err := awsconfig.LoadDefaultConfig(ctx, awsconfig.WithRegion(s.Region))
	if err != nil {
		return nil, fmt.Errorf("loading AWS configuration, %w", err)
	}
	// An override replaces the endpoint only when given, so the SDK's own
	// AWS_ENDPOINT_URL and AWS_ENDPOINT_URL_<SERVICE> settings still apply otherwise.
	endpoint := func(service string, base **string) {
		if url := s.Endpoints[service]; url != "" {
			*base = aws.String(url)
		}
	}
	cfg.APIOptions = append(cfg.APIOptions, s.APIOptions...)
	return &Clients{
		EC2: ec2.NewFromConfig(cfg, func(o *ec2.Options) { endpoint("ec2", &o.BaseEndpoint) }),
		SSM: ssm.NewFromConfig(cfg, func(o *ssm.Options) { endpoint("ssm", &o.BaseEndpoint) }),
		IAM: iam.NewFromConfig(cfg, func(o *iam.Options) { endpoint("iam", &o.BaseEndpoint) }),
		EKS: eks.NewFromConfig(cfg, func(o *eks.Options) { endpoint("eks", &o.BaseEndpoint) }),
		Pricing: pricing.NewFromConfig(cfg, func(o *pricing.Options) {
			o.Region = PricingRegion
			endpoint("pricing", &o.BaseEndpoint)
		}),
		SQS:    sqs.NewFromConfig(cfg, func(o *sqs.Options) { endpoint("sqs", &o.BaseEndpoint) }),
		Region: s.Region,
	}, nil
}

// EKSAPI is the part of EKS the provider uses.
type EKSAPI interface {
	DescribeCluster(context.Context, *eks.DescribeClusterInput, ...func(*eks.Options)) (*eks.DescribeClusterOutput, error)
}

// DiscoverCluster fills what is not set of the cluster endpoint, CA bundle and service
// CIDR from EKS: when the endpoint is not set, or always with EKSControlPlane.
func DiscoverCluster(ctx context.Context, api EKSAPI, s *Settings) error {
	if s.ClusterEndpoint != "" && !s.EKSControlPlane {
		return nil
	}
	out, err := api.DescribeCluster(ctx, &eks.DescribeClusterInput{Name: aws.String(s.ClusterName)})
	if err != nil {
		return fmt.Errorf("discovering cluster %q from EKS (set --cluster-endpoint, without --eks-control-plane, to skip this), %w", s.ClusterName, err)
	}
	c := out.Cluster
	if c == nil || (c.Endpoint == nil && s.ClusterEndpoint == "") {
		return fmt.Errorf("EKS cluster %q has no endpoint yet; wait until it is ACTIVE or set --cluster-endpoint", s.ClusterName)
	}
	if s.ClusterEndpoint == "" {
		s.ClusterEndpoint = *c.Endpoint
	}
	if c.CertificateAuthority != nil && c.CertificateAuthority.Data != nil && s.ClusterCABundle == "" {
		s.ClusterCABundle = *c.CertificateAuthority.Data
	}
	if c.KubernetesNetworkConfig != nil && s.ClusterCIDR == "" {
		s.ClusterCIDR = aws.ToString(c.KubernetesNetworkConfig.ServiceIpv4Cidr)
	}
	return nil
}
