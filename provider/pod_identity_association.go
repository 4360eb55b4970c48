package provider

import (
	"context"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

// NewPodIdentityAssociationResource is dovetail_pod_identity_association: the EKS Pod
// Identity association that gives the controller's ServiceAccount its role, as
// terraform-aws-eks's karpenter module makes. Without it (or IRSA) the controller has
// no AWS credentials.
func NewPodIdentityAssociationResource() resource.Resource { return &podIdentityAssociation{} }

type podIdentityAssociation struct{ withClients }

type podIdentityAssociationModel struct {
	ID             types.String `tfsdk:"id"`
	ClusterName    types.String `tfsdk:"cluster_name"`
	Namespace      types.String `tfsdk:"namespace"`
	ServiceAccount types.String `tfsdk:"service_account"`
	RoleARN        types.String `tfsdk:"role_arn"`
	AssociationARN types.String `tfsdk:"association_arn"`
	Tags           types.Map    `tfsdk:"tags"`
	TagsAll        types.Map    `tfsdk:"tags_all"`
}

func (r *podIdentityAssociation) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_pod_identity_association"
}

func (r *podIdentityAssociation) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	replace := []planmodifier.String{stringplanmodifier.RequiresReplace()}
	keep := []planmodifier.String{stringplanmodifier.UseStateForUnknown()}
	resp.Schema = schema.Schema{
		Description: "The EKS Pod Identity association that gives the controller's ServiceAccount its role (dovetail_controller_role without oidc_provider_arn trusts pods.eks.amazonaws.com), as terraform-aws-eks's karpenter module makes. " +
			"The cluster needs the eks-pod-identity-agent add-on. Import with cluster_name,association_id.",
		Attributes: map[string]schema.Attribute{
			"id":              schema.StringAttribute{Computed: true, Description: "The association's ID (a-...).", PlanModifiers: keep},
			"cluster_name":    schema.StringAttribute{Required: true, Validators: []validator.String{clusterNameValidator}, PlanModifiers: replace, Description: "The EKS cluster; a change replaces the association."},
			"namespace":       schema.StringAttribute{Required: true, Validators: []validator.String{dnsName{}}, PlanModifiers: replace, Description: "The controller's namespace; a change replaces the association."},
			"service_account": schema.StringAttribute{Required: true, Validators: []validator.String{dnsName{}}, PlanModifiers: replace, Description: "The controller's ServiceAccount; a change replaces the association."},
			"role_arn":        schema.StringAttribute{Required: true, Validators: []validator.String{roleARNValidator}, Description: "The role the ServiceAccount's pods get (dovetail_controller_role.arn); changed in place."},
			"association_arn": schema.StringAttribute{Computed: true, Description: "ARN of the association.", PlanModifiers: keep},
			"tags":            eksTagsAttribute(),
			"tags_all":        tagsAllAttribute(),
		},
	}
}

func (r *podIdentityAssociation) ModifyPlan(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	requireAWS(r.clients, "dovetail_pod_identity_association", &resp.Diagnostics)
	planTagsAll(ctx, r.clients, req, resp)
}

func (r *podIdentityAssociation) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var plan podIdentityAssociationModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if resp.Diagnostics.HasError() {
		return
	}
	cluster := plan.ClusterName.ValueString()
	out, err := r.clients.AWS.EKS.CreatePodIdentityAssociation(ctx, &eks.CreatePodIdentityAssociationInput{ClusterName: aws.String(cluster),
		Namespace: aws.String(plan.Namespace.ValueString()), ServiceAccount: aws.String(plan.ServiceAccount.ValueString()), RoleArn: aws.String(plan.RoleARN.ValueString()),
		Tags: mapStrings(plan.TagsAll)})
	if err != nil {
		detail := err.Error()
		switch {
		case isCode(err, "ResourceInUseException"):
			detail += fmt.Sprintf("\n\nThe ServiceAccount %s/%s already has an association (made by eksctl, the console or another state). Import it: terraform import <address> %s,<association_id> (aws eks list-pod-identity-associations --cluster-name %s), or set create_pod_identity_association = false in the module.",
				plan.Namespace.ValueString(), plan.ServiceAccount.ValueString(), cluster, cluster)
		case isCode(err, "ResourceNotFoundException"):
			detail += "\n\nCheck cluster_name and the provider's region: EKS has no cluster " + cluster + " there."
		}
		resp.Diagnostics.AddError("Cannot create the Pod Identity association", detail)
		return
	}
	plan.ID = types.StringValue(aws.ToString(out.Association.AssociationId))
	plan.AssociationARN = types.StringValue(aws.ToString(out.Association.AssociationArn))
	resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
}

func (r *podIdentityAssociation) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var state podIdentityAssociationModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	out, err := r.clients.AWS.EKS.DescribePodIdentityAssociation(ctx, &eks.DescribePodIdentityAssociationInput{ClusterName: aws.String(state.ClusterName.ValueString()), AssociationId: aws.String(state.ID.ValueString())})
	if isNotFound(err) {
		resp.State.RemoveResource(ctx)
		return
	}
	if err != nil {
		resp.Diagnostics.AddError("Cannot read the Pod Identity association", err.Error())
		return
	}
	a := out.Association
	state.Namespace, state.ServiceAccount = types.StringValue(aws.ToString(a.Namespace)), types.StringValue(aws.ToString(a.ServiceAccount))
	state.RoleARN, state.AssociationARN = types.StringValue(aws.ToString(a.RoleArn)), types.StringValue(aws.ToString(a.AssociationArn))
	readTags(ctx, r.clients, a.Tags, &state.Tags, &state.TagsAll, &resp.Diagnostics)
	resp.Diagnostics.Append(resp.State.Set(ctx, &state)...)
}

// Update changes the role and tags; the rest replaces the association.
func (r *podIdentityAssociation) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	var plan, state podIdentityAssociationModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	api := r.clients.AWS.EKS
	if plan.RoleARN.ValueString() != state.RoleARN.ValueString() {
		if _, err := api.UpdatePodIdentityAssociation(ctx, &eks.UpdatePodIdentityAssociationInput{ClusterName: aws.String(plan.ClusterName.ValueString()),
			AssociationId: aws.String(state.ID.ValueString()), RoleArn: aws.String(plan.RoleARN.ValueString())}); err != nil {
			resp.Diagnostics.AddError("Cannot update the Pod Identity association", err.Error())
			return
		}
	}
	if err := syncEKSTags(ctx, api, state.AssociationARN.ValueString(), mapStrings(state.TagsAll), mapStrings(plan.TagsAll)); err != nil {
		resp.Diagnostics.AddError("Cannot tag the Pod Identity association", err.Error())
		return
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
}

func (r *podIdentityAssociation) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var state podIdentityAssociationModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	_, err := r.clients.AWS.EKS.DeletePodIdentityAssociation(ctx, &eks.DeletePodIdentityAssociationInput{ClusterName: aws.String(state.ClusterName.ValueString()), AssociationId: aws.String(state.ID.ValueString())})
	if err != nil && !isNotFound(err) {
		resp.Diagnostics.AddError("Cannot delete the Pod Identity association", err.Error())
	}
}

func (r *podIdentityAssociation) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	cluster, id, ok := strings.Cut(req.ID, ",")
	if !ok || cluster == "" || !strings.HasPrefix(id, "a-") {
		resp.Diagnostics.AddError("Invalid import ID", fmt.Sprintf("%q: use cluster_name,association_id, such as demo,a-0123456789abcdef0", req.ID))
		return
	}
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("id"), id)...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("cluster_name"), cluster)...)
}
