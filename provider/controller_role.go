package provider

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"regexp"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/hashicorp/terraform-plugin-framework-validators/listvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/setvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"k8s.io/apimachinery/pkg/util/sets"
)

const controllerPolicyName = "DovetailController"

// NewControllerRoleResource is dovetail_controller_role.
func NewControllerRoleResource() resource.Resource { return &controllerRole{} }

type controllerRole struct{ withClients }

type controllerRoleModel struct {
	ID                   types.String `tfsdk:"id"`
	Name                 types.String `tfsdk:"name"`
	ClusterName          types.String `tfsdk:"cluster_name"`
	Region               types.String `tfsdk:"region"`
	AccountID            types.String `tfsdk:"account_id"`
	NodeRoleARN          types.String `tfsdk:"node_role_arn"`
	InterruptionQueueARN types.String `tfsdk:"interruption_queue_arn"`
	InterruptionQueueKMS types.String `tfsdk:"interruption_queue_kms_key"`
	AMISSMParameterARNs  types.List   `tfsdk:"ami_id_ssm_parameter_arns"`
	OIDCProviderARN      types.String `tfsdk:"oidc_provider_arn"`
	Namespace            types.String `tfsdk:"namespace"`
	ServiceAccount       types.String `tfsdk:"service_account"`
	ARN                  types.String `tfsdk:"arn"`
	PolicyJSON           types.String `tfsdk:"policy_json"`
	Path                 types.String `tfsdk:"path"`
	PermissionsBoundary  types.String `tfsdk:"permissions_boundary"`
	Tags                 types.Map    `tfsdk:"tags"`
	TagsAll              types.Map    `tfsdk:"tags_all"`
	PolicyARNs           types.Set    `tfsdk:"policy_arns"`
}

func (r *controllerRole) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_controller_role"
}

func (r *controllerRole) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	arn := stringvalidator.RegexMatches(regexp.MustCompile(`^arn:aws[a-z-]*:`), "must be an ARN")
	replace := []planmodifier.String{stringplanmodifier.RequiresReplace()}
	resp.Schema = schema.Schema{
		Description: "The controller's IAM role: trusted by the cluster's OIDC provider for one service account (IRSA) when oidc_provider_arn is set, else by EKS Pod Identity (pods.eks.amazonaws.com), with the policy dovetail_controller_policy renders as its inline policy. A policy edited outside Terraform shows in the next plan and is put back. " +
			"A role of the name that this resource did not create fails the create, with how to import it; the role is tagged " + CreationTokenTag + " (creating it needs iam:TagRole) so that a create the SDK retried after a lost response keeps the role its first attempt made.",
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{Computed: true, Description: "The role's name.", PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()}},
			"name": schema.StringAttribute{Required: true, PlanModifiers: replace, Description: "Name of the IAM role; a change replaces it.",
				Validators: []validator.String{stringvalidator.RegexMatches(regexp.MustCompile(`^[\w+=,.@-]{1,64}$`), "must be 1-64 characters of letters, digits and +=,.@_-")}},
			"cluster_name":           schema.StringAttribute{Required: true, Description: "The EKS cluster's name: the policy scopes launches and deletions to its tags."},
			"region":                 schema.StringAttribute{Required: true, Description: "The cluster's region: the policy's read actions are limited to it."},
			"account_id":             schema.StringAttribute{Optional: true, Description: "The account's ID, written into the policy's ARNs; unset, they match any account (*).", Validators: []validator.String{stringvalidator.RegexMatches(regexp.MustCompile(`^[0-9]{12}$`), "must be a 12-digit account ID")}},
			"node_role_arn":          schema.StringAttribute{Required: true, Description: "The node role (dovetail_node_role): the only role the controller may pass to instances.", Validators: []validator.String{arn}},
			"interruption_queue_arn": schema.StringAttribute{Optional: true, Description: "The interruption queue (dovetail_interruption_queue) the controller reads; unset, no SQS permission.", Validators: []validator.String{arn}},
			"interruption_queue_kms_key": schema.StringAttribute{Optional: true, Description: queueKMSKeyDescription,
				Validators: []validator.String{stringvalidator.LengthAtLeast(1)}},
			"ami_id_ssm_parameter_arns": schema.ListAttribute{Optional: true, ElementType: types.StringType, Description: amiSSMParametersDescription,
				Validators: []validator.List{listvalidator.ValueStringsAre(ssmParameterARN)}},
			"oidc_provider_arn": schema.StringAttribute{Optional: true, Validators: []validator.String{arn},
				Description: "The cluster's IAM OIDC provider, for IRSA; unset means EKS Pod Identity. A change updates the role's trust policy in place."},
			"namespace": schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString("dovetail"),
				Description: "Namespace of the controller's service account, which an IRSA trust names; a change updates the trust policy in place."},
			"service_account": schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString("dovetail"),
				Description: "The controller's service account, which an IRSA trust names; a change updates the trust policy in place."},
			"arn":         schema.StringAttribute{Computed: true, Description: "ARN of the role.", PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()}},
			"policy_json": schema.StringAttribute{Computed: true, Description: "The inline policy as attached."},
			"path": schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString("/"), PlanModifiers: replace,
				Description: "IAM path of the role; IAM cannot move a role, so a change replaces it.",
				Validators:  []validator.String{stringvalidator.RegexMatches(regexp.MustCompile(`^/([\x21-\x7E]{0,510}/)?$`), "must begin and end with /, such as /dovetail/")}},
			"permissions_boundary": roleBoundaryAttribute(),
			"tags":                 roleTagsAttribute(),
			"tags_all":             tagsAllAttribute(),
			"policy_arns": schema.SetAttribute{Optional: true, ElementType: types.StringType,
				Description: "Further managed policies attached to the role, beside the controller policy (terraform-aws-eks's iam_role_policies); changed in place. Attachments made outside Terraform show in the next plan.",
				Validators:  []validator.Set{setvalidator.ValueStringsAre(stringvalidator.RegexMatches(regexp.MustCompile(`^arn:aws[a-z-]*:iam::(aws|[0-9]{12}):policy/.+`), "must be an IAM policy ARN"))}},
		},
	}
}

