package provider

import (
	"context"
	"fmt"
	"regexp"
	"sort"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	iamtypes "github.com/aws/aws-sdk-go-v2/service/iam/types"
	"github.com/hashicorp/terraform-plugin-framework-validators/mapvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

// Tags Dovetail puts on roles for itself; they are not the user's tags.
var internalRoleTags = map[string]bool{CreationTokenTag: true, "dovetail.sh/managed-by": true}

// roleTagsAttribute and roleBoundaryAttribute are the settings both roles take
// beside their policies, named as terraform-aws-eks//modules/karpenter names them on
// its roles.
func roleTagsAttribute() schema.MapAttribute {
	return schema.MapAttribute{Optional: true, ElementType: types.StringType,
		Description: "Tags on the role (and its instance profile); changed in place.",
		Validators: []validator.Map{
			mapvalidator.SizeAtMost(48),
			mapvalidator.KeysAre(stringvalidator.LengthBetween(1, 128), stringvalidator.RegexMatches(regexp.MustCompile(`^[\p{L}\p{Z}\p{N}_.:/=+\-@]*$`), "must be letters, digits, spaces and _.:/=+-@ (IAM's tag key characters)")),
			mapvalidator.ValueStringsAre(stringvalidator.LengthAtMost(256)),
		}}
}

func roleBoundaryAttribute() schema.StringAttribute {
	return schema.StringAttribute{Optional: true,
		Description: "ARN of the managed policy that bounds the role's permissions; changed in place.",
		Validators:  []validator.String{stringvalidator.RegexMatches(regexp.MustCompile(`^arn:aws[a-z-]*:iam::(aws|[0-9]{12}):policy/.+`), "must be an IAM policy ARN, such as arn:aws:iam::123456789012:policy/boundary")}}
}

// roleTags reads the planned tags; nil when unset.
func roleTags(ctx context.Context, m types.Map, diags *diag.Diagnostics) map[string]string {
	if m.IsNull() || m.IsUnknown() {
		return nil
	}
	out := map[string]string{}
	diags.Append(m.ElementsAs(ctx, &out, false)...)
	return out
}

func iamTags(m map[string]string) []iamtypes.Tag {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]iamtypes.Tag, 0, len(m))
	for _, k := range keys {
		out = append(out, iamtypes.Tag{Key: aws.String(k), Value: aws.String(m[k])})
	}
	return out
}

// updateRoleSettings brings the role's user tags and permissions boundary from
// what the state says to what the plan says.
func updateRoleSettings(ctx context.Context, api *iam.Client, role string, oldTags, newTags map[string]string, oldBoundary, newBoundary string) error {
	drop, changed := tagDiff(oldTags, newTags)
	if len(drop) > 0 {
		if _, err := api.UntagRole(ctx, &iam.UntagRoleInput{RoleName: aws.String(role), TagKeys: drop}); err != nil {
			return fmt.Errorf("removing tags from role %s, %w", role, err)
		}
	}
	if len(changed) > 0 {
		if _, err := api.TagRole(ctx, &iam.TagRoleInput{RoleName: aws.String(role), Tags: iamTags(changed)}); err != nil {
			return fmt.Errorf("tagging role %s, %w", role, err)
		}
	}
	switch {
	case newBoundary == oldBoundary:
	case newBoundary == "":
		if _, err := api.DeleteRolePermissionsBoundary(ctx, &iam.DeleteRolePermissionsBoundaryInput{RoleName: aws.String(role)}); err != nil && !isCode(err, "NoSuchEntity") {
			return fmt.Errorf("removing the permissions boundary of role %s, %w", role, err)
		}
	default:
		if _, err := api.PutRolePermissionsBoundary(ctx, &iam.PutRolePermissionsBoundaryInput{RoleName: aws.String(role), PermissionsBoundary: aws.String(newBoundary)}); err != nil {
			return fmt.Errorf("setting the permissions boundary of role %s, %w", role, err)
		}
	}
	return nil
}

// updateProfileTags brings the instance profile's user tags from what the state says
// to what the plan says, as the role's.
func updateProfileTags(ctx context.Context, api *iam.Client, profile string, oldTags, newTags map[string]string) error {
	drop, changed := tagDiff(oldTags, newTags)
	if len(drop) > 0 {
		if _, err := api.UntagInstanceProfile(ctx, &iam.UntagInstanceProfileInput{InstanceProfileName: aws.String(profile), TagKeys: drop}); err != nil {
			return fmt.Errorf("removing tags from instance profile %s, %w", profile, err)
		}
	}
	if len(changed) > 0 {
		if _, err := api.TagInstanceProfile(ctx, &iam.TagInstanceProfileInput{InstanceProfileName: aws.String(profile), Tags: iamTags(changed)}); err != nil {
			return fmt.Errorf("tagging instance profile %s, %w", profile, err)
		}
	}
	return nil
}

// readRoleSettings puts the role's user tags and boundary into the state's values,
// keeping an unset tags attribute unset when the role has no tags but the defaults.
func readRoleSettings(ctx context.Context, c *Clients, role *iamtypes.Role, tags, tagsAll *types.Map, boundary *types.String, diags *diag.Diagnostics) {
	user := map[string]string{}
	for _, t := range role.Tags {
		if !internalRoleTags[aws.ToString(t.Key)] {
			user[aws.ToString(t.Key)] = aws.ToString(t.Value)
		}
	}
	readTags(ctx, c, user, tags, tagsAll, diags)
	if role.PermissionsBoundary != nil {
		*boundary = types.StringValue(aws.ToString(role.PermissionsBoundary.PermissionsBoundaryArn))
	} else if !boundary.IsNull() {
		*boundary = types.StringNull()
	}
}

// attachRolePolicies attaches the managed policies want and detaches drop.
func attachRolePolicies(ctx context.Context, api *iam.Client, role string, want, drop []string) error {
	for _, arn := range want {
		if _, err := api.AttachRolePolicy(ctx, &iam.AttachRolePolicyInput{RoleName: aws.String(role), PolicyArn: aws.String(arn)}); err != nil {
			return fmt.Errorf("attaching %s, %w", arn, err)
		}
	}
	for _, arn := range drop {
		if _, err := api.DetachRolePolicy(ctx, &iam.DetachRolePolicyInput{RoleName: aws.String(role), PolicyArn: aws.String(arn)}); err != nil && !isCode(err, "NoSuchEntity") {
			return fmt.Errorf("detaching %s, %w", arn, err)
		}
	}
	return nil
}

// attachedRolePolicies are the ARNs of the managed policies attached to the role, sorted.
func attachedRolePolicies(ctx context.Context, api *iam.Client, role string) ([]string, error) {
	var out []string
	pages := iam.NewListAttachedRolePoliciesPaginator(api, &iam.ListAttachedRolePoliciesInput{RoleName: aws.String(role)})
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return nil, err
		}
		for _, p := range page.AttachedPolicies {
			out = append(out, aws.ToString(p.PolicyArn))
		}
	}
	sort.Strings(out)
	return out, nil
}

// detachAllRolePolicies detaches every managed policy, as IAM requires before DeleteRole.
func detachAllRolePolicies(ctx context.Context, api *iam.Client, role string) error {
	attached, err := attachedRolePolicies(ctx, api, role)
	if err != nil {
		return err
	}
	return attachRolePolicies(ctx, api, role, nil, attached)
}
