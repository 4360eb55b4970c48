package status_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dovetail-sh/dovetail/controller/cloudprovider/aws/nodeclass"
	"github.com/dovetail-sh/dovetail/controller/controllers/ec2nodeclass/status"
	"github.com/dovetail-sh/dovetail/tests/testenv"
)

// countingEC2 is the emulator's EC2, counting the selector lookups.
type countingEC2 struct {
	status.EC2API
	subnets, groups atomic.Int32
}

func (c *countingEC2) DescribeSubnets(ctx context.Context, in *ec2.DescribeSubnetsInput, opts ...func(*ec2.Options)) (*ec2.DescribeSubnetsOutput, error) {
	c.subnets.Add(1)
	return c.EC2API.DescribeSubnets(ctx, in, opts...)
}

func (c *countingEC2) DescribeSecurityGroups(ctx context.Context, in *ec2.DescribeSecurityGroupsInput, opts ...func(*ec2.Options)) (*ec2.DescribeSecurityGroupsOutput, error) {
	c.groups.Add(1)
	return c.EC2API.DescribeSecurityGroups(ctx, in, opts...)
}

// Security groups are resolved on their own interval (Karpenter v1.15's
// securityGroupRefreshInterval, 1m by default) and the rest of a Ready class on the
// AMI/subnet interval: a new security group appears in status within a minute,
// without the images and subnets being looked up every minute too. A change to the
// class resolves everything at once.
func TestSecurityGroupsRefreshOnTheirOwnInterval(t *testing.T) {
	if testing.Short() {
		t.Skip("starts kube-apiserver and moto_server")
	}
	api := testenv.StartAPIServer(t)
	clients := testenv.AWSClients(t, testenv.StartMoto(t), "us-west-2")
	ctx := context.Background()
	seeded := testenv.SeedAWS(t, ctx, clients, "demo", "10.31", "us-west-2a")
	clk := clocktesting.NewFakeClock(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC))
	ec2API := &countingEC2{EC2API: clients.EC2}
	amis := &nodeclass.AMIResolver{EC2: clients.EC2, SSM: clients.SSM, SSMPrefix: testenv.SSMPrefix, KubernetesVersion: "1.33"}
	ctrl := status.NewController(api.Client, ec2API, amis, clients.IAM, "demo", "us-west-2", clk)
	ctrl.Refresh = 5 * time.Minute
	kube := api.Client
	nc := class("default", nil)
	if err := kube.Create(ctx, nc); err != nil {
		t.Fatal(err)
	}
	reconcile := func() time.Duration {
		t.Helper()
		if err := kube.Get(ctx, client.ObjectKeyFromObject(nc), nc); err != nil {
			t.Fatal(err)
		}
		res, err := ctrl.Reconcile(ctx, nc)
		if err != nil {
			t.Fatal(err)
		}
		if err := kube.Get(ctx, client.ObjectKeyFromObject(nc), nc); err != nil {
			t.Fatal(err)
		}
		return res.RequeueAfter
	}
	calls := func() (subnets, groups int32) { return ec2API.subnets.Load(), ec2API.groups.Load() }

	if after := reconcile(); after != status.DefaultSecurityGroupRefresh {
		t.Errorf("a Ready class is looked at again after %s, want %s (the security groups')", after, status.DefaultSecurityGroupRefresh)
	}
	if s, g := calls(); s != 1 || g != 1 {
		t.Fatalf("first reconcile: %d DescribeSubnets, %d DescribeSecurityGroups; want 1 and 1", s, g)
	}
	// The status patch wakes the controller again at once: nothing is due.
	reconcile()
	if s, g := calls(); s != 1 || g != 1 {
		t.Errorf("a reconcile before anything is due asked EC2 (%d subnets, %d groups calls); want none", s-1, g-1)
	}

	// A group tagged for discovery after the class was resolved.
	created, err := clients.EC2.CreateSecurityGroup(ctx, &ec2.CreateSecurityGroupInput{GroupName: aws.String("late"), Description: aws.String("late"), VpcId: aws.String(seeded.VPC),
		TagSpecifications: []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeSecurityGroup, Tags: []ec2types.Tag{{Key: aws.String("karpenter.sh/discovery"), Value: aws.String("demo")}}}}})
	if err != nil {
		t.Fatal(err)
	}
	for minute := 1; minute <= 4; minute++ {
		clk.Step(time.Minute)
		reconcile()
	}
	if s, g := calls(); s != 1 || g != 5 {
		t.Errorf("after 4 minutes: %d DescribeSubnets, %d DescribeSecurityGroups; want 1 (every 5m) and 5 (every minute)", s, g)
	}
	found := false
	for _, sg := range nc.Status.SecurityGroups {
		found = found || sg.ID == aws.ToString(created.GroupId)
	}
	if !found {
		t.Errorf("status.securityGroups %+v lacks %s, tagged 4 minutes ago", nc.Status.SecurityGroups, aws.ToString(created.GroupId))
	}
	clk.Step(time.Minute)
	reconcile()
	if s, g := calls(); s != 2 || g != 6 {
		t.Errorf("at 5 minutes: %d DescribeSubnets, %d DescribeSecurityGroups; want 2 and 6", s, g)
	}

	// A change to the class resolves it whole, whatever is due.
	nc.Spec.Tags = map[string]string{"team": "a"}
	if err := kube.Update(ctx, nc); err != nil {
		t.Fatal(err)
	}
	reconcile()
	if s, g := calls(); s != 3 || g != 7 {
		t.Errorf("after a spec change: %d DescribeSubnets, %d DescribeSecurityGroups; want 3 and 7", s, g)
	}
}
