package iampolicy

import (
	"context"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/iam"
)

// Lookup reads the existing resources AWS consults when it authorizes a call.
// A resource that does not exist is (nil, nil) or empty tags with no error: AWS then
// sees no tags, and a tag-scoped statement does not match.
type Lookup interface {
	InstanceTags(ctx context.Context, id string) (map[string]string, error)
	// LaunchTemplate finds a template by id or name, at a version ("$Latest",
	// "$Default" or a number; empty means the default version).
	LaunchTemplate(ctx context.Context, id, name, version string) (*LaunchTemplate, error)
	InstanceProfile(ctx context.Context, name string) (*InstanceProfile, error)
	RoleARN(ctx context.Context, name string) (string, error)
}

// LaunchTemplate is what launching from a template is authorized on.
type LaunchTemplate struct {
	ID   string
	Name string
	// Tags are the template's own tags (aws:ResourceTag when launching from it).
	Tags map[string]string
	// TagSpecifications are the tags the template puts on what a launch creates, by
	// resource type ("instance", "volume", "network-interface", ...).
	TagSpecifications map[string]map[string]string
	// InstanceProfileName or InstanceProfileARN names the profile whose role a
	// launch passes to EC2.
	InstanceProfileName string
	InstanceProfileARN  string
	SecurityGroupIDs    []string
	SubnetIDs           []string
	ImageID             string
	SnapshotIDs         []string
	// CapacityReservationID is the reservation the template's launches target.
	CapacityReservationID string
}

// InstanceProfile is an IAM instance profile as authorization sees it.
type InstanceProfile struct {
	ARN      string
	Tags     map[string]string
	RoleARNs []string
}

func launchTemplateFromCreate(in *ec2.CreateLaunchTemplateInput) *LaunchTemplate {
	lt := &LaunchTemplate{Name: aws.ToString(in.LaunchTemplateName), Tags: map[string]string{}, TagSpecifications: map[string]map[string]string{}}
	for _, spec := range in.TagSpecifications {
		if spec.ResourceType == ec2types.ResourceTypeLaunchTemplate {
			for _, t := range spec.Tags {
				lt.Tags[aws.ToString(t.Key)] = aws.ToString(t.Value)
			}
		}
	}
	d := in.LaunchTemplateData
	if d == nil {
		return lt
	}
	for _, spec := range d.TagSpecifications {
		tags := lt.TagSpecifications[string(spec.ResourceType)]
		if tags == nil {
			tags = map[string]string{}
			lt.TagSpecifications[string(spec.ResourceType)] = tags
		}
		for _, t := range spec.Tags {
			tags[aws.ToString(t.Key)] = aws.ToString(t.Value)
		}
	}
	if p := d.IamInstanceProfile; p != nil {
		lt.InstanceProfileName, lt.InstanceProfileARN = aws.ToString(p.Name), aws.ToString(p.Arn)
	}
	lt.ImageID = aws.ToString(d.ImageId)
	lt.SecurityGroupIDs = append(lt.SecurityGroupIDs, d.SecurityGroupIds...)
	for _, ni := range d.NetworkInterfaces {
		lt.SecurityGroupIDs = append(lt.SecurityGroupIDs, ni.Groups...)
		if ni.SubnetId != nil {
			lt.SubnetIDs = append(lt.SubnetIDs, *ni.SubnetId)
		}
	}
	for _, b := range d.BlockDeviceMappings {
		if b.Ebs != nil && b.Ebs.SnapshotId != nil {
			lt.SnapshotIDs = append(lt.SnapshotIDs, *b.Ebs.SnapshotId)
		}
	}
	if c := d.CapacityReservationSpecification; c != nil && c.CapacityReservationTarget != nil {
		lt.CapacityReservationID = aws.ToString(c.CapacityReservationTarget.CapacityReservationId)
	}
	return lt
}

// AWSLookup reads resources with clients the recorder does not instrument.
type AWSLookup struct {
	EC2 *ec2.Client
	IAM *iam.Client
}

var _ Lookup = AWSLookup{}

func (l AWSLookup) InstanceTags(ctx context.Context, id string) (map[string]string, error) {
	out, err := l.EC2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{id}})
	if err != nil {
		if strings.Contains(err.Error(), "NotFound") {
			return nil, nil
		}
		return nil, fmt.Errorf("describing instance %s, %w", id, err)
	}
	for _, r := range out.Reservations {
		for _, inst := range r.Instances {
			return ec2Tags(inst.Tags), nil
		}
	}
	return nil, nil
}

