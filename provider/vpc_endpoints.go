package provider

import (
	"context"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/hashicorp/terraform-plugin-framework-timeouts/resource/timeouts"
	"github.com/hashicorp/terraform-plugin-framework-validators/mapvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/setvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/setdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/wait"
)

// PrivateClusterServices are the interface endpoints nodes and the controller need
// without a route to the internet.
var PrivateClusterServices = []string{"sts", "ssm", "ec2", "sqs", "ecr.api", "ecr.dkr", "eks"}

// NewVPCEndpointsResource is dovetail_vpc_endpoints.
func NewVPCEndpointsResource() resource.Resource { return &vpcEndpoints{} }

type vpcEndpoints struct{ withClients }

type vpcEndpointsModel struct {
	ID              types.String   `tfsdk:"id"`
	VPCID           types.String   `tfsdk:"vpc_id"`
	SubnetIDs       types.Set      `tfsdk:"subnet_ids"`
	RouteTableIDs   types.Set      `tfsdk:"route_table_ids"`
	Services        types.Set      `tfsdk:"services"`
	SecurityGroupID types.String   `tfsdk:"security_group_id"`
	EndpointIDs     types.Map      `tfsdk:"endpoint_ids"`
	DeleteTimeout   types.String   `tfsdk:"delete_timeout"`
	Tags            types.Map      `tfsdk:"tags"`
	TagsAll         types.Map      `tfsdk:"tags_all"`
	Timeouts        timeouts.Value `tfsdk:"timeouts"`
}

// defaultEndpointsDeleteTimeout bounds a destroy: interface endpoints take a few
// minutes to go, and their network interfaces hold the security group until they do.
const defaultEndpointsDeleteTimeout = "10m"

func (r *vpcEndpoints) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_vpc_endpoints"
}

func (r *vpcEndpoints) Schema(ctx context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	var defaults []attr.Value
	for _, s := range PrivateClusterServices {
		defaults = append(defaults, types.StringValue(s))
	}
	keep := []planmodifier.String{stringplanmodifier.UseStateForUnknown()}
	resp.Schema = schema.Schema{
		Description: "VPC endpoints for a private cluster: interface endpoints with private DNS (sts, ssm, ec2, sqs, ecr.api, ecr.dkr, eks by default) behind a security group that admits HTTPS from the VPC, and the S3 gateway endpoint on the given route tables (image layers come from S3). " +
			"Destroy deletes the endpoints, waits until EC2 reports them deleted, then deletes the security group, retrying while their network interfaces still hold it, all within the delete timeout.",
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{Computed: true, Description: "The VPC's ID.", PlanModifiers: keep},
			"vpc_id": schema.StringAttribute{Required: true, Description: "The cluster's VPC; a change replaces the endpoints.", PlanModifiers: []planmodifier.String{stringplanmodifier.RequiresReplace()},
				Validators: []validator.String{stringvalidator.RegexMatches(regexp.MustCompile(`^vpc-[0-9a-f]+$`), "must be a VPC ID such as vpc-0123abcd")}},
			"subnet_ids": schema.SetAttribute{Required: true, ElementType: types.StringType, Description: "Subnets the interface endpoints get addresses in, one per zone.",
				Validators: []validator.Set{setvalidator.SizeAtLeast(1), setvalidator.ValueStringsAre(stringvalidator.RegexMatches(regexp.MustCompile(`^subnet-[0-9a-f]+$`), "must be a subnet ID such as subnet-0123abcd"))}},
			"route_table_ids": schema.SetAttribute{Optional: true, ElementType: types.StringType, Description: "Route tables for the S3 gateway endpoint; without them no S3 endpoint is made.",
				Validators: []validator.Set{setvalidator.ValueStringsAre(stringvalidator.RegexMatches(regexp.MustCompile(`^rtb-[0-9a-f]+$`), "must be a route table ID such as rtb-0123abcd"))}},
			"services": schema.SetAttribute{Optional: true, Computed: true, ElementType: types.StringType, Default: setdefault.StaticValue(types.SetValueMust(types.StringType, defaults)),
				Description: "Interface endpoint services, as the part after com.amazonaws.<region>.",
				Validators:  []validator.Set{setvalidator.ValueStringsAre(stringvalidator.RegexMatches(regexp.MustCompile(`^[a-z0-9][a-z0-9.-]*$`), "must be a service such as ec2 or ecr.api"))}},
			"security_group_id": schema.StringAttribute{Computed: true, Description: "The security group the endpoints' interfaces are in (HTTPS from the VPC).", PlanModifiers: keep},
			"endpoint_ids":      schema.MapAttribute{Computed: true, ElementType: types.StringType, Description: "Endpoint ID per service (s3 included when made)."},
			"delete_timeout": schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString(defaultEndpointsDeleteTimeout), Validators: []validator.String{goDuration{}},
				Description:        "How long destroy waits for the endpoints to be deleted, and then for their security group to lose its last dependents, before it fails naming what is left, when the timeouts block does not say.",
				DeprecationMessage: "Use timeouts { delete = \"10m\" }, as in other providers; delete_timeout is only its default now."},
			"tags_all": tagsAllAttribute(),
			"tags": schema.MapAttribute{Optional: true, ElementType: types.StringType, Description: "Tags on the endpoints and their security group; changed in place.",
				Validators: []validator.Map{mapvalidator.SizeAtMost(45), mapvalidator.KeysAre(stringvalidator.LengthBetween(1, 128)), mapvalidator.ValueStringsAre(stringvalidator.LengthAtMost(256))}},
		},
		Blocks: map[string]schema.Block{"timeouts": timeouts.Block(ctx, timeouts.Opts{Delete: true})},
	}
}