// ModifyPlan plans the policy document, so a document changed outside Terraform
// (read back in Read) differs from the plan and is put back.
func (r *controllerRole) ModifyPlan(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	requireAWS(r.clients, "dovetail_controller_role", &resp.Diagnostics)
	planTagsAll(ctx, r.clients, req, resp)
	if req.Plan.Raw.IsNull() {
		return
	}
	var plan controllerRoleModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if resp.Diagnostics.HasError() {
		return
	}
	for _, v := range []types.String{plan.ClusterName, plan.Region, plan.AccountID, plan.NodeRoleARN, plan.InterruptionQueueARN, plan.InterruptionQueueKMS} {
		if v.IsUnknown() {
			return
		}
	}
	if plan.AMISSMParameterARNs.IsUnknown() {
		return
	}
	doc, err := r.policy(&plan)
	if err != nil {
		resp.Diagnostics.AddError("Cannot render the controller policy", err.Error())
		return
	}
	resp.Diagnostics.Append(resp.Plan.SetAttribute(ctx, path.Root("policy_json"), doc)...)
}

func (r *controllerRole) policy(m *controllerRoleModel) (string, error) {
	doc, err := ControllerPolicy(ControllerPolicyInput{Region: m.Region.ValueString(), AccountID: m.AccountID.ValueString(),
		ClusterName: m.ClusterName.ValueString(), NodeRoleARN: m.NodeRoleARN.ValueString(), InterruptionQueueARN: m.InterruptionQueueARN.ValueString(),
		InterruptionQueueKMSKey: m.InterruptionQueueKMS.ValueString(), AMISSMParameterARNs: stringList(m.AMISSMParameterARNs)})
	if err != nil {
		return "", err
	}
	return normalizeJSON(doc)
}

// normalizeJSON gives equal documents equal text (IAM returns them re-encoded).
func normalizeJSON(doc string) (string, error) {
	var v any
	if err := json.Unmarshal([]byte(doc), &v); err != nil {
		return "", err
	}
	b, err := json.Marshal(v)
	return string(b), err
}

