// Package provider is the Terraform provider: it declares what Dovetail needs on AWS
// and in the cluster in typed HCL, so plans know the schema before anything exists.
package provider

import (
	"context"
	"fmt"
	"os"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials/stscreds"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	"github.com/aws/smithy-go/middleware"
	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/provider"
	"github.com/hashicorp/terraform-plugin-framework/provider/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

// TypeName prefixes every resource and data source.
const TypeName = "dovetail"

// New returns the provider factory for a version. apiOptions join the middleware stack
// of every AWS client the provider makes: tests inject the failures an emulator never
// produces (a lost response, a throttled call, an eventually consistent delete) and
// record the calls made.
func New(version string, apiOptions ...func(*middleware.Stack) error) func() provider.Provider {
	return func() provider.Provider { return &dovetailProvider{version: version, apiOptions: apiOptions} }
}

type dovetailProvider struct {
	version    string
	apiOptions []func(*middleware.Stack) error
}

// providerModel is the provider block.
type providerModel struct {
	AWS        *awsModel        `tfsdk:"aws"`
	Kubernetes *kubernetesModel `tfsdk:"kubernetes"`
}

// awsModel mirrors the hashicorp/aws provider's settings users already know.
type awsModel struct {
	Region                 types.String      `tfsdk:"region"`
	Profile                types.String      `tfsdk:"profile"`
	SharedConfigFiles      []types.String    `tfsdk:"shared_config_files"`
	SharedCredentialsFiles []types.String    `tfsdk:"shared_credentials_files"`
	Endpoints              types.Map         `tfsdk:"endpoints"`
	AssumeRole             *assumeRoleModel  `tfsdk:"assume_role"`
	DefaultTags            *defaultTagsModel `tfsdk:"default_tags"`
}

type defaultTagsModel struct {
	Tags types.Map `tfsdk:"tags"`
}

type assumeRoleModel struct {
	RoleARN     types.String `tfsdk:"role_arn"`
	SessionName types.String `tfsdk:"session_name"`
	ExternalID  types.String `tfsdk:"external_id"`
}

// Clients are what resources use; a side that was not configured is nil.
type Clients struct {
	AWS        *AWSClients
	Kubernetes *KubeClients
}

// AWSClients are the AWS API clients, each with its endpoint override.
type AWSClients struct {
	EC2         *ec2.Client
	EKS         *eks.Client
	IAM         *iam.Client
	SQS         *sqs.Client
	EventBridge *eventbridge.Client
	Region      string
	// DefaultTags go on everything the resources tag, under each resource's tags.
	DefaultTags map[string]string
}

func (p *dovetailProvider) Metadata(_ context.Context, _ provider.MetadataRequest, resp *provider.MetadataResponse) {
	resp.TypeName = TypeName
	resp.Version = p.version
}

func (p *dovetailProvider) Schema(_ context.Context, _ provider.SchemaRequest, resp *provider.SchemaResponse) {
	resp.Schema = schema.Schema{
		Description: "Dovetail: a Karpenter-compatible node autoscaler for EKS, with what it needs on AWS and in the cluster.",
		Blocks: map[string]schema.Block{
			"aws": schema.SingleNestedBlock{
				Description: "How to reach AWS, as in the hashicorp/aws provider. Credentials come from the usual chain (environment, shared files, profile, IRSA).",
				Attributes: map[string]schema.Attribute{
					"region":                   schema.StringAttribute{Optional: true, Description: "AWS region; defaults to AWS_REGION."},
					"profile":                  schema.StringAttribute{Optional: true, Description: "Named profile from the shared files."},
					"shared_config_files":      schema.ListAttribute{Optional: true, ElementType: types.StringType, Description: "Shared config files to read."},
					"shared_credentials_files": schema.ListAttribute{Optional: true, ElementType: types.StringType, Description: "Shared credentials files to read."},
					"endpoints":                schema.MapAttribute{Optional: true, ElementType: types.StringType, Description: "Endpoint URL per service (ec2, eks, iam, sqs, events, sts...), for VPC endpoints or an emulator."},
				},
				Blocks: map[string]schema.Block{
					"default_tags": schema.SingleNestedBlock{
						Description: "Tags on every AWS resource this provider tags (roles, instance profiles, the queue and its rules, VPC endpoints and their security group), as hashicorp/aws's default_tags: a resource's own tags win on a shared key, and its tags_all shows the result. Instances the controller launches take their tags from EC2NodeClass spec.tags.",
						Attributes: map[string]schema.Attribute{
							"tags": schema.MapAttribute{Optional: true, ElementType: types.StringType, Description: "The tags, key to value."},
						},
					},
					"assume_role": schema.SingleNestedBlock{
						Description: "A role to assume with the configured credentials.",
						Attributes: map[string]schema.Attribute{
							"role_arn":     schema.StringAttribute{Optional: true, Description: "ARN of the role to assume."},
							"session_name": schema.StringAttribute{Optional: true, Description: "Session name of the assumed role's credentials (shows in CloudTrail)."},
							"external_id":  schema.StringAttribute{Optional: true, Description: "External ID the role's trust policy requires, if any."},
						},
					},
				},
			},
			"kubernetes": kubernetesBlock(),
		},
	}
}

func (p *dovetailProvider) Configure(ctx context.Context, req provider.ConfigureRequest, resp *provider.ConfigureResponse) {
	var cfg providerModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &cfg)...)
	if resp.Diagnostics.HasError() {
		return
	}
	clients := &Clients{}
	if cfg.AWS != nil {
		aws, err := newAWSClients(ctx, cfg.AWS, p.apiOptions)
		if err != nil {
			resp.Diagnostics.AddAttributeError(pathAWS, "Cannot configure AWS", err.Error())
			return
		}
		clients.AWS = aws
	}
	if cfg.Kubernetes != nil {
		clients.Kubernetes = newKubeClients(cfg.Kubernetes)
	}
	resp.ResourceData = clients
	resp.DataSourceData = clients
}