func (l AWSLookup) LaunchTemplate(ctx context.Context, id, name, version string) (*LaunchTemplate, error) {
	in := &ec2.DescribeLaunchTemplatesInput{}
	if id != "" {
		in.LaunchTemplateIds = []string{id}
	} else {
		in.LaunchTemplateNames = []string{name}
	}
	out, err := l.EC2.DescribeLaunchTemplates(ctx, in)
	if err != nil {
		if strings.Contains(err.Error(), "NotFound") {
			return nil, nil
		}
		return nil, fmt.Errorf("describing launch template %s%s, %w", id, name, err)
	}
	if len(out.LaunchTemplates) == 0 {
		return nil, nil
	}
	t := out.LaunchTemplates[0]
	lt := &LaunchTemplate{ID: aws.ToString(t.LaunchTemplateId), Name: aws.ToString(t.LaunchTemplateName), Tags: ec2Tags(t.Tags), TagSpecifications: map[string]map[string]string{}}
	if version == "" {
		version = "$Default"
	}
	versions, err := l.EC2.DescribeLaunchTemplateVersions(ctx, &ec2.DescribeLaunchTemplateVersionsInput{LaunchTemplateId: t.LaunchTemplateId, Versions: []string{version}})
	if err != nil {
		return nil, fmt.Errorf("describing version %s of launch template %s, %w", version, lt.ID, err)
	}
	if len(versions.LaunchTemplateVersions) == 0 || versions.LaunchTemplateVersions[0].LaunchTemplateData == nil {
		return lt, nil
	}
	d := versions.LaunchTemplateVersions[0].LaunchTemplateData
	for _, spec := range d.TagSpecifications {
		tags := lt.TagSpecifications[string(spec.ResourceType)]
		if tags == nil {
			tags = map[string]string{}
			lt.TagSpecifications[string(spec.ResourceType)] = tags
		}
		for k, v := range ec2Tags(spec.Tags) {
			tags[k] = v
		}
	}
	if p := d.IamInstanceProfile; p != nil {
		lt.InstanceProfileName, lt.InstanceProfileARN = aws.ToString(p.Name), aws.ToString(p.Arn)
	}
	lt.ImageID = aws.ToString(d.ImageId)
	lt.SecurityGroupIDs = append(lt.SecurityGroupIDs, d.SecurityGroupIds...)
	for _, ni := range d.NetworkInterfaces {
		lt.SecurityGroupIDs = append(lt.SecurityGroupIDs, ni.Groups...)
		if ni.SubnetId != nil {
			lt.SubnetIDs = append(lt.SubnetIDs, *ni.SubnetId)
		}
	}
	for _, b := range d.BlockDeviceMappings {
		if b.Ebs != nil && b.Ebs.SnapshotId != nil {
			lt.SnapshotIDs = append(lt.SnapshotIDs, *b.Ebs.SnapshotId)
		}
	}
	if c := d.CapacityReservationSpecification; c != nil && c.CapacityReservationTarget != nil {
		lt.CapacityReservationID = aws.ToString(c.CapacityReservationTarget.CapacityReservationId)
	}
	return lt, nil
}

func (l AWSLookup) InstanceProfile(ctx context.Context, name string) (*InstanceProfile, error) {
	out, err := l.IAM.GetInstanceProfile(ctx, &iam.GetInstanceProfileInput{InstanceProfileName: aws.String(name)})
	if err != nil {
		if strings.Contains(err.Error(), "NoSuchEntity") {
			return nil, nil
		}
		return nil, fmt.Errorf("getting instance profile %s, %w", name, err)
	}
	p := &InstanceProfile{ARN: aws.ToString(out.InstanceProfile.Arn), Tags: map[string]string{}}
	for _, t := range out.InstanceProfile.Tags {
		p.Tags[aws.ToString(t.Key)] = aws.ToString(t.Value)
	}
	if len(p.Tags) == 0 {
		tags, err := l.IAM.ListInstanceProfileTags(ctx, &iam.ListInstanceProfileTagsInput{InstanceProfileName: aws.String(name)})
		if err != nil {
			return nil, fmt.Errorf("listing the tags of instance profile %s, %w", name, err)
		}
		for _, t := range tags.Tags {
			p.Tags[aws.ToString(t.Key)] = aws.ToString(t.Value)
		}
	}
	for _, r := range out.InstanceProfile.Roles {
		p.RoleARNs = append(p.RoleARNs, aws.ToString(r.Arn))
	}
	return p, nil
}

func (l AWSLookup) RoleARN(ctx context.Context, name string) (string, error) {
	out, err := l.IAM.GetRole(ctx, &iam.GetRoleInput{RoleName: aws.String(name)})
	if err != nil {
		if strings.Contains(err.Error(), "NoSuchEntity") {
			return "", nil
		}
		return "", fmt.Errorf("getting role %s, %w", name, err)
	}
	return aws.ToString(out.Role.Arn), nil
}

func ec2Tags(tags []ec2types.Tag) map[string]string {
	out := map[string]string{}
	for _, t := range tags {
		out[aws.ToString(t.Key)] = aws.ToString(t.Value)
	}
	return out
}