func (r *vpcEndpoints) ModifyPlan(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	requireAWS(r.clients, "dovetail_vpc_endpoints", &resp.Diagnostics)
	planTagsAll(ctx, r.clients, req, resp)
}

func (r *vpcEndpoints) serviceName(service string) string {
	return fmt.Sprintf("com.amazonaws.%s.%s", r.clients.AWS.Region, service)
}

// securityGroup makes the endpoints' group: HTTPS from the VPC's CIDR.
func (r *vpcEndpoints) securityGroup(ctx context.Context, vpcID string) (string, error) {
	api := r.clients.AWS.EC2
	vpcs, err := api.DescribeVpcs(ctx, &ec2.DescribeVpcsInput{VpcIds: []string{vpcID}})
	if err != nil || len(vpcs.Vpcs) == 0 {
		return "", fmt.Errorf("describing %s: %v", vpcID, err)
	}
	sg, err := api.CreateSecurityGroup(ctx, &ec2.CreateSecurityGroupInput{VpcId: aws.String(vpcID), GroupName: aws.String("dovetail-vpc-endpoints-" + vpcID),
		Description: aws.String("HTTPS from the VPC to its endpoints (Dovetail)")})
	if err != nil {
		return "", fmt.Errorf("creating the endpoints' security group, %w", err)
	}
	id := aws.ToString(sg.GroupId)
	if _, err := api.AuthorizeSecurityGroupIngress(ctx, &ec2.AuthorizeSecurityGroupIngressInput{GroupId: aws.String(id), IpPermissions: []ec2types.IpPermission{{
		IpProtocol: aws.String("tcp"), FromPort: aws.Int32(443), ToPort: aws.Int32(443), IpRanges: []ec2types.IpRange{{CidrIp: vpcs.Vpcs[0].CidrBlock}}}}}); err != nil {
		return id, fmt.Errorf("allowing HTTPS into the endpoints' security group, %w", err)
	}
	return id, nil
}

