package provider

import (
	"context"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

// spotServiceLinkedRoleName is the role EC2 needs before it launches the account's
// first spot instance; without it every spot launch fails with
// AuthFailure.ServiceLinkedRoleCreationNotPermitted unless the caller may create it.
const spotServiceLinkedRoleName = "AWSServiceRoleForEC2Spot"

// NewSpotServiceLinkedRoleResource is dovetail_spot_service_linked_role: makes sure the
// account has the spot service-linked role, so the controller (which may not create
// IAM roles) can launch spot capacity in a fresh account.
func NewSpotServiceLinkedRoleResource() resource.Resource { return &spotServiceLinkedRole{} }

type spotServiceLinkedRole struct{ withClients }

type spotServiceLinkedRoleModel struct {
	ID  types.String `tfsdk:"id"`
	ARN types.String `tfsdk:"arn"`
}

func (r *spotServiceLinkedRole) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_spot_service_linked_role"
}

func (r *spotServiceLinkedRole) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	keep := []planmodifier.String{stringplanmodifier.UseStateForUnknown()}
	resp.Schema = schema.Schema{
		Description: "The account's EC2 spot service-linked role (" + spotServiceLinkedRoleName + "), which EC2 needs before it launches spot instances; an account that never ran spot has none, and the controller may not create it. " +
			"Create makes it, or takes the one the account has. Destroy leaves it in the account: it is shared by everything there that runs spot, and AWS refuses to delete it while spot instances use it. Import with its name.",
		Attributes: map[string]schema.Attribute{
			"id":  schema.StringAttribute{Computed: true, Description: "The role's name, " + spotServiceLinkedRoleName + ".", PlanModifiers: keep},
			"arn": schema.StringAttribute{Computed: true, Description: "ARN of the role.", PlanModifiers: keep},
		},
	}
}

func (r *spotServiceLinkedRole) ModifyPlan(_ context.Context, _ resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	requireAWS(r.clients, "dovetail_spot_service_linked_role", &resp.Diagnostics)
}

// spotServiceLinkedRolePath is where IAM keeps spot's service-linked role.
const spotServiceLinkedRolePath = "/aws-service-role/spot.amazonaws.com/"

// lookup returns the role's name and ARN, or "" when the account has none. It looks
// by path, where IAM puts a service's linked role whatever it is named.
func (r *spotServiceLinkedRole) lookup(ctx context.Context) (name, arn string, err error) {
	out, err := r.clients.AWS.IAM.ListRoles(ctx, &iam.ListRolesInput{PathPrefix: aws.String(spotServiceLinkedRolePath)})
	if err != nil {
		return "", "", err
	}
	for _, role := range out.Roles {
		return aws.ToString(role.RoleName), aws.ToString(role.Arn), nil
	}
	return "", "", nil
}

func (r *spotServiceLinkedRole) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	name, arn, err := r.lookup(ctx)
	if err == nil && arn == "" {
		var out *iam.CreateServiceLinkedRoleOutput
		out, err = r.clients.AWS.IAM.CreateServiceLinkedRole(ctx, &iam.CreateServiceLinkedRoleInput{AWSServiceName: aws.String("spot.amazonaws.com")})
		switch {
		case err == nil:
			name, arn = aws.ToString(out.Role.RoleName), aws.ToString(out.Role.Arn)
		case isCode(err, "InvalidInput") && strings.Contains(err.Error(), "taken"):
			// Made meanwhile by someone else: it is the account's role all the same.
			name, arn, err = r.lookup(ctx)
		}
	}
	if err != nil {
		resp.Diagnostics.AddError("Cannot make the spot service-linked role", err.Error()+
			"\n\nThe caller needs iam:CreateServiceLinkedRole for spot.amazonaws.com (iam:AWSServiceName condition). Or have an administrator run `aws iam create-service-linked-role --aws-service-name spot.amazonaws.com` once, and import it.")
		return
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &spotServiceLinkedRoleModel{ID: types.StringValue(name), ARN: types.StringValue(arn)})...)
}

func (r *spotServiceLinkedRole) Read(ctx context.Context, _ resource.ReadRequest, resp *resource.ReadResponse) {
	name, arn, err := r.lookup(ctx)
	if err != nil {
		resp.Diagnostics.AddError("Cannot read the spot service-linked role", err.Error())
		return
	}
	if arn == "" {
		resp.State.RemoveResource(ctx)
		return
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &spotServiceLinkedRoleModel{ID: types.StringValue(name), ARN: types.StringValue(arn)})...)
}

// Update has nothing to change: the resource has no arguments.
func (r *spotServiceLinkedRole) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	var plan spotServiceLinkedRoleModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
}

// Delete forgets the role and leaves it in the account (see the description).
func (r *spotServiceLinkedRole) Delete(context.Context, resource.DeleteRequest, *resource.DeleteResponse) {
}

// ImportState takes the role's name; the account has one such role, which Read finds.
func (r *spotServiceLinkedRole) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("id"), req.ID)...)
}
