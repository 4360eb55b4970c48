package nodeclass

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	iamtypes "github.com/aws/aws-sdk-go-v2/service/iam/types"

	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
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
// per cluster, region, class and role, stable across restarts so it is found again.
// The role is part of the name because a profile holds one role: a new role gets a
// new profile, and the old profile keeps serving the nodes launched with it.
func InstanceProfileName(cluster, region, class, role string) string {
	h := fnv.New64a()
	_, _ = h.Write([]byte(region + "/" + class + "/" + role))
	return fmt.Sprintf("%s_%d", cluster, h.Sum64())
}

// LegacyInstanceProfileName is the name a class's profile had before the role was
// part of it; such a profile is still recognised, kept while it holds the class's
// role, and removed with the class.
func LegacyInstanceProfileName(cluster, region, class string) string {
	h := fnv.New64a()
	_, _ = h.Write([]byte(region + "/" + class))
	return fmt.Sprintf("%s_%d", cluster, h.Sum64())
}

// InstanceProfileTags are the tags of a profile the controller manages; the shipped
// IAM policy lets it change only profiles that carry them.
func InstanceProfileTags(cluster, region, class string) map[string]string {
	return map[string]string{
		"kubernetes.io/cluster/" + cluster: "owned",
		"eks:eks-cluster-name":             cluster,
		v1.LabelEC2NodeClass:               class,
		v1.LabelTopologyRegion:             region,
	}
}

// InstanceProfile is what the controller needs to know of a profile.
type InstanceProfile struct {
	Name  string
	ARN   string
	Roles []string
	Tags  map[string]string
}

// HasRole says whether role is the profile's only role.
func (p *InstanceProfile) HasRole(role string) bool {
	return len(p.Roles) == 1 && p.Roles[0] == role
}

// OwnedBy says whether the controller made the profile for the class: only those
// are ever changed or deleted.
func (p *InstanceProfile) OwnedBy(cluster, region, class string) bool {
	return p.Tags["kubernetes.io/cluster/"+cluster] == "owned" && p.Tags[v1.LabelEC2NodeClass] == class && p.Tags[v1.LabelTopologyRegion] == region
}

// GetInstanceProfile returns the profile, or nil when it does not exist.
func GetInstanceProfile(ctx context.Context, api IAMAPI, name string) (*InstanceProfile, error) {
	out, err := api.GetInstanceProfile(ctx, &iam.GetInstanceProfileInput{InstanceProfileName: aws.String(name)})
	if isNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("getting instance profile %s, %w", name, err)
	}
	p := &InstanceProfile{Name: name, ARN: aws.ToString(out.InstanceProfile.Arn), Tags: map[string]string{}}
	for _, r := range out.InstanceProfile.Roles {
		p.Roles = append(p.Roles, aws.ToString(r.RoleName))
	}
	for _, t := range out.InstanceProfile.Tags {
		p.Tags[aws.ToString(t.Key)] = aws.ToString(t.Value)
	}
	return p, nil
}

// EnsureInstanceProfile creates the profile (tagged for the cluster and class) if it
// is missing and makes role its only role. A profile it created is deleted again
// when the role cannot be added, so a bad role leaves nothing behind. Callers pass a
// profile no node uses with another role: a name derived from the role.
func EnsureInstanceProfile(ctx context.Context, api IAMAPI, name, role string, tags map[string]string) error {
	if role == "" {
		return fmt.Errorf("spec.role is empty; set spec.role to the nodes' IAM role, or spec.instanceProfile to an existing instance profile")
	}
	profile, err := GetInstanceProfile(ctx, api, name)
	if err != nil {
		return err
	}
	created := false
	if profile == nil {
		var ts []iamtypes.Tag
		for k, v := range tags {
			ts = append(ts, iamtypes.Tag{Key: aws.String(k), Value: aws.String(v)})
		}
		if _, err := api.CreateInstanceProfile(ctx, &iam.CreateInstanceProfileInput{InstanceProfileName: aws.String(name), Tags: ts}); err != nil {
			return fmt.Errorf("creating instance profile %s, %w", name, err)
		}
		profile, created = &InstanceProfile{Name: name}, true
	}
	hasRole := false
	for _, r := range profile.Roles {
		if r == role {
			hasRole = true
			continue
		}
		if _, err := api.RemoveRoleFromInstanceProfile(ctx, &iam.RemoveRoleFromInstanceProfileInput{InstanceProfileName: aws.String(name), RoleName: aws.String(r)}); err != nil {
			return fmt.Errorf("removing role %s from instance profile %s, %w", r, name, err)
		}
	}
	if hasRole {
		return nil
	}
	if _, err := api.AddRoleToInstanceProfile(ctx, &iam.AddRoleToInstanceProfileInput{InstanceProfileName: aws.String(name), RoleName: aws.String(role)}); err != nil {
		if created {
			if _, delErr := api.DeleteInstanceProfile(ctx, &iam.DeleteInstanceProfileInput{InstanceProfileName: aws.String(name)}); delErr != nil && !isNotFound(delErr) {
				err = errors.Join(err, fmt.Errorf("deleting the empty instance profile %s again, %w", name, delErr))
			}
		}
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
	profile, err := GetInstanceProfile(ctx, api, name)
	if err != nil || profile == nil {
		return err
	}
	for _, r := range profile.Roles {
		if _, err := api.RemoveRoleFromInstanceProfile(ctx, &iam.RemoveRoleFromInstanceProfileInput{InstanceProfileName: aws.String(name), RoleName: aws.String(r)}); err != nil && !isNotFound(err) {
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