// ensure makes the endpoints the model asks for and returns service → endpoint ID.
func (r *vpcEndpoints) ensure(ctx context.Context, m *vpcEndpointsModel, existing map[string]string) (map[string]string, error) {
	api := r.clients.AWS.EC2
	subnets, routes, services := setStrings(ctx, m.SubnetIDs), setStrings(ctx, m.RouteTableIDs), setStrings(ctx, m.Services)
	out := map[string]string{}
	for _, svc := range services {
		if id, ok := existing[svc]; ok {
			out[svc] = id
			continue
		}
		ep, err := api.CreateVpcEndpoint(ctx, &ec2.CreateVpcEndpointInput{VpcId: aws.String(m.VPCID.ValueString()), ServiceName: aws.String(r.serviceName(svc)),
			VpcEndpointType: ec2types.VpcEndpointTypeInterface, SubnetIds: subnets, SecurityGroupIds: []string{m.SecurityGroupID.ValueString()}, PrivateDnsEnabled: aws.Bool(true),
			TagSpecifications: endpointTags(svc)})
		if err != nil {
			return out, fmt.Errorf("creating the %s endpoint, %w", svc, err)
		}
		out[svc] = aws.ToString(ep.VpcEndpoint.VpcEndpointId)
	}
	if len(routes) > 0 {
		if id, ok := existing["s3"]; ok {
			out["s3"] = id
		} else {
			ep, err := api.CreateVpcEndpoint(ctx, &ec2.CreateVpcEndpointInput{VpcId: aws.String(m.VPCID.ValueString()), ServiceName: aws.String(r.serviceName("s3")),
				VpcEndpointType: ec2types.VpcEndpointTypeGateway, RouteTableIds: routes, TagSpecifications: endpointTags("s3")})
			if err != nil {
				return out, fmt.Errorf("creating the s3 gateway endpoint, %w", err)
			}
			out["s3"] = aws.ToString(ep.VpcEndpoint.VpcEndpointId)
		}
	}
	var drop []string
	for svc, id := range existing {
		if _, kept := out[svc]; !kept {
			drop = append(drop, id)
		}
	}
	if len(drop) > 0 {
		if _, err := api.DeleteVpcEndpoints(ctx, &ec2.DeleteVpcEndpointsInput{VpcEndpointIds: drop}); err != nil {
			return out, fmt.Errorf("deleting endpoints no longer asked for, %w", err)
		}
	}
	return out, nil
}

// EndpointServiceTag marks the endpoints this resource makes with their service, so an
// import finds them in the VPC.
const EndpointServiceTag = "dovetail.sh/vpc-endpoint-service"

func endpointTags(service string) []ec2types.TagSpecification {
	return []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeVpcEndpoint, Tags: []ec2types.Tag{
		{Key: aws.String(EndpointServiceTag), Value: aws.String(service)}, {Key: aws.String("dovetail.sh/managed-by"), Value: aws.String("terraform")}}}}
}

// ImportState takes the VPC ID; Read then finds the tagged endpoints and their group.
func (r *vpcEndpoints) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	if !strings.HasPrefix(req.ID, "vpc-") {
		resp.Diagnostics.AddError("Invalid import ID", fmt.Sprintf("%q: import dovetail_vpc_endpoints by the VPC ID, such as vpc-0123abcd", req.ID))
		return
	}
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("id"), req.ID)...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("vpc_id"), req.ID)...)
}

// adopt fills an imported state from the endpoints tagged in the VPC.
func (r *vpcEndpoints) adopt(ctx context.Context, m *vpcEndpointsModel) error {
	api := r.clients.AWS.EC2
	vpcID := m.VPCID.ValueString()
	ids := map[string]string{}
	subnets, routes := sets.New[string](), sets.New[string]()
	endpoints, err := r.endpointsIn(ctx, vpcID)
	if err != nil {
		return err
	}
	for _, ep := range endpoints {
		svc := ""
		for _, t := range ep.Tags {
			if aws.ToString(t.Key) == EndpointServiceTag {
				svc = aws.ToString(t.Value)
			}
		}
		if svc == "" {
			continue
		}
		ids[svc] = aws.ToString(ep.VpcEndpointId)
		subnets.Insert(ep.SubnetIds...)
		routes.Insert(ep.RouteTableIds...)
	}
	groups, err := api.DescribeSecurityGroups(ctx, &ec2.DescribeSecurityGroupsInput{Filters: []ec2types.Filter{
		{Name: aws.String("vpc-id"), Values: []string{vpcID}}, {Name: aws.String("group-name"), Values: []string{"dovetail-vpc-endpoints-" + vpcID}}}})
	if err != nil {
		return err
	}
	if len(groups.SecurityGroups) == 0 && len(ids) == 0 {
		return nil
	}
	if len(groups.SecurityGroups) > 0 {
		m.SecurityGroupID = types.StringValue(aws.ToString(groups.SecurityGroups[0].GroupId))
	}
	m.SubnetIDs, _ = types.SetValueFrom(ctx, types.StringType, sets.List(subnets))
	m.RouteTableIDs = types.SetNull(types.StringType)
	if routes.Len() > 0 {
		m.RouteTableIDs, _ = types.SetValueFrom(ctx, types.StringType, sets.List(routes))
	}
	m.EndpointIDs, _ = types.MapValueFrom(ctx, types.StringType, ids)
	return nil
}

