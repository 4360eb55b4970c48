package nodeclass

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	iamtypes "github.com/aws/aws-sdk-go-v2/service/iam/types"
)

// IAMAPI is the part of IAM instance-profile management uses.
type IAMAPI interface {
	GetInstanceProfile(context.Context, *iam.GetInstanceProfileInput, ...func(*iam.Options)) (*iam.GetInstanceProfileOutput, error)
	CreateInstanceProfile(context.Context, *iam.CreateInstanceProfileInput, ...func(*iam.Options)) (*iam.CreateInstanceProfileOutput, error)
	AddRoleToInstanceProfile(context.Context, *iam.AddRoleToInstanceProfileInput, ...func(*iam.Options)) (*iam.AddRoleToInstanceProfileOutput, error)
	RemoveRoleFromInstanceProfile(context.Context, *iam.RemoveRoleFromInstanceProfileInput, ...func(*iam.Options)) (*iam.RemoveRoleFromInstanceProfileOutput, error)
	DeleteInstanceProfile(context.Context, *iam.DeleteInstanceProfileInput, ...func(*iam.Options)) (*iam.DeleteInstanceProfileOutput, error)
}

// InstanceProfileName is the profile the controller manages for a class's role: one
// per cluster, region and class, stable across restarts so it is found again.
func InstanceProfileName(cluster, region, class string) string {
	h := fnv.New64a()
	_, _ = h.Write([]byte(region + "/" + class))
	return fmt.Sprintf("%s_%d", cluster, h.Sum64())
}

// EnsureInstanceProfile creates the profile (tagged for the cluster and class) if it
// is missing and makes role its only role.
func EnsureInstanceProfile(ctx context.Context, api IAMAPI, name, role string, tags map[string]string) error {
	out, err := api.GetInstanceProfile(ctx, &iam.GetInstanceProfileInput{InstanceProfileName: aws.String(name)})
	var profile *iamtypes.InstanceProfile
	switch {
	case err == nil:
		profile = out.InstanceProfile
	case isNotFound(err):
		var ts []iamtypes.Tag
		for k, v := range tags {
			ts = append(ts, iamtypes.Tag{Key: aws.String(k), Value: aws.String(v)})
		}
		created, err := api.CreateInstanceProfile(ctx, &iam.CreateInstanceProfileInput{InstanceProfileName: aws.String(name), Tags: ts})
		if err != nil {
			return fmt.Errorf("creating instance profile %s, %w", name, err)
		}
		profile = created.InstanceProfile
	default:
		return fmt.Errorf("getting instance profile %s, %w", name, err)
	}
	for _, r := range profile.Roles {
		if aws.ToString(r.RoleName) == role {
			return nil
		}
		if _, err := api.RemoveRoleFromInstanceProfile(ctx, &iam.RemoveRoleFromInstanceProfileInput{InstanceProfileName: aws.String(name), RoleName: r.RoleName}); err != nil {
			return fmt.Errorf("removing role %s from instance profile %s, %w", aws.ToString(r.RoleName), name, err)
		}
	}
	if _, err := api.AddRoleToInstanceProfile(ctx, &iam.AddRoleToInstanceProfileInput{InstanceProfileName: aws.String(name), RoleName: aws.String(role)}); err != nil {
		if isNotFound(err) {
			return fmt.Errorf("role %q does not exist; create the node role (dovetail_node_role) or fix spec.role: %w", role, err)
		}
		return fmt.Errorf("adding role %s to instance profile %s, %w", role, name, err)
	}
	return nil
}

// DeleteInstanceProfile removes the profile's roles and the profile; a missing
// profile is not an error.
func DeleteInstanceProfile(ctx context.Context, api IAMAPI, name string) error {
	out, err := api.GetInstanceProfile(ctx, &iam.GetInstanceProfileInput{InstanceProfileName: aws.String(name)})
	if err != nil {
		if isNotFound(err) {
			return nil
		}
		return fmt.Errorf("getting instance profile %s, %w", name, err)
	}
	for _, r := range out.InstanceProfile.Roles {
		if _, err := api.RemoveRoleFromInstanceProfile(ctx, &iam.RemoveRoleFromInstanceProfileInput{InstanceProfileName: aws.String(name), RoleName: r.RoleName}); err != nil && !isNotFound(err) {
			return fmt.Errorf("removing role from instance profile %s, %w", name, err)
		}
	}
	if _, err := api.DeleteInstanceProfile(ctx, &iam.DeleteInstanceProfileInput{InstanceProfileName: aws.String(name)}); err != nil && !isNotFound(err) {
		return fmt.Errorf("deleting instance profile %s, %w", name, err)
	}
	return nil
}

func isNotFound(err error) bool {
	var nse *iamtypes.NoSuchEntityException
	return errors.As(err, &nse)
}
