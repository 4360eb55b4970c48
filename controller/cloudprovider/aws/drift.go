package aws

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/aws"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"k8s.io/apimachinery/pkg/util/sets"

	awsv1 "github.com/dovetail-sh/dovetail/controller/apis/aws/v1"
	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/controller/cloudprovider"
)

// Drift reasons.
const (
	DriftAMI           cloudprovider.DriftReason = "AMIDrift"
	DriftSubnet        cloudprovider.DriftReason = "SubnetDrift"
	DriftSecurityGroup cloudprovider.DriftReason = "SecurityGroupDrift"
	DriftNodeClass     cloudprovider.DriftReason = "NodeClassDrift"
)

// IsDrifted compares the claim's instance with what its class resolves to now.
func (c *CloudProvider) IsDrifted(ctx context.Context, nc *v1.NodeClaim) (cloudprovider.DriftReason, error) {
	class, err := c.nodeClass(ctx, nc.Spec.NodeClassRef)
	if err != nil {
		// An unready class cannot say what nodes should look like; no verdict.
		return "", nil
	}
	if h, ok := nc.Annotations[awsv1.AnnotationEC2NodeClassHash]; ok &&
		nc.Annotations[awsv1.AnnotationEC2NodeClassHashVersion] == awsv1.EC2NodeClassHashVersion && h != class.Hash() {
		return DriftNodeClass, nil
	}
	id, err := instanceID(nc.Status.ProviderID)
	if err != nil {
		return "", nil
	}
	inst, err := c.describe(ctx, id)
	if err != nil {
		return "", err
	}
	return drift(class, inst), nil
}

// drift compares an instance with the class's resolved images, subnets and groups.
func drift(class *awsv1.EC2NodeClass, inst *ec2types.Instance) cloudprovider.DriftReason {
	images := sets.New[string]()
	for _, a := range class.Status.AMIs {
		images.Insert(a.ID)
	}
	if len(images) > 0 && !images.Has(aws.ToString(inst.ImageId)) {
		return DriftAMI
	}
	subnets := sets.New[string]()
	for _, s := range class.Status.Subnets {
		subnets.Insert(s.ID)
	}
	if len(subnets) > 0 && inst.SubnetId != nil && !subnets.Has(*inst.SubnetId) {
		return DriftSubnet
	}
	want, have := sets.New[string](), sets.New[string]()
	for _, g := range class.Status.SecurityGroups {
		want.Insert(g.ID)
	}
	for _, g := range inst.SecurityGroups {
		have.Insert(aws.ToString(g.GroupId))
	}
	if len(want) > 0 && len(have) > 0 && !want.Equal(have) {
		return DriftSecurityGroup
	}
	return ""
}