func (r *vpcEndpoints) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var plan vpcEndpointsModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if resp.Diagnostics.HasError() {
		return
	}
	plan.ID = plan.VPCID
	sg, err := r.securityGroup(ctx, plan.VPCID.ValueString())
	plan.SecurityGroupID = types.StringValue(sg)
	plan.EndpointIDs = types.MapValueMust(types.StringType, map[string]attr.Value{})
	if err != nil {
		if sg != "" {
			resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
		}
		resp.Diagnostics.AddError("Cannot create the endpoints' security group", err.Error())
		return
	}
	ids, err := r.ensure(ctx, &plan, nil)
	plan.EndpointIDs, _ = types.MapValueFrom(ctx, types.StringType, ids)
	if err == nil {
		err = r.tag(ctx, &plan, ids, &resp.Diagnostics)
	}
	// Whatever was made is recorded, so a failure leaves nothing unaccounted for.
	resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
	if err != nil {
		resp.Diagnostics.AddError("Cannot create the VPC endpoints", err.Error())
	}
}

// tag gives the endpoints and their security group exactly the configured tags,
// beside the ones this resource keeps for itself.
func (r *vpcEndpoints) tag(ctx context.Context, m *vpcEndpointsModel, ids map[string]string, diags *diag.Diagnostics) error {
	want := roleTags(ctx, m.TagsAll, diags)
	resources := []string{m.SecurityGroupID.ValueString()}
	for _, svc := range sortedStringKeys(ids) {
		resources = append(resources, ids[svc])
	}
	api := r.clients.AWS.EC2
	for _, id := range resources {
		out, err := api.DescribeTags(ctx, &ec2.DescribeTagsInput{Filters: []ec2types.Filter{{Name: aws.String("resource-id"), Values: []string{id}}}})
		if err != nil {
			return fmt.Errorf("reading the tags of %s, %w", id, err)
		}
		drop, set := tagDiff(userEC2Tags(out.Tags), want)
		if len(drop) > 0 {
			var tags []ec2types.Tag
			for _, k := range drop {
				tags = append(tags, ec2types.Tag{Key: aws.String(k)})
			}
			if _, err := api.DeleteTags(ctx, &ec2.DeleteTagsInput{Resources: []string{id}, Tags: tags}); err != nil {
				return fmt.Errorf("removing tags from %s, %w", id, err)
			}
		}
		if len(set) > 0 {
			var tags []ec2types.Tag
			for _, k := range sortedStringKeys(set) {
				tags = append(tags, ec2types.Tag{Key: aws.String(k), Value: aws.String(set[k])})
			}
			if _, err := api.CreateTags(ctx, &ec2.CreateTagsInput{Resources: []string{id}, Tags: tags}); err != nil {
				return fmt.Errorf("tagging %s, %w", id, err)
			}
		}
	}
	return nil
}

// userEC2Tags leaves out the tags this resource keeps for itself.
func userEC2Tags(tags []ec2types.TagDescription) map[string]string {
	out := map[string]string{}
	for _, t := range tags {
		if k := aws.ToString(t.Key); !strings.HasPrefix(k, "dovetail.sh/") {
			out[k] = aws.ToString(t.Value)
		}
	}
	return out
}

