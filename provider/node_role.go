package provider

import (
	"context"
	"fmt"
	"net/url"
	"regexp"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	iamtypes "github.com/aws/aws-sdk-go-v2/service/iam/types"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/booldefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/boolplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/setdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"k8s.io/apimachinery/pkg/util/sets"
)

// NodeRolePolicies are the AWS managed policies an EKS node needs.
var NodeRolePolicies = []string{
	"AmazonEKSWorkerNodePolicy",
	"AmazonEKS_CNI_Policy",
	"AmazonEC2ContainerRegistryReadOnly",
	"AmazonSSMManagedInstanceCore",
}

const ec2TrustPolicy = `{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"Service":"ec2.amazonaws.com"},"Action":"sts:AssumeRole"}]}`

// NewNodeRoleResource is dovetail_node_role.
func NewNodeRoleResource() resource.Resource { return &nodeRole{} }

type nodeRole struct{ withClients }

type nodeRoleModel struct {
	ID                    types.String `tfsdk:"id"`
	Name                  types.String `tfsdk:"name"`
	Path                  types.String `tfsdk:"path"`
	CreateInstanceProfile types.Bool   `tfsdk:"create_instance_profile"`
	ARN                   types.String `tfsdk:"arn"`
	InstanceProfileName   types.String `tfsdk:"instance_profile_name"`
	PolicyARNs            types.Set    `tfsdk:"policy_arns"`
	PermissionsBoundary   types.String `tfsdk:"permissions_boundary"`
	Tags                  types.Map    `tfsdk:"tags"`
	TagsAll               types.Map    `tfsdk:"tags_all"`
}

// defaultPolicyARNs are NodeRolePolicies as ARNs in the aws partition.
func defaultPolicyARNs() types.Set {
	var values []attr.Value
	for _, p := range NodeRolePolicies {
		values = append(values, types.StringValue(policyARN("aws", p)))
	}
	return types.SetValueMust(types.StringType, values)
}

func (r *nodeRole) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_node_role"
}

func (r *nodeRole) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	keep := []planmodifier.String{stringplanmodifier.UseStateForUnknown()}
	resp.Schema = schema.Schema{
		Description: "The IAM role nodes run with (EC2NodeClass spec.role): trusted by EC2, with AmazonEKSWorkerNodePolicy, AmazonEKS_CNI_Policy, AmazonEC2ContainerRegistryReadOnly and AmazonSSMManagedInstanceCore, and optionally an instance profile of the same name for classes that name one (spec.instanceProfile). " +
			"A role of the name that this resource did not create fails the create, with how to import it; the role is tagged " + CreationTokenTag + " so that a create the SDK retried after a lost response keeps the role its first attempt made.",
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{Computed: true, PlanModifiers: keep, Description: "The role name."},
			"name": schema.StringAttribute{Required: true, Description: "Role name.",
				Validators:    []validator.String{stringvalidator.RegexMatches(regexp.MustCompile(`^[\w+=,.@-]{1,64}$`), "must be 1-64 characters of letters, digits and +=,.@_-")},
				PlanModifiers: []planmodifier.String{stringplanmodifier.RequiresReplace()}},
			"path": schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString("/"), Description: "IAM path; / by default.",
				Validators:    []validator.String{stringvalidator.RegexMatches(regexp.MustCompile(`^/([\x21-\x7e]*/)?$`), "must begin and end with /")},
				PlanModifiers: []planmodifier.String{stringplanmodifier.RequiresReplace(), stringplanmodifier.UseStateForUnknown()}},
			"create_instance_profile": schema.BoolAttribute{Optional: true, Computed: true, Default: booldefault.StaticBool(false), Description: "Also create an instance profile holding the role. It is tagged " + CreationTokenTag + " (creating it needs iam:TagInstanceProfile) so that a create the SDK retried after a lost response keeps the profile its first attempt made.",
				PlanModifiers: []planmodifier.Bool{boolplanmodifier.RequiresReplace(), boolplanmodifier.UseStateForUnknown()}},
			"policy_arns": schema.SetAttribute{Optional: true, Computed: true, ElementType: types.StringType, Default: setdefault.StaticValue(defaultPolicyARNs()),
				Description: "Managed policies attached to the role; the four EKS node policies by default. A policy detached outside Terraform shows in the next plan."},
			"arn":                   schema.StringAttribute{Computed: true, Description: "ARN of the role.", PlanModifiers: keep},
			"instance_profile_name": schema.StringAttribute{Computed: true, Description: "The instance profile of the role, when one is made (an EC2NodeClass may name it in spec.instanceProfile).", PlanModifiers: keep},
			"permissions_boundary":  roleBoundaryAttribute(),
			"tags":                  roleTagsAttribute(),
			"tags_all":              tagsAllAttribute(),
		},
	}
}

