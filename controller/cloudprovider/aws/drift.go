package aws

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"k8s.io/apimachinery/pkg/util/sets"

	awsv1 "github.com/dovetail-sh/dovetail/controller/apis/aws/v1"
	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/controller/cloudprovider"
)

// Drift reasons.
const (
	DriftAMI            cloudprovider.DriftReason = "AMIDrift"
	DriftSubnet         cloudprovider.DriftReason = "SubnetDrift"
	DriftSecurityGroup  cloudprovider.DriftReason = "SecurityGroupDrift"
	DriftNodeClass      cloudprovider.DriftReason = "NodeClassDrift"
	DriftPlacementGroup cloudprovider.DriftReason = "PlacementGroupDrift"
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
	if pg := placementGroupID(class); pg != "" && nc.Labels[v1.LabelPlacementGroupID] != pg {
		// The group was made again under its name (a new id), or the node predates it.
		return DriftPlacementGroup, nil
	}
	id, err := instanceID(nc.Status.ProviderID)
	if err != nil {
		return "", nil
	}
	inst, err := c.listed.instance(ctx, c, id, nc.CreationTimestamp.Time)
	if err != nil || inst == nil {
		return "", err
	}
	return drift(class, inst), nil
}

// DriftListingTTL is how long one listing of the cluster's instances answers drift
// checks. A disruption pass checks every node; one paginated DescribeInstances per
// pass instead of one call per node keeps a few hundred nodes clear of EC2's
// throttling. What drift compares (image, subnet, groups) does not change on a
// running instance, so a listing this old is as good as a fresh one.
const DriftListingTTL = time.Minute

// instanceListing is the cluster's instances as one listing saw them.
type instanceListing struct {
	mu   sync.Mutex
	at   time.Time
	byID map[string]*ec2types.Instance
}

// listingLag is how long before a listing an instance may have been launched and
// still be missing from it: EC2's describes are eventually consistent.
const listingLag = 30 * time.Second

// instance returns the instance from the listing, listing again once it is older
// than DriftListingTTL. An instance the listing lacks is described on its own and
// kept with the listing, unless its claim was created too late to be in it: then
// nil, no verdict until the next listing, at most DriftListingTTL later. A
// burst's new nodes would otherwise cost one describe each, one after another
// under the lock.
func (l *instanceListing) instance(ctx context.Context, c *CloudProvider, id string, claimCreated time.Time) (*ec2types.Instance, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.byID == nil || c.clock.Since(l.at) >= DriftListingTTL {
		byID := map[string]*ec2types.Instance{}
		err := eachInstance(ctx, c.ec2, &ec2.DescribeInstancesInput{Filters: []ec2types.Filter{
			{Name: aws.String("tag:" + ClusterTag(c.settings.ClusterName)), Values: []string{"owned"}},
			{Name: aws.String("instance-state-name"), Values: []string{"pending", "running", "stopping", "stopped", "shutting-down"}},
		}}, func(inst *ec2types.Instance) { byID[aws.ToString(inst.InstanceId)] = inst })
		if err != nil {
			return nil, fmt.Errorf("listing instances for drift, %w", err)
		}
		l.byID, l.at = byID, c.clock.Now()
	}
	if inst, ok := l.byID[id]; ok {
		return inst, nil
	}
	if claimCreated.After(l.at.Add(-listingLag)) {
		return nil, nil
	}
	inst, err := c.describe(ctx, id)
	if err == nil {
		l.byID[id] = inst
	}
	return inst, err
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