// Read keeps the endpoints that still exist; a missing one is drift the next apply
// makes again.
func (r *vpcEndpoints) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var state vpcEndpointsModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() || r.clients == nil || r.clients.AWS == nil {
		return
	}
	if state.EndpointIDs.IsNull() {
		if err := r.adopt(ctx, &state); err != nil {
			resp.Diagnostics.AddError("Cannot find the VPC endpoints to import", err.Error())
			return
		}
		if state.EndpointIDs.IsNull() {
			resp.Diagnostics.AddError("Nothing to import", fmt.Sprintf("%s has no endpoints tagged %s and no group dovetail-vpc-endpoints-%s.", state.VPCID.ValueString(), EndpointServiceTag, state.VPCID.ValueString()))
			return
		}
	}
	ids := map[string]string{}
	resp.Diagnostics.Append(state.EndpointIDs.ElementsAs(ctx, &ids, false)...)
	live, err := r.liveEndpoints(ctx, state.VPCID.ValueString(), ids)
	if err != nil {
		resp.Diagnostics.AddError("Cannot read the VPC endpoints", err.Error())
		return
	}
	services := sets.New[string]()
	for svc := range live {
		if svc != "s3" {
			services.Insert(svc)
		}
	}
	state.Services, _ = types.SetValueFrom(ctx, types.StringType, sets.List(services))
	state.EndpointIDs, _ = types.MapValueFrom(ctx, types.StringType, live)
	if sg := state.SecurityGroupID.ValueString(); sg != "" {
		out, err := r.clients.AWS.EC2.DescribeTags(ctx, &ec2.DescribeTagsInput{Filters: []ec2types.Filter{{Name: aws.String("resource-id"), Values: []string{sg}}}})
		if err != nil {
			resp.Diagnostics.AddError("Cannot read the endpoints' tags", err.Error())
			return
		}
		readTags(ctx, r.clients, userEC2Tags(out.Tags), &state.Tags, &state.TagsAll, &resp.Diagnostics)
	}
	if state.DeleteTimeout.IsNull() {
		state.DeleteTimeout = types.StringValue(defaultEndpointsDeleteTimeout)
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &state)...)
}

// endpointsIn lists the VPC's endpoints that are not being deleted. By VPC, not by ID:
// asking for a deleted ID is an error rather than an absence.
func (r *vpcEndpoints) endpointsIn(ctx context.Context, vpcID string) ([]ec2types.VpcEndpoint, error) {
	var out []ec2types.VpcEndpoint
	pages := ec2.NewDescribeVpcEndpointsPaginator(r.clients.AWS.EC2, &ec2.DescribeVpcEndpointsInput{Filters: []ec2types.Filter{{Name: aws.String("vpc-id"), Values: []string{vpcID}}}})
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return nil, err
		}
		for _, ep := range page.VpcEndpoints {
			if !gone(ep.State) {
				out = append(out, ep)
			}
		}
	}
	return out, nil
}

func (r *vpcEndpoints) liveEndpoints(ctx context.Context, vpcID string, ids map[string]string) (map[string]string, error) {
	live := map[string]string{}
	if len(ids) == 0 {
		return live, nil
	}
	endpoints, err := r.endpointsIn(ctx, vpcID)
	if err != nil {
		return nil, err
	}
	present := sets.New[string]()
	for _, ep := range endpoints {
		present.Insert(aws.ToString(ep.VpcEndpointId))
	}
	for svc, id := range ids {
		if present.Has(id) {
			live[svc] = id
		}
	}
	return live, nil
}

func mapValues(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for _, v := range m {
		out = append(out, v)
	}
	return out
}

func (r *vpcEndpoints) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	var plan, state vpcEndpointsModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	existing := map[string]string{}
	resp.Diagnostics.Append(state.EndpointIDs.ElementsAs(ctx, &existing, false)...)
	plan.SecurityGroupID, plan.ID = state.SecurityGroupID, state.ID
	ids, err := r.ensure(ctx, &plan, existing)
	plan.EndpointIDs, _ = types.MapValueFrom(ctx, types.StringType, ids)
	if err == nil {
		err = r.tag(ctx, &plan, ids, &resp.Diagnostics)
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
	if err != nil {
		resp.Diagnostics.AddError("Cannot update the VPC endpoints", err.Error())
	}
}