func (r *nodeRole) ModifyPlan(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	requireAWS(r.clients, "dovetail_node_role", &resp.Diagnostics)
	planTagsAll(ctx, r.clients, req, resp)
}

func policyARN(partition, name string) string {
	return fmt.Sprintf("arn:%s:iam::aws:policy/%s", partition, name)
}

func (r *nodeRole) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var plan nodeRoleModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if resp.Diagnostics.HasError() {
		return
	}
	api := r.clients.AWS.IAM
	in := iam.CreateRoleInput{RoleName: aws.String(plan.Name.ValueString()), Path: aws.String(plan.Path.ValueString()),
		AssumeRolePolicyDocument: aws.String(ec2TrustPolicy), Description: aws.String("Dovetail node role"),
		Tags: append(iamTags(roleTags(ctx, plan.TagsAll, &resp.Diagnostics)), iamtypes.Tag{Key: aws.String("dovetail.sh/managed-by"), Value: aws.String("terraform")})}
	if b := plan.PermissionsBoundary.ValueString(); b != "" {
		in.PermissionsBoundary = aws.String(b)
	}
	role, err := createRole(ctx, api, in, "dovetail_node_role")
	if err != nil {
		addCreateRoleError(&resp.Diagnostics, "Cannot create the node role", err)
		return
	}
	plan.ID, plan.ARN = plan.Name, types.StringValue(aws.ToString(role.Arn))
	plan.InstanceProfileName = types.StringValue("")
	// The role exists from here on: record it, so a failure below is not a leak.
	resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
	if err := attachRolePolicies(ctx, r.clients.AWS.IAM, plan.Name.ValueString(), setStrings(ctx, plan.PolicyARNs), nil); err != nil {
		resp.Diagnostics.AddError("Cannot attach a managed policy to the node role", err.Error())
		return
	}
	if plan.CreateInstanceProfile.ValueBool() {
		if err := createInstanceProfile(ctx, api, plan.Name.ValueString(), plan.Path.ValueString(), roleTags(ctx, plan.TagsAll, &resp.Diagnostics)); err != nil {
			resp.Diagnostics.AddError("Cannot create the instance profile", err.Error())
			return
		}
		plan.InstanceProfileName = plan.Name
		resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
		if err := addRoleToInstanceProfile(ctx, api, plan.Name.ValueString(), plan.Name.ValueString()); err != nil {
			resp.Diagnostics.AddError("Cannot add the role to its instance profile", err.Error())
			return
		}
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
}

// attach attaches want and detaches drop.
func setStrings(ctx context.Context, s types.Set) []string {
	var out []string
	s.ElementsAs(ctx, &out, false)
	return out
}

// Read reports the role, its attached policies and whether its instance profile is
// there, so changes made outside Terraform show in the next plan.
func (r *nodeRole) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var state nodeRoleModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() || r.clients == nil || r.clients.AWS == nil {
		return
	}
	api := r.clients.AWS.IAM
	out, err := api.GetRole(ctx, &iam.GetRoleInput{RoleName: aws.String(state.Name.ValueString())})
	if isCode(err, "NoSuchEntity") {
		resp.State.RemoveResource(ctx)
		return
	}
	if err != nil {
		resp.Diagnostics.AddError("Cannot read the node role", err.Error())
		return
	}
	state.ID, state.ARN, state.Path = state.Name, types.StringValue(aws.ToString(out.Role.Arn)), types.StringValue(aws.ToString(out.Role.Path))
	readRoleSettings(ctx, r.clients, out.Role, &state.Tags, &state.TagsAll, &state.PermissionsBoundary, &resp.Diagnostics)
	attached, err := attachedRolePolicies(ctx, api, state.Name.ValueString())
	if err != nil {
		resp.Diagnostics.AddError("Cannot read the node role's policies", err.Error())
		return
	}
	state.PolicyARNs, _ = types.SetValueFrom(ctx, types.StringType, attached)
	profiles, err := api.ListInstanceProfilesForRole(ctx, &iam.ListInstanceProfilesForRoleInput{RoleName: aws.String(state.Name.ValueString())})
	if err != nil {
		resp.Diagnostics.AddError("Cannot read the node role's instance profiles", err.Error())
		return
	}
	hasProfile := false
	for _, p := range profiles.InstanceProfiles {
		hasProfile = hasProfile || aws.ToString(p.InstanceProfileName) == state.Name.ValueString()
	}
	state.CreateInstanceProfile = types.BoolValue(hasProfile)
	state.InstanceProfileName = types.StringValue("")
	if hasProfile {
		state.InstanceProfileName = state.Name
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &state)...)
}