func (r *controllerRole) trustPolicy(m *controllerRoleModel) string {
	var statement map[string]any
	if oidc := m.OIDCProviderARN.ValueString(); oidc != "" {
		issuer := oidc[strings.Index(oidc, "oidc-provider/")+len("oidc-provider/"):]
		statement = map[string]any{"Effect": "Allow", "Action": "sts:AssumeRoleWithWebIdentity", "Principal": map[string]any{"Federated": oidc},
			"Condition": map[string]any{"StringEquals": map[string]string{
				issuer + ":aud": "sts.amazonaws.com",
				issuer + ":sub": fmt.Sprintf("system:serviceaccount:%s:%s", m.Namespace.ValueString(), m.ServiceAccount.ValueString()),
			}}}
	} else {
		statement = map[string]any{"Effect": "Allow", "Action": []string{"sts:AssumeRole", "sts:TagSession"}, "Principal": map[string]any{"Service": "pods.eks.amazonaws.com"}}
	}
	b, _ := json.Marshal(map[string]any{"Version": "2012-10-17", "Statement": []any{statement}})
	return string(b)
}

func (r *controllerRole) putPolicy(ctx context.Context, m *controllerRoleModel) error {
	doc, err := r.policy(m)
	if err != nil {
		return err
	}
	if _, err := r.clients.AWS.IAM.PutRolePolicy(ctx, &iam.PutRolePolicyInput{RoleName: aws.String(m.Name.ValueString()), PolicyName: aws.String(controllerPolicyName), PolicyDocument: aws.String(doc)}); err != nil {
		return fmt.Errorf("attaching the controller policy, %w", err)
	}
	m.PolicyJSON = types.StringValue(doc)
	return nil
}

func (r *controllerRole) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var plan controllerRoleModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if resp.Diagnostics.HasError() {
		return
	}
	in := iam.CreateRoleInput{RoleName: aws.String(plan.Name.ValueString()), Path: aws.String(plan.Path.ValueString()),
		AssumeRolePolicyDocument: aws.String(r.trustPolicy(&plan)), Description: aws.String("Dovetail controller"),
		Tags: iamTags(roleTags(ctx, plan.TagsAll, &resp.Diagnostics))}
	if b := plan.PermissionsBoundary.ValueString(); b != "" {
		in.PermissionsBoundary = aws.String(b)
	}
	role, err := createRole(ctx, r.clients.AWS.IAM, in, "dovetail_controller_role")
	if err != nil {
		addCreateRoleError(&resp.Diagnostics, "Cannot create the controller role", err)
		return
	}
	plan.ID, plan.ARN = plan.Name, types.StringValue(aws.ToString(role.Arn))
	if err := r.putPolicy(ctx, &plan); err != nil {
		// The role exists: record it so it is not leaked.
		plan.PolicyJSON = types.StringValue("")
		resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
		resp.Diagnostics.AddError("Cannot attach the controller policy", err.Error())
		return
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
	if err := attachRolePolicies(ctx, r.clients.AWS.IAM, plan.Name.ValueString(), setStrings(ctx, plan.PolicyARNs), nil); err != nil {
		resp.Diagnostics.AddError("Cannot attach a managed policy to the controller role", err.Error())
	}
}

