package provider

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	iamtypes "github.com/aws/aws-sdk-go-v2/service/iam/types"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
)

// CreationTokenTag carries a token unique to one create of a role. IAM has no client
// token: when a CreateRole's response is lost the SDK sends it again, and the retry
// answers EntityAlreadyExists for the role the first attempt made. The token tells
// that role from one someone else made.
const CreationTokenTag = "dovetail.sh/creation-token"

// errRoleExists is a role of the name made by someone else.
type errRoleExists struct{ name, resourceType string }

func (e *errRoleExists) Error() string {
	return fmt.Sprintf("The account already has an IAM role named %q, made outside this configuration. To manage it here, import it: terraform import %s.<name> %s. Otherwise choose another name.",
		e.name, e.resourceType, e.name)
}

// createRole creates the role with a fresh creation token tag. On EntityAlreadyExists
// it reads the role and keeps it only if it is the one this call made: same token, path
// and trust policy. Any other role of the name is an *errRoleExists.
func createRole(ctx context.Context, api *iam.Client, in iam.CreateRoleInput, resourceType string) (*iamtypes.Role, error) {
	token, err := creationToken()
	if err != nil {
		return nil, err
	}
	in.Tags = append(append([]iamtypes.Tag{}, in.Tags...), iamtypes.Tag{Key: aws.String(CreationTokenTag), Value: aws.String(token)})
	out, err := api.CreateRole(ctx, &in)
	if err == nil {
		return out.Role, nil
	}
	if !isCode(err, "EntityAlreadyExists") {
		return nil, err
	}
	got, getErr := api.GetRole(ctx, &iam.GetRoleInput{RoleName: in.RoleName})
	if getErr != nil {
		return nil, fmt.Errorf("reading the existing role %s after %w, %w", aws.ToString(in.RoleName), err, getErr)
	}
	if madeBy(got.Role, &in, token) {
		return got.Role, nil
	}
	return nil, &errRoleExists{name: aws.ToString(in.RoleName), resourceType: resourceType}
}

// madeBy reports whether role is what the request made.
func madeBy(role *iamtypes.Role, in *iam.CreateRoleInput, token string) bool {
	if role == nil {
		return false
	}
	tagged := false
	for _, t := range role.Tags {
		tagged = tagged || (aws.ToString(t.Key) == CreationTokenTag && aws.ToString(t.Value) == token)
	}
	wantPath := aws.ToString(in.Path)
	if wantPath == "" {
		wantPath = "/"
	}
	// IAM returns the trust policy URL-encoded and re-serialized.
	doc, err := url.QueryUnescape(aws.ToString(role.AssumeRolePolicyDocument))
	if err != nil {
		return false
	}
	got, err1 := normalizeJSON(doc)
	want, err2 := normalizeJSON(aws.ToString(in.AssumeRolePolicyDocument))
	return tagged && aws.ToString(role.Path) == wantPath && err1 == nil && err2 == nil && got == want
}

func creationToken() (string, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("making a creation token, %w", err)
	}
	return hex.EncodeToString(b), nil
}

// addCreateRoleError reports a failed createRole; a role someone else made is the
// name's fault.
func addCreateRoleError(diags *diag.Diagnostics, summary string, err error) {
	var exists *errRoleExists
	if errors.As(err, &exists) {
		diags.AddAttributeError(path.Root("name"), fmt.Sprintf("IAM role %s already exists", exists.name), exists.Error())
		return
	}
	diags.AddError(summary, err.Error())
}

// createInstanceProfile creates the profile with a fresh creation token tag and, on
// EntityAlreadyExists, keeps it only if it is the one this call made (see createRole).
func createInstanceProfile(ctx context.Context, api *iam.Client, name, path string, tags map[string]string) error {
	token, err := creationToken()
	if err != nil {
		return err
	}
	_, err = api.CreateInstanceProfile(ctx, &iam.CreateInstanceProfileInput{InstanceProfileName: aws.String(name), Path: aws.String(path),
		Tags: append(iamTags(tags), iamtypes.Tag{Key: aws.String(CreationTokenTag), Value: aws.String(token)})})
	if err == nil || !isCode(err, "EntityAlreadyExists") {
		return err
	}
	got, getErr := api.GetInstanceProfile(ctx, &iam.GetInstanceProfileInput{InstanceProfileName: aws.String(name)})
	if getErr != nil {
		return fmt.Errorf("reading the existing instance profile %s after %w, %w", name, err, getErr)
	}
	for _, t := range got.InstanceProfile.Tags {
		if aws.ToString(t.Key) == CreationTokenTag && aws.ToString(t.Value) == token {
			return nil
		}
	}
	return fmt.Errorf("the account already has an instance profile named %q, made outside this configuration; delete it or choose another name, %w", name, err)
}

// addRoleToInstanceProfile adds the role; a profile holds one role, so a retry of an
// add that took effect answers LimitExceeded, which is success when the role held is
// this one.
func addRoleToInstanceProfile(ctx context.Context, api *iam.Client, profile, role string) error {
	_, err := api.AddRoleToInstanceProfile(ctx, &iam.AddRoleToInstanceProfileInput{InstanceProfileName: aws.String(profile), RoleName: aws.String(role)})
	if err == nil || !isCode(err, "LimitExceeded") {
		return err
	}
	got, getErr := api.GetInstanceProfile(ctx, &iam.GetInstanceProfileInput{InstanceProfileName: aws.String(profile)})
	if getErr != nil {
		return fmt.Errorf("reading instance profile %s after %w, %w", profile, err, getErr)
	}
	if roles := got.InstanceProfile.Roles; len(roles) == 1 && aws.ToString(roles[0].RoleName) == role {
		return nil
	}
	return err
}