// Delete deletes the endpoints, waits until EC2 reports them deleted (their network
// interfaces use the security group until then, and deleting it earlier answers
// DependencyViolation), then deletes the group, retrying DependencyViolation while the
// interfaces are released. All within the delete timeout.
func (r *vpcEndpoints) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var state vpcEndpointsModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	def, err := time.ParseDuration(state.DeleteTimeout.ValueString())
	if err != nil || def <= 0 {
		def, _ = time.ParseDuration(defaultEndpointsDeleteTimeout)
	}
	deadline, cancel, timeout := withOperationTimeout(ctx, state.Timeouts, opDelete, def, &resp.Diagnostics)
	defer cancel()
	api := r.clients.AWS.EC2
	ids := map[string]string{}
	resp.Diagnostics.Append(state.EndpointIDs.ElementsAs(ctx, &ids, false)...)
	sg := state.SecurityGroupID.ValueString()
	if len(ids) > 0 {
		out, err := api.DeleteVpcEndpoints(ctx, &ec2.DeleteVpcEndpointsInput{VpcEndpointIds: mapValues(ids)})
		if err != nil && !isNotFound(err) {
			resp.Diagnostics.AddError("Cannot delete the VPC endpoints", err.Error())
			return
		}
		if out != nil {
			for _, u := range out.Unsuccessful {
				if u.Error != nil && !strings.Contains(aws.ToString(u.Error.Code), "NotFound") {
					resp.Diagnostics.AddError("Cannot delete the VPC endpoints", fmt.Sprintf("%s: %s %s", aws.ToString(u.ResourceId), aws.ToString(u.Error.Code), aws.ToString(u.Error.Message)))
					return
				}
			}
		}
		if err := r.waitDeleted(deadline, state.VPCID.ValueString(), ids); err != nil {
			kept := ""
			if sg != "" {
				kept = fmt.Sprintf("; their security group %s is kept until they are gone", sg)
			}
			resp.Diagnostics.AddError("The VPC endpoints are still being deleted",
				fmt.Sprintf("After %s %s%s. Run destroy again once EC2 has deleted them, or raise timeouts { delete }.", timeout, err, kept))
			return
		}
	}
	if sg != "" {
		if err := deleteSecurityGroup(deadline, api, sg); err != nil {
			resp.Diagnostics.AddError("Cannot delete the endpoints' security group",
				fmt.Sprintf("After %s security group %s still cannot be deleted: %v. Network interfaces of the deleted endpoints can take minutes to be released; "+
					"run destroy again, or raise timeouts { delete }. Anything else using the group (see the network interfaces with it in the EC2 console) must go first.", timeout, sg, err))
		}
	}
}

// endpointsPollInterval paces the waits of a destroy.
const endpointsPollInterval = 2 * time.Second

// waitDeleted waits until none of the endpoints is listed in the VPC other than
// deleted; the error names those still there and their state.
func (r *vpcEndpoints) waitDeleted(ctx context.Context, vpcID string, ids map[string]string) error {
	service := map[string]string{}
	for svc, id := range ids {
		service[id] = svc
	}
	var left []string
	err := wait.PollUntilContextCancel(ctx, endpointsPollInterval, true, func(ctx context.Context) (bool, error) {
		var now []string
		pages := ec2.NewDescribeVpcEndpointsPaginator(r.clients.AWS.EC2, &ec2.DescribeVpcEndpointsInput{Filters: []ec2types.Filter{{Name: aws.String("vpc-id"), Values: []string{vpcID}}}})
		for pages.HasMorePages() {
			page, err := pages.NextPage(ctx)
			if ctx.Err() != nil {
				// The timeout: report what the last complete listing found.
				return false, nil
			}
			if err != nil {
				return false, fmt.Errorf("listing the endpoints of %s, %w", vpcID, err)
			}
			for _, ep := range page.VpcEndpoints {
				id := aws.ToString(ep.VpcEndpointId)
				if svc, ours := service[id]; ours && !strings.EqualFold(string(ep.State), string(ec2types.StateDeleted)) {
					now = append(now, fmt.Sprintf("%s (%s, %s)", id, svc, strings.ToLower(string(ep.State))))
				}
			}
		}
		left = now
		return len(left) == 0, nil
	})
	if err != nil && len(left) > 0 {
		sort.Strings(left)
		return fmt.Errorf("these VPC endpoints are still there: %s", strings.Join(left, ", "))
	}
	return err
}

// deleteSecurityGroup deletes the group, retrying while something still uses it.
func deleteSecurityGroup(ctx context.Context, api *ec2.Client, id string) error {
	var last error
	err := wait.PollUntilContextCancel(ctx, endpointsPollInterval, true, func(ctx context.Context) (bool, error) {
		_, err := api.DeleteSecurityGroup(ctx, &ec2.DeleteSecurityGroupInput{GroupId: aws.String(id)})
		switch {
		case err == nil || isNotFound(err):
			return true, nil
		case isCode(err, "DependencyViolation"):
			last = err
			return false, nil
		default:
			return false, err
		}
	})
	if err != nil && last != nil && ctx.Err() != nil {
		return last
	}
	return err
}

// gone: EC2 reports endpoint states in lower case, the SDK's constants are capitalized.
func gone(state ec2types.State) bool {
	return strings.EqualFold(string(state), string(ec2types.StateDeleted)) || strings.EqualFold(string(state), string(ec2types.StateDeleting))
}
