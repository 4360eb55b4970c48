package aws

import (
	"context"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	awsv1 "github.com/dovetail-sh/dovetail/controller/apis/aws/v1"
	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/controller/cloudprovider"
)

// instanceID reads the instance id from aws:///<zone>/<id>.
func instanceID(providerID string) (string, error) {
	rest, ok := strings.CutPrefix(providerID, ProviderIDPrefix)
	if !ok {
		return "", fmt.Errorf("providerID %q is not an AWS one (aws:///<zone>/<instance-id>)", providerID)
	}
	_, id, ok := strings.Cut(rest, "/")
	if !ok || !strings.HasPrefix(id, "i-") {
		return "", fmt.Errorf("providerID %q has no instance id", providerID)
	}
	return id, nil
}

// describe returns the instance, or a NodeClaimNotFoundError once it is terminated.
// Concurrent describes share one DescribeInstances call.
func (c *CloudProvider) describe(ctx context.Context, id string) (*ec2types.Instance, error) {
	inst, err := c.describer.get(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("describing instance %s, %w", id, err)
	}
	if inst == nil {
		return nil, cloudprovider.NewNodeClaimNotFoundError(fmt.Errorf("instance %s not found", id))
	}
	if inst.State != nil && inst.State.Name == ec2types.InstanceStateNameTerminated {
		return nil, cloudprovider.NewNodeClaimNotFoundError(fmt.Errorf("instance %s is terminated", id))
	}
	return inst, nil
}

// Delete terminates the claim's instance. It reports NodeClaimNotFound once the
// instance is terminated, so the caller knows nothing is left to pay for. An
// instance already shutting down is not asked again, and terminations made
// together share one call, as Karpenter's are.
func (c *CloudProvider) Delete(ctx context.Context, nc *v1.NodeClaim) error {
	id, err := instanceID(nc.Status.ProviderID)
	if err != nil {
		return cloudprovider.NewNodeClaimNotFoundError(err)
	}
	inst, err := c.describe(ctx, id)
	if err != nil {
		if reservation := nc.Labels[v1.LabelCapacityReservationID]; reservation != "" && cloudprovider.IsNodeClaimNotFound(err) {
			c.reserved.terminated(reservation, id)
		}
		return err
	}
	if inst.State != nil && inst.State.Name == ec2types.InstanceStateNameShuttingDown {
		return nil
	}
	if _, err := c.terminator.get(ctx, id); err != nil {
		if isCode(err, "InvalidInstanceID.NotFound") {
			return cloudprovider.NewNodeClaimNotFoundError(err)
		}
		InstanceTerminationFailures.WithLabelValues(nc.Labels[v1.LabelTopologyZone], nc.Labels[v1.LabelZoneID]).Inc()
		return fmt.Errorf("terminating instance %s, %w", id, err)
	}
	return nil
}

// Reboot reboots the claim's instance in place (RebootForRepair), as Karpenter's
// does: a gone instance is NodeClaimNotFound, a call the policy denies a refusal
// retrying cannot change, anything else retried.
func (c *CloudProvider) Reboot(ctx context.Context, nc *v1.NodeClaim, operationID string) error {
	id, err := instanceID(nc.Status.ProviderID)
	if err != nil {
		return err
	}
	if _, err := c.describe(ctx, id); err != nil {
		return err
	}
	if _, err := c.ec2.RebootInstances(ctx, &ec2.RebootInstancesInput{InstanceIds: []string{id}}); err != nil {
		switch {
		case isCode(err, "InvalidInstanceID.NotFound"):
			return cloudprovider.NewNodeClaimNotFoundError(err)
		case isCode(err, "UnauthorizedOperation"):
			return &cloudprovider.NodeRebootFailedError{Err: fmt.Errorf("rebooting instance %s (operation %s), %w", id, operationID, err)}
		}
		return fmt.Errorf("rebooting instance %s (operation %s), %w", id, operationID, err)
	}
	return nil
}

// Get describes the instance behind a providerID as a NodeClaim.
func (c *CloudProvider) Get(ctx context.Context, providerID string) (*v1.NodeClaim, error) {
	id, err := instanceID(providerID)
	if err != nil {
		return nil, cloudprovider.NewNodeClaimNotFoundError(err)
	}
	inst, err := c.describe(ctx, id)
	if err != nil {
		return nil, err
	}
	return c.toNodeClaim(ctx, inst), nil
}

// List returns the cluster's instances that are not terminated.
func (c *CloudProvider) List(ctx context.Context) ([]*v1.NodeClaim, error) {
	var out []*v1.NodeClaim
	err := eachInstance(ctx, c.ec2, &ec2.DescribeInstancesInput{Filters: []ec2types.Filter{
		{Name: aws.String("tag:" + ClusterTag(c.settings.ClusterName)), Values: []string{"owned"}},
		{Name: aws.String("tag-key"), Values: []string{TagNodePool}},
		{Name: aws.String("instance-state-name"), Values: []string{"pending", "running", "stopping", "stopped", "shutting-down"}},
	}}, func(inst *ec2types.Instance) { out = append(out, c.toNodeClaim(ctx, inst)) })
	if err != nil {
		return nil, fmt.Errorf("listing instances, %w", err)
	}
	return out, nil
}

func (c *CloudProvider) toNodeClaim(ctx context.Context, inst *ec2types.Instance) *v1.NodeClaim {
	nc := &v1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{}, Annotations: map[string]string{}}}
	zone := ""
	if inst.Placement != nil {
		zone = aws.ToString(inst.Placement.AvailabilityZone)
	}
	for _, t := range inst.Tags {
		switch aws.ToString(t.Key) {
		case TagNodeClaim:
			nc.Name = aws.ToString(t.Value)
		case TagNodePool:
			nc.Labels[v1.LabelNodePool] = aws.ToString(t.Value)
		case TagNodeClass:
			nc.Spec.NodeClassRef = &v1.NodeClassReference{Group: awsv1.Group, Kind: "EC2NodeClass", Name: aws.ToString(t.Value)}
		}
	}
	capacityType := v1.CapacityTypeOnDemand
	if inst.InstanceLifecycle == ec2types.InstanceLifecycleTypeSpot {
		capacityType = v1.CapacityTypeSpot
	}
	nc.Labels[v1.LabelInstanceType] = string(inst.InstanceType)
	nc.Labels[v1.LabelTopologyZone] = zone
	nc.Labels[v1.LabelCapacityType] = capacityType
	if f, err := c.types.List(ctx); err == nil {
		if e, ok := f.Find(string(inst.InstanceType)); ok {
			for k, v := range e.NodeLabels() {
				nc.Labels[k] = v
			}
			nc.Status.Capacity = e.Capacity()
		}
	}
	if inst.LaunchTime != nil {
		nc.CreationTimestamp = metav1.NewTime(*inst.LaunchTime)
	}
	nc.Status.ProviderID = ProviderIDPrefix + zone + "/" + aws.ToString(inst.InstanceId)
	nc.Status.ImageID = aws.ToString(inst.ImageId)
	return nc
}
