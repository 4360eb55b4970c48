package aws

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
)

// Settings are the AWS provider's settings, named as Karpenter names them.
type Settings struct {
	ClusterName string
	Region      string
	// Endpoints overrides the endpoint of a service ("ec2", "ssm", "iam", "sqs",
	// "pricing", "eks"): private clusters use VPC endpoint URLs, tests the emulator.
	Endpoints map[string]string
	// IsolatedVPC skips the Pricing API, which has no VPC endpoint.
	IsolatedVPC bool
	// ReservedENIs are ENIs kept for other uses, lowering max pods.
	ReservedENIs int
}

// Clients are the AWS API clients the provider uses.
type Clients struct {
	EC2    *ec2.Client
	SSM    *ssm.Client
	IAM    *iam.Client
	Region string
}

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
	return &Clients{
		EC2: ec2.NewFromConfig(cfg, func(o *ec2.Options) {
			if url, ok := s.Endpoints["ec2"]; ok {
				o.BaseEndpoint = aws.String(url)
			}
		}),
		SSM: ssm.NewFromConfig(cfg, func(o *ssm.Options) {
			if url, ok := s.Endpoints["ssm"]; ok {
				o.BaseEndpoint = aws.String(url)
			}
		}),
		IAM: iam.NewFromConfig(cfg, func(o *iam.Options) {
			if url, ok := s.Endpoints["iam"]; ok {
				o.BaseEndpoint = aws.String(url)
			}
		}),
		Region: s.Region,
	}, nil
}
