package provider

import (
	"context"
	"fmt"
	"regexp"
	"sort"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/hashicorp/terraform-plugin-framework-validators/resourcevalidator"
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

// DiscoveryTagKey is the tag EC2NodeClass selectors conventionally select on.
const DiscoveryTagKey = "karpenter.sh/discovery"

var pathAWS = path.Root("aws")

// NewDiscoveryTagsResource is dovetail_discovery_tags.
func NewDiscoveryTagsResource() resource.Resource { return &discoveryTags{} }

type discoveryTags struct{ withClients }

type discoveryTagsModel struct {
	ID               types.String `tfsdk:"id"`
	ClusterName      types.String `tfsdk:"cluster_name"`
	TagKey           types.String `tfsdk:"tag_key"`
	SubnetIDs        types.Set    `tfsdk:"subnet_ids"`
	SecurityGroupIDs types.Set    `tfsdk:"security_group_ids"`
}

func (r *discoveryTags) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_discovery_tags"
}

func (r *discoveryTags) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	resp.Schema = schema.Schema{
		Description: "Tags subnets and security groups with karpenter.sh/discovery = <cluster> so EC2NodeClass selectors find them. Destroy removes only the tags it set: a tag with another value is left alone.",
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{Computed: true, Description: "The cluster name.",
				PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()}},
			"cluster_name": schema.StringAttribute{Required: true, Description: "The value of the discovery tag: the cluster's name.",
				Validators:    []validator.String{stringvalidator.RegexMatches(regexp.MustCompile(`^[0-9A-Za-z][A-Za-z0-9\-_]{0,99}$`), "must be an EKS cluster name: 1-100 letters, digits, - and _, starting with a letter or digit")},
				PlanModifiers: []planmodifier.String{stringplanmodifier.RequiresReplace()}},
			"tag_key": schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString(DiscoveryTagKey),
				Description:   "The tag key; karpenter.sh/discovery unless the node classes select on another.",
				Validators:    []validator.String{stringvalidator.LengthBetween(1, 128)},
				PlanModifiers: []planmodifier.String{stringplanmodifier.RequiresReplace()}},
			"subnet_ids": schema.SetAttribute{Optional: true, ElementType: types.StringType, Description: "Subnets to tag.",
				Validators: []validator.Set{setvalidator.ValueStringsAre(stringvalidator.RegexMatches(regexp.MustCompile(`^subnet-[0-9a-f]+$`), "must be a subnet ID such as subnet-0123abcd"))}},
			"security_group_ids": schema.SetAttribute{Optional: true, ElementType: types.StringType, Description: "Security groups to tag.",
				Validators: []validator.Set{setvalidator.ValueStringsAre(stringvalidator.RegexMatches(regexp.MustCompile(`^sg-[0-9a-f]+$`), "must be a security group ID such as sg-0123abcd"))}},
		},
	}
}

func (r *discoveryTags) ConfigValidators(context.Context) []resource.ConfigValidator {
	return []resource.ConfigValidator{resourcevalidator.AtLeastOneOf(path.MatchRoot("subnet_ids"), path.MatchRoot("security_group_ids"))}
}

// ModifyPlan fails the plan when the provider has no aws block, rather than the apply.
func (r *discoveryTags) ModifyPlan(_ context.Context, _ resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	requireAWS(r.clients, "dovetail_discovery_tags", &resp.Diagnostics)
}

func (r *discoveryTags) ids(ctx context.Context, m *discoveryTagsModel) ([]string, error) {
	var subnets, groups []string
	if d := m.SubnetIDs.ElementsAs(ctx, &subnets, false); d.HasError() {
		return nil, fmt.Errorf("reading subnet_ids")
	}
	if d := m.SecurityGroupIDs.ElementsAs(ctx, &groups, false); d.HasError() {
		return nil, fmt.Errorf("reading security_group_ids")
	}
	return append(subnets, groups...), nil
}

func (r *discoveryTags) tag(ctx context.Context, m *discoveryTagsModel, ids []string) error {
	if len(ids) == 0 {
		return nil
	}
	_, err := r.clients.AWS.EC2.CreateTags(ctx, &ec2.CreateTagsInput{Resources: ids,
		Tags: []ec2types.Tag{{Key: aws.String(m.TagKey.ValueString()), Value: aws.String(m.ClusterName.ValueString())}}})
	if err != nil {
		return fmt.Errorf("tagging %v with %s=%s, %w", ids, m.TagKey.ValueString(), m.ClusterName.ValueString(), err)
	}
	return nil
}

