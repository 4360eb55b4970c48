package provider

import (
	"context"
	"regexp"

	"github.com/hashicorp/terraform-plugin-framework-validators/listvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

// NewControllerPolicyDataSource is dovetail_controller_policy.
func NewControllerPolicyDataSource() datasource.DataSource { return &controllerPolicy{} }

type controllerPolicy struct{}

type controllerPolicyModel struct {
	ClusterName          types.String `tfsdk:"cluster_name"`
	Region               types.String `tfsdk:"region"`
	AccountID            types.String `tfsdk:"account_id"`
	Partition            types.String `tfsdk:"partition"`
	NodeRoleARN          types.String `tfsdk:"node_role_arn"`
	InterruptionQueueARN types.String `tfsdk:"interruption_queue_arn"`
	InterruptionQueueKMS types.String `tfsdk:"interruption_queue_kms_key"`
	AMISSMParameterARNs  types.List   `tfsdk:"ami_id_ssm_parameter_arns"`
	JSON                 types.String `tfsdk:"json"`
}

func (d *controllerPolicy) Metadata(_ context.Context, req datasource.MetadataRequest, resp *datasource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_controller_policy"
}

func (d *controllerPolicy) Schema(_ context.Context, _ datasource.SchemaRequest, resp *datasource.SchemaResponse) {
	arn := stringvalidator.RegexMatches(regexp.MustCompile(`^arn:aws[a-z-]*:`), "must be an ARN, e.g. arn:aws:iam::123456789012:role/KarpenterNodeRole-demo")
	resp.Schema = schema.Schema{
		Description: "The controller's least-privilege IAM policy as JSON, for those who manage IAM outside this provider. It is the policy dovetail_controller_role attaches.",
		Attributes: map[string]schema.Attribute{
			"cluster_name":           schema.StringAttribute{Required: true, Description: "The cluster whose tags scope every write."},
			"region":                 schema.StringAttribute{Required: true, Description: "The region read actions are limited to."},
			"account_id":             schema.StringAttribute{Optional: true, Description: "The account of instance profiles and the cluster; any account when unset.", Validators: []validator.String{stringvalidator.RegexMatches(regexp.MustCompile(`^[0-9]{12}$`), "must be a 12-digit account ID")}},
			"partition":              schema.StringAttribute{Optional: true, Description: "aws (default), aws-cn or aws-us-gov."},
			"node_role_arn":          schema.StringAttribute{Required: true, Description: "The only role the controller may pass to EC2.", Validators: []validator.String{arn}},
			"interruption_queue_arn": schema.StringAttribute{Optional: true, Description: "The interruption queue the controller reads, if any.", Validators: []validator.String{arn}},
			"interruption_queue_kms_key": schema.StringAttribute{Optional: true, Description: queueKMSKeyDescription,
				Validators: []validator.String{stringvalidator.LengthAtLeast(1)}},
			"ami_id_ssm_parameter_arns": schema.ListAttribute{Optional: true, ElementType: types.StringType, Description: amiSSMParametersDescription,
				Validators: []validator.List{listvalidator.ValueStringsAre(ssmParameterARN)}},
			"json": schema.StringAttribute{Computed: true, Description: "The policy document."},
		},
	}
}

func (d *controllerPolicy) Read(ctx context.Context, req datasource.ReadRequest, resp *datasource.ReadResponse) {
	var m controllerPolicyModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	doc, err := ControllerPolicy(ControllerPolicyInput{
		Partition: m.Partition.ValueString(), Region: m.Region.ValueString(), AccountID: m.AccountID.ValueString(),
		ClusterName: m.ClusterName.ValueString(), NodeRoleARN: m.NodeRoleARN.ValueString(), InterruptionQueueARN: m.InterruptionQueueARN.ValueString(),
		InterruptionQueueKMSKey: m.InterruptionQueueKMS.ValueString(), AMISSMParameterARNs: stringList(m.AMISSMParameterARNs),
	})
	if err != nil {
		resp.Diagnostics.AddError("Cannot render the controller policy", err.Error())
		return
	}
	m.JSON = types.StringValue(doc)
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

const queueKMSKeyDescription = "The customer managed KMS key of the interruption queue (its kms_master_key_id: a key ARN, key ID, alias name or alias ARN); grants kms:Decrypt on that key through SQS only. Keys named by ID or alias need account_id for a scoped ARN."

const amiSSMParametersDescription = "SSM parameter ARNs the controller may read besides AWS's public /aws/service/* ones, for amiSelectorTerms that name an ssmParameter (wildcards allowed, e.g. arn:aws:ssm:us-west-2:123456789012:parameter/golden-ami/*)."

var ssmParameterARN = stringvalidator.RegexMatches(regexp.MustCompile(`^arn:aws[a-z-]*:ssm:[a-z0-9-*]*:[0-9*]*:parameter/.+$`),
	"must be an SSM parameter ARN, e.g. arn:aws:ssm:us-west-2:123456789012:parameter/golden-ami/*")

// stringList reads a known list of strings; null and unknown read as none.
func stringList(l types.List) []string {
	var out []string
	for _, v := range l.Elements() {
		if s, ok := v.(types.String); ok && !s.IsNull() && !s.IsUnknown() {
			out = append(out, s.ValueString())
		}
	}
	return out
}
