package provider

import (
	"context"
	"fmt"
	"regexp"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

// NewNodeAccessEntryResource is dovetail_node_access_entry: the EKS access entry that
// lets instances with the node role join the cluster, as terraform-aws-eks's karpenter
// module makes for its node role. Without it (or an aws-auth mapping) nodes launch and
// never register.
func NewNodeAccessEntryResource() resource.Resource { return &nodeAccessEntry{} }

type nodeAccessEntry struct{ withClients }

type nodeAccessEntryModel struct {
	ID             types.String `tfsdk:"id"`
	ClusterName    types.String `tfsdk:"cluster_name"`
	PrincipalARN   types.String `tfsdk:"principal_arn"`
	Type           types.String `tfsdk:"type"`
	AccessEntryARN types.String `tfsdk:"access_entry_arn"`
	Tags           types.Map    `tfsdk:"tags"`
	TagsAll        types.Map    `tfsdk:"tags_all"`
}

func (r *nodeAccessEntry) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_node_access_entry"
}

var roleARNValidator = stringvalidator.RegexMatches(regexp.MustCompile(`^arn:aws[a-z-]*:iam::[0-9]{12}:role/.+`), "must be an IAM role ARN, such as arn:aws:iam::123456789012:role/DovetailNode-demo")

func (r *nodeAccessEntry) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	replace := []planmodifier.String{stringplanmodifier.RequiresReplace()}
	resp.Schema = schema.Schema{
		Description: "The EKS access entry that lets instances with the node role join the cluster (type EC2_LINUX or EC2_WINDOWS: EKS maps them to system:node:{{EC2PrivateDNSName}} in system:nodes), " +
			"as terraform-aws-eks's karpenter module makes. The cluster's authentication mode must be API or API_AND_CONFIG_MAP; with CONFIG_MAP, map the role in aws-auth instead. Import with cluster_name:principal_arn.",
		Attributes: map[string]schema.Attribute{
			"id":            schema.StringAttribute{Computed: true, Description: "cluster_name:principal_arn.", PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()}},
			"cluster_name":  schema.StringAttribute{Required: true, Validators: []validator.String{clusterNameValidator}, PlanModifiers: replace, Description: "The EKS cluster; a change replaces the entry."},
			"principal_arn": schema.StringAttribute{Required: true, Validators: []validator.String{roleARNValidator}, PlanModifiers: replace, Description: "ARN of the node role (dovetail_node_role.arn); a change replaces the entry."},
			"type": schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString("EC2_LINUX"), PlanModifiers: replace,
				Validators:  []validator.String{stringvalidator.OneOf("EC2_LINUX", "EC2_WINDOWS")},
				Description: "EC2_LINUX, or EC2_WINDOWS for a role Windows nodes use; a change replaces the entry."},
			"access_entry_arn": schema.StringAttribute{Computed: true, Description: "ARN of the access entry.", PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()}},
			"tags":             eksTagsAttribute(),
			"tags_all":         tagsAllAttribute(),
		},
	}
}

func (r *nodeAccessEntry) ModifyPlan(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	requireAWS(r.clients, "dovetail_node_access_entry", &resp.Diagnostics)
	planTagsAll(ctx, r.clients, req, resp)
}

// explainAccessEntryError adds what to do to the errors a user can fix.
func explainAccessEntryError(err error, cluster string) string {
	switch {
	case isCode(err, "ResourceInUseException"):
		return err.Error() + "\n\nThe cluster already has an access entry for this role (made by eksctl, the console or another state). Import it: terraform import <address> " + cluster + ":<principal_arn>, or set create_access_entry = false in the module."
	case isCode(err, "InvalidRequestException") && strings.Contains(err.Error(), "authentication mode"):
		return err.Error() + "\n\nSet the cluster's access_config { authentication_mode = \"API_AND_CONFIG_MAP\" } (aws_eks_cluster), or keep CONFIG_MAP, map the node role in the aws-auth ConfigMap and set create_access_entry = false."
	case isCode(err, "ResourceNotFoundException"):
		return err.Error() + "\n\nCheck cluster_name and the provider's region: EKS has no cluster " + cluster + " there."
	}
	return err.Error()
}

func (r *nodeAccessEntry) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var plan nodeAccessEntryModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if resp.Diagnostics.HasError() {
		return
	}
	cluster := plan.ClusterName.ValueString()
	out, err := r.clients.AWS.EKS.CreateAccessEntry(ctx, &eks.CreateAccessEntryInput{ClusterName: aws.String(cluster), PrincipalArn: aws.String(plan.PrincipalARN.ValueString()),
		Type: aws.String(plan.Type.ValueString()), Tags: mapStrings(plan.TagsAll)})
	if err != nil {
		resp.Diagnostics.AddError("Cannot create the node access entry", explainAccessEntryError(err, cluster))
		return
	}
	plan.ID = types.StringValue(cluster + ":" + plan.PrincipalARN.ValueString())
	plan.AccessEntryARN = types.StringValue(aws.ToString(out.AccessEntry.AccessEntryArn))
	resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
}

func (r *nodeAccessEntry) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var state nodeAccessEntryModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	out, err := r.clients.AWS.EKS.DescribeAccessEntry(ctx, &eks.DescribeAccessEntryInput{ClusterName: aws.String(state.ClusterName.ValueString()), PrincipalArn: aws.String(state.PrincipalARN.ValueString())})
	if isNotFound(err) {
		resp.State.RemoveResource(ctx)
		return
	}
	if err != nil {
		resp.Diagnostics.AddError("Cannot read the node access entry", err.Error())
		return
	}
	e := out.AccessEntry
	state.ID = types.StringValue(state.ClusterName.ValueString() + ":" + aws.ToString(e.PrincipalArn))
	state.Type, state.AccessEntryARN = types.StringValue(aws.ToString(e.Type)), types.StringValue(aws.ToString(e.AccessEntryArn))
	readTags(ctx, r.clients, e.Tags, &state.Tags, &state.TagsAll, &resp.Diagnostics)
	resp.Diagnostics.Append(resp.State.Set(ctx, &state)...)
}

// Update changes tags; everything else replaces the entry.
func (r *nodeAccessEntry) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	var plan, state nodeAccessEntryModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	if err := syncEKSTags(ctx, r.clients.AWS.EKS, state.AccessEntryARN.ValueString(), mapStrings(state.TagsAll), mapStrings(plan.TagsAll)); err != nil {
		resp.Diagnostics.AddError("Cannot tag the node access entry", err.Error())
		return
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
}

func (r *nodeAccessEntry) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var state nodeAccessEntryModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	_, err := r.clients.AWS.EKS.DeleteAccessEntry(ctx, &eks.DeleteAccessEntryInput{ClusterName: aws.String(state.ClusterName.ValueString()), PrincipalArn: aws.String(state.PrincipalARN.ValueString())})
	if err != nil && !isNotFound(err) {
		resp.Diagnostics.AddError("Cannot delete the node access entry", err.Error())
	}
}

func (r *nodeAccessEntry) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	cluster, principal, ok := strings.Cut(req.ID, ":")
	if !ok || cluster == "" || !strings.HasPrefix(principal, "arn:") {
		resp.Diagnostics.AddError("Invalid import ID", fmt.Sprintf("%q: use cluster_name:principal_arn, such as demo:arn:aws:iam::123456789012:role/DovetailNode-demo", req.ID))
		return
	}
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("id"), req.ID)...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("cluster_name"), cluster)...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("principal_arn"), principal)...)
}