// untag removes the tag only where it still has this cluster's value.
func (r *discoveryTags) untag(ctx context.Context, m *discoveryTagsModel, ids []string) error {
	if len(ids) == 0 {
		return nil
	}
	_, err := r.clients.AWS.EC2.DeleteTags(ctx, &ec2.DeleteTagsInput{Resources: ids,
		Tags: []ec2types.Tag{{Key: aws.String(m.TagKey.ValueString()), Value: aws.String(m.ClusterName.ValueString())}}})
	if err != nil && !isNotFound(err) {
		return fmt.Errorf("removing %s from %v, %w", m.TagKey.ValueString(), ids, err)
	}
	return nil
}

func (r *discoveryTags) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var plan discoveryTagsModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if resp.Diagnostics.HasError() {
		return
	}
	ids, err := r.ids(ctx, &plan)
	if err == nil {
		err = r.tag(ctx, &plan, ids)
	}
	if err != nil {
		resp.Diagnostics.AddError("Cannot tag discovery resources", err.Error())
		return
	}
	plan.ID = plan.ClusterName
	resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
}

// Read keeps the resources that still carry the tag; after an import (no IDs in
// state yet) it finds every subnet and security group that does.
func (r *discoveryTags) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var state discoveryTagsModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() || r.clients == nil || r.clients.AWS == nil {
		return
	}
	ids, err := r.ids(ctx, &state)
	if err != nil {
		resp.Diagnostics.AddError("Cannot read state", err.Error())
		return
	}
	discover := state.SubnetIDs.IsNull() && state.SecurityGroupIDs.IsNull()
	filters := []ec2types.Filter{
		{Name: aws.String("key"), Values: []string{state.TagKey.ValueString()}},
		{Name: aws.String("value"), Values: []string{state.ClusterName.ValueString()}},
		{Name: aws.String("resource-type"), Values: []string{"subnet", "security-group"}},
	}
	if !discover {
		if len(ids) == 0 {
			resp.State.RemoveResource(ctx)
			return
		}
		filters = append(filters, ec2types.Filter{Name: aws.String("resource-id"), Values: ids})
	}
	tagged := map[ec2types.ResourceType][]string{}
	pages := ec2.NewDescribeTagsPaginator(r.clients.AWS.EC2, &ec2.DescribeTagsInput{Filters: filters})
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			resp.Diagnostics.AddError("Cannot read discovery tags", err.Error())
			return
		}
		for _, t := range page.Tags {
			tagged[t.ResourceType] = append(tagged[t.ResourceType], aws.ToString(t.ResourceId))
		}
	}
	subnets, groups := tagged[ec2types.ResourceTypeSubnet], tagged[ec2types.ResourceTypeSecurityGroup]
	if len(subnets)+len(groups) == 0 {
		// Nothing carries this cluster's tag any more: the resource is gone.
		resp.State.RemoveResource(ctx)
		return
	}
	sort.Strings(subnets)
	sort.Strings(groups)
	keep := func(current types.Set, found []string) types.Set {
		if current.IsNull() && len(found) == 0 && !discover {
			return current
		}
		if len(found) == 0 && current.IsNull() {
			return current
		}
		v, _ := types.SetValueFrom(ctx, types.StringType, found)
		return v
	}
	state.SubnetIDs = keep(state.SubnetIDs, subnets)
	state.SecurityGroupIDs = keep(state.SecurityGroupIDs, groups)
	state.ID = state.ClusterName
	resp.Diagnostics.Append(resp.State.Set(ctx, &state)...)
}

func (r *discoveryTags) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	var plan, state discoveryTagsModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	want, err1 := r.ids(ctx, &plan)
	have, err2 := r.ids(ctx, &state)
	if err1 != nil || err2 != nil {
		resp.Diagnostics.AddError("Cannot read the plan", fmt.Sprint(err1, err2))
		return
	}
	wantSet, haveSet := sets.New(want...), sets.New(have...)
	if err := r.tag(ctx, &plan, sets.List(wantSet.Difference(haveSet))); err != nil {
		resp.Diagnostics.AddError("Cannot tag discovery resources", err.Error())
		return
	}
	// Resources that lost their tag out of band are tagged again too.
	if err := r.tag(ctx, &plan, sets.List(wantSet.Intersection(haveSet))); err != nil {
		resp.Diagnostics.AddError("Cannot tag discovery resources", err.Error())
		return
	}
	if err := r.untag(ctx, &state, sets.List(haveSet.Difference(wantSet))); err != nil {
		resp.Diagnostics.AddError("Cannot remove discovery tags", err.Error())
		return
	}
	plan.ID = plan.ClusterName
	resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
}

func (r *discoveryTags) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var state discoveryTagsModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	ids, err := r.ids(ctx, &state)
	if err == nil {
		err = r.untag(ctx, &state, ids)
	}
	if err != nil {
		resp.Diagnostics.AddError("Cannot remove discovery tags", err.Error())
	}
}

// ImportState takes the cluster name; the next read finds what carries its tag.
func (r *discoveryTags) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("cluster_name"), req.ID)...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("id"), req.ID)...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("tag_key"), DiscoveryTagKey)...)
}