// Update attaches and detaches policies and changes tags and the permissions
// boundary; every other attribute replaces the role.
func (r *nodeRole) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	var plan, state nodeRoleModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	if err := updateRoleSettings(ctx, r.clients.AWS.IAM, plan.Name.ValueString(), roleTags(ctx, state.TagsAll, &resp.Diagnostics), roleTags(ctx, plan.TagsAll, &resp.Diagnostics),
		state.PermissionsBoundary.ValueString(), plan.PermissionsBoundary.ValueString()); err != nil {
		resp.Diagnostics.AddError("Cannot update the node role", err.Error())
		return
	}
	if state.CreateInstanceProfile.ValueBool() {
		if err := updateProfileTags(ctx, r.clients.AWS.IAM, plan.Name.ValueString(), roleTags(ctx, state.TagsAll, &resp.Diagnostics), roleTags(ctx, plan.TagsAll, &resp.Diagnostics)); err != nil {
			resp.Diagnostics.AddError("Cannot update the node role's instance profile", err.Error())
			return
		}
	}
	want, have := sets.New(setStrings(ctx, plan.PolicyARNs)...), sets.New(setStrings(ctx, state.PolicyARNs)...)
	if err := attachRolePolicies(ctx, r.clients.AWS.IAM, plan.Name.ValueString(), sets.List(want.Difference(have)), sets.List(have.Difference(want))); err != nil {
		resp.Diagnostics.AddError("Cannot update the node role's policies", err.Error())
		return
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
}

func (r *nodeRole) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var state nodeRoleModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	api := r.clients.AWS.IAM
	name := aws.String(state.Name.ValueString())
	profiles, err := api.ListInstanceProfilesForRole(ctx, &iam.ListInstanceProfilesForRoleInput{RoleName: name})
	if isCode(err, "NoSuchEntity") {
		return
	}
	if err != nil {
		resp.Diagnostics.AddError("Cannot list the node role's instance profiles", err.Error())
		return
	}
	for _, p := range profiles.InstanceProfiles {
		if _, err := api.RemoveRoleFromInstanceProfile(ctx, &iam.RemoveRoleFromInstanceProfileInput{InstanceProfileName: p.InstanceProfileName, RoleName: name}); err != nil {
			resp.Diagnostics.AddError("Cannot remove the role from an instance profile", err.Error())
			return
		}
		if aws.ToString(p.InstanceProfileName) == state.Name.ValueString() {
			if _, err := api.DeleteInstanceProfile(ctx, &iam.DeleteInstanceProfileInput{InstanceProfileName: p.InstanceProfileName}); err != nil && !isCode(err, "NoSuchEntity") {
				resp.Diagnostics.AddError("Cannot delete the instance profile", err.Error())
				return
			}
		}
	}
	if err := detachAllRolePolicies(ctx, api, state.Name.ValueString()); err != nil {
		resp.Diagnostics.AddError("Cannot detach the node role's policies", err.Error())
		return
	}
	if _, err := api.DeleteRole(ctx, &iam.DeleteRoleInput{RoleName: name}); err != nil && !isCode(err, "NoSuchEntity") {
		resp.Diagnostics.AddError("Cannot delete the node role", err.Error())
	}
}

func (r *nodeRole) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	name, err := url.PathUnescape(req.ID)
	if err != nil {
		resp.Diagnostics.AddError("Bad import ID", "import a node role by its name")
		return
	}
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("name"), name)...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("id"), name)...)
}
