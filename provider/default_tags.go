package provider

import (
	"context"
	"maps"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

// The provider's aws.default_tags work as hashicorp/aws's default_tags do: every
// resource that tags AWS resources puts its tags over them, shows the result as
// tags_all, and keeps tags to what the configuration says.

// tagsAllAttribute is tags_all: what is on AWS.
func tagsAllAttribute() schema.MapAttribute {
	return schema.MapAttribute{Computed: true, ElementType: types.StringType,
		Description: "The tags on AWS: tags over the provider's aws.default_tags (tags wins on a shared key), as in hashicorp/aws."}
}

// defaultTags are the provider's aws.default_tags; none without an aws block.
func defaultTags(c *Clients) map[string]string {
	if c == nil || c.AWS == nil {
		return nil
	}
	return c.AWS.DefaultTags
}

// planTagsAll sets the planned tags_all from the planned tags, known at plan time
// when the tags are, so a change of default_tags shows as an update in place.
func planTagsAll(ctx context.Context, c *Clients, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	if req.Plan.Raw.IsNull() {
		return
	}
	var tags types.Map
	resp.Diagnostics.Append(req.Plan.GetAttribute(ctx, path.Root("tags"), &tags)...)
	if tags.IsUnknown() {
		resp.Diagnostics.Append(resp.Plan.SetAttribute(ctx, path.Root("tags_all"), types.MapUnknown(types.StringType))...)
		return
	}
	all := maps.Clone(defaultTags(c))
	if all == nil {
		all = map[string]string{}
	}
	maps.Copy(all, mapStrings(tags))
	v, d := types.MapValueFrom(ctx, types.StringType, all)
	resp.Diagnostics.Append(d...)
	resp.Diagnostics.Append(resp.Plan.SetAttribute(ctx, path.Root("tags_all"), v)...)
}

// readTags records the tags found on AWS: all of them in tags_all, and in tags those
// the configuration set (prior) or the default tags do not explain, so drift shows
// and a tag that repeats a default is not lost. An unset tags stays unset when the
// default tags explain everything.
func readTags(ctx context.Context, c *Clients, remote map[string]string, tags, tagsAll *types.Map, diags *diag.Diagnostics) {
	defaults := defaultTags(c)
	prior := mapStrings(*tags)
	own := map[string]string{}
	for k, v := range remote {
		if _, set := prior[k]; set {
			own[k] = v
		} else if d, ok := defaults[k]; !ok || d != v {
			own[k] = v
		}
	}
	var d diag.Diagnostics
	if len(own) > 0 || !tags.IsNull() {
		*tags, d = types.MapValueFrom(ctx, types.StringType, own)
		diags.Append(d...)
	}
	if remote == nil {
		remote = map[string]string{}
	}
	*tagsAll, d = types.MapValueFrom(ctx, types.StringType, remote)
	diags.Append(d...)
}