func (r *controllerRole) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var state controllerRoleModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() || r.clients == nil || r.clients.AWS == nil {
		return
	}
	api := r.clients.AWS.IAM
	role, err := api.GetRole(ctx, &iam.GetRoleInput{RoleName: aws.String(state.Name.ValueString())})
	if isCode(err, "NoSuchEntity") {
		resp.State.RemoveResource(ctx)
		return
	}
	if err != nil {
		resp.Diagnostics.AddError("Cannot read the controller role", err.Error())
		return
	}
	state.ID, state.ARN, state.Path = state.Name, types.StringValue(aws.ToString(role.Role.Arn)), types.StringValue(aws.ToString(role.Role.Path))
	readRoleSettings(ctx, r.clients, role.Role, &state.Tags, &state.TagsAll, &state.PermissionsBoundary, &resp.Diagnostics)
	readTrust(aws.ToString(role.Role.AssumeRolePolicyDocument), &state)
	attached, err := attachedRolePolicies(ctx, api, state.Name.ValueString())
	if err != nil {
		resp.Diagnostics.AddError("Cannot read the controller role's managed policies", err.Error())
		return
	}
	if len(attached) > 0 || !state.PolicyARNs.IsNull() {
		state.PolicyARNs, _ = types.SetValueFrom(ctx, types.StringType, attached)
	}
	state.PolicyJSON = types.StringValue("")
	got, err := api.GetRolePolicy(ctx, &iam.GetRolePolicyInput{RoleName: aws.String(state.Name.ValueString()), PolicyName: aws.String(controllerPolicyName)})
	switch {
	case isCode(err, "NoSuchEntity"):
	case err != nil:
		resp.Diagnostics.AddError("Cannot read the controller policy", err.Error())
		return
	default:
		doc, _ := url.QueryUnescape(aws.ToString(got.PolicyDocument))
		if normalized, err := normalizeJSON(doc); err == nil {
			state.PolicyJSON = types.StringValue(normalized)
		}
		readPolicyInputs(doc, &state)
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &state)...)
}

func (r *controllerRole) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	var plan, state controllerRoleModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	if err := updateRoleSettings(ctx, r.clients.AWS.IAM, plan.Name.ValueString(), roleTags(ctx, state.TagsAll, &resp.Diagnostics), roleTags(ctx, plan.TagsAll, &resp.Diagnostics),
		state.PermissionsBoundary.ValueString(), plan.PermissionsBoundary.ValueString()); err != nil {
		resp.Diagnostics.AddError("Cannot update the controller role", err.Error())
		return
	}
	if trust := r.trustPolicy(&plan); trust != r.trustPolicy(&state) {
		if _, err := r.clients.AWS.IAM.UpdateAssumeRolePolicy(ctx, &iam.UpdateAssumeRolePolicyInput{RoleName: aws.String(plan.Name.ValueString()), PolicyDocument: aws.String(trust)}); err != nil {
			resp.Diagnostics.AddError("Cannot update the controller role's trust policy", err.Error())
			return
		}
	}
	if err := r.putPolicy(ctx, &plan); err != nil {
		resp.Diagnostics.AddError("Cannot update the controller policy", err.Error())
		return
	}
	want, have := sets.New(setStrings(ctx, plan.PolicyARNs)...), sets.New(setStrings(ctx, state.PolicyARNs)...)
	if err := attachRolePolicies(ctx, r.clients.AWS.IAM, plan.Name.ValueString(), sets.List(want.Difference(have)), sets.List(have.Difference(want))); err != nil {
		resp.Diagnostics.AddError("Cannot update the controller role's managed policies", err.Error())
		return
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
}

func (r *controllerRole) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var state controllerRoleModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	api := r.clients.AWS.IAM
	name := aws.String(state.Name.ValueString())
	if _, err := api.DeleteRolePolicy(ctx, &iam.DeleteRolePolicyInput{RoleName: name, PolicyName: aws.String(controllerPolicyName)}); err != nil && !isCode(err, "NoSuchEntity") {
		resp.Diagnostics.AddError("Cannot remove the controller policy", err.Error())
		return
	}
	if err := detachAllRolePolicies(ctx, api, state.Name.ValueString()); err != nil {
		resp.Diagnostics.AddError("Cannot detach the controller role's managed policies", err.Error())
		return
	}
	if _, err := api.DeleteRole(ctx, &iam.DeleteRoleInput{RoleName: name}); err != nil && !isCode(err, "NoSuchEntity") {
		resp.Diagnostics.AddError("Cannot delete the controller role", err.Error())
	}
}

// ImportState takes the role name; Read recovers the rest from the role's trust and
// inline policies.
func (r *controllerRole) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	resource.ImportStatePassthroughID(ctx, path.Root("name"), req, resp)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("id"), req.ID)...)
}