func newAWSClients(ctx context.Context, m *awsModel, apiOptions []func(*middleware.Stack) error) (*AWSClients, error) {
	var opts []func(*awsconfig.LoadOptions) error
	region := m.Region.ValueString()
	if region == "" {
		region = os.Getenv("AWS_REGION")
	}
	if region == "" {
		return nil, fmt.Errorf("no region: set aws { region = \"...\" } or AWS_REGION")
	}
	opts = append(opts, awsconfig.WithRegion(region))
	if p := m.Profile.ValueString(); p != "" {
		opts = append(opts, awsconfig.WithSharedConfigProfile(p))
	}
	if files := stringValues(m.SharedConfigFiles); len(files) > 0 {
		opts = append(opts, awsconfig.WithSharedConfigFiles(files))
	}
	if files := stringValues(m.SharedCredentialsFiles); len(files) > 0 {
		opts = append(opts, awsconfig.WithSharedCredentialsFiles(files))
	}
	cfg, err := awsconfig.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("loading AWS configuration, %w", err)
	}
	cfg.APIOptions = append(cfg.APIOptions, apiOptions...)
	endpoints := map[string]string{}
	if !m.Endpoints.IsNull() {
		for k, v := range m.Endpoints.Elements() {
			if s, ok := v.(types.String); ok {
				endpoints[k] = s.ValueString()
			}
		}
	}
	// An override replaces the endpoint only when given, so the SDK's own
	// AWS_ENDPOINT_URL and AWS_ENDPOINT_URL_<SERVICE> settings still apply otherwise.
	endpoint := func(service string, base **string) {
		if url := endpoints[service]; url != "" {
			*base = aws.String(url)
		}
	}
	if ar := m.AssumeRole; ar != nil && ar.RoleARN.ValueString() != "" {
		stsClient := sts.NewFromConfig(cfg, func(o *sts.Options) { endpoint("sts", &o.BaseEndpoint) })
		cfg.Credentials = aws.NewCredentialsCache(stscreds.NewAssumeRoleProvider(stsClient, ar.RoleARN.ValueString(), func(o *stscreds.AssumeRoleOptions) {
			if n := ar.SessionName.ValueString(); n != "" {
				o.RoleSessionName = n
			}
			if id := ar.ExternalID.ValueString(); id != "" {
				o.ExternalID = aws.String(id)
			}
		}))
	}
	return &AWSClients{
		EC2:         ec2.NewFromConfig(cfg, func(o *ec2.Options) { endpoint("ec2", &o.BaseEndpoint) }),
		EKS:         eks.NewFromConfig(cfg, func(o *eks.Options) { endpoint("eks", &o.BaseEndpoint) }),
		IAM:         iam.NewFromConfig(cfg, func(o *iam.Options) { endpoint("iam", &o.BaseEndpoint) }),
		SQS:         sqs.NewFromConfig(cfg, func(o *sqs.Options) { endpoint("sqs", &o.BaseEndpoint) }),
		EventBridge: eventbridge.NewFromConfig(cfg, func(o *eventbridge.Options) { endpoint("events", &o.BaseEndpoint) }),
		Region:      region,
		DefaultTags: defaultTagValues(m.DefaultTags),
	}, nil
}

func stringValues(in []types.String) []string {
	out := make([]string, 0, len(in))
	for _, s := range in {
		out = append(out, s.ValueString())
	}
	return out
}

func (p *dovetailProvider) Resources(context.Context) []func() resource.Resource {
	return []func() resource.Resource{NewDiscoveryTagsResource, NewInterruptionQueueResource, NewNodeRoleResource, NewControllerRoleResource, NewVPCEndpointsResource,
		NewNodeAccessEntryResource, NewPodIdentityAssociationResource, NewSpotServiceLinkedRoleResource,
		NewNodePoolResource, NewEC2NodeClassResource, NewNodeOverlayResource, NewCapacityBufferResource, NewCommitmentResource, NewControllerResource}
}

func (p *dovetailProvider) DataSources(context.Context) []func() datasource.DataSource {
	return []func() datasource.DataSource{NewControllerPolicyDataSource, NewInstanceTypesDataSource}
}

func defaultTagValues(m *defaultTagsModel) map[string]string {
	if m == nil {
		return nil
	}
	return mapStrings(m.Tags)
}
