package aws_test

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"k8s.io/apimachinery/pkg/types"

	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/controller/cloudprovider"
	dtaws "github.com/dovetail-sh/dovetail/controller/cloudprovider/aws"
)

func onDemandClaim(name string, uid types.UID) *v1.NodeClaim {
	nc := claim(name, "default", req(v1.LabelInstanceType, "m5.large"), req(v1.LabelCapacityType, v1.CapacityTypeOnDemand))
	nc.UID = uid
	return nc
}

// A second Create of a claim whose instance is running (the first result was never
// recorded) returns that instance instead of launching another.
func TestCreateTwiceFindsTheInstance(t *testing.T) {
	f := newUnitFixture(t)
	nc := onDemandClaim("twice", "uid-1")
	first, err := f.cp.Create(f.ctx, nc)
	if err != nil {
		t.Fatal(err)
	}
	second, err := f.cp.Create(f.ctx, nc)
	if err != nil {
		t.Fatal(err)
	}
	if n := f.ec2.running(); n != 1 {
		t.Errorf("%d instances after two launches of one claim, want 1", n)
	}
	if n := f.ec2.count("CreateFleet"); n != 1 {
		t.Errorf("%d CreateFleet calls, want 1: the second launch should find the first instance", n)
	}
	if second.Status.ProviderID != first.Status.ProviderID || second.Labels[v1.LabelInstanceType] != "m5.large" ||
		second.Status.Allocatable.Cpu().IsZero() || second.Status.ImageID != "ami-amd64" {
		t.Errorf("second launch = %s %v %v %s; want the first instance described as launched (%s)", second.Status.ProviderID,
			second.Labels, second.Status.Allocatable, second.Status.ImageID, first.Status.ProviderID)
	}

	// Another claim is another launch.
	if _, err := f.cp.Create(f.ctx, onDemandClaim("other", "uid-2")); err != nil {
		t.Fatal(err)
	}
	if n := f.ec2.running(); n != 2 {
		t.Errorf("%d instances after a second claim, want 2", n)
	}
}

// Right after a launch DescribeInstances may not show the instance yet; the same
// claim's same request then carries the same ClientToken, and EC2 answers with the
// first fleet.
func TestCreateRetrySendsTheSameClientToken(t *testing.T) {
	f := newUnitFixture(t)
	f.ec2.hide = true
	nc := onDemandClaim("retried", "uid-1")
	first, err := f.cp.Create(f.ctx, nc)
	if err != nil {
		t.Fatal(err)
	}
	second, err := f.cp.Create(f.ctx, nc)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.ec2.fleets) != 2 {
		t.Fatalf("%d CreateFleet calls, want 2 (the instance was invisible to the lookup)", len(f.ec2.fleets))
	}
	a, b := aws.ToString(f.ec2.fleets[0].ClientToken), aws.ToString(f.ec2.fleets[1].ClientToken)
	if a == "" || a != b || len(a) > 64 {
		t.Errorf("ClientTokens %q and %q; want one token of at most 64 characters for both", a, b)
	}
	if n := f.ec2.running(); n != 1 || second.Status.ProviderID != first.Status.ProviderID {
		t.Errorf("%d instances (%s, %s) after a retried launch, want 1", n, first.Status.ProviderID, second.Status.ProviderID)
	}

	if _, err := f.cp.Create(f.ctx, onDemandClaim("retried", "uid-2")); err != nil {
		t.Fatal(err)
	}
	if c := aws.ToString(f.ec2.fleets[2].ClientToken); c == a {
		t.Errorf("a claim with another UID reused the token %q", c)
	}
}

// A launch EC2 answered with a failure inside its response (an instance profile
// still propagating) is over; the retry is a new request, not a replay of the
// failure under the same token until the claim times out.
func TestRetryAfterAnAnsweredFailureIsANewRequest(t *testing.T) {
	f := newUnitFixture(t)
	f.ec2.answerFailures = 1
	nc := onDemandClaim("propagating", "uid-3")
	if _, err := f.cp.Create(f.ctx, nc); err == nil {
		t.Fatal("the injected failure was not reported")
	}
	if _, err := f.cp.Create(f.ctx, nc); err != nil {
		t.Fatalf("the retry replayed the failure: %v", err)
	}
	if a, b := aws.ToString(f.ec2.fleets[0].ClientToken), aws.ToString(f.ec2.fleets[1].ClientToken); a == b {
		t.Errorf("the retry after an answered failure reused the token %q", a)
	}
	if n := f.ec2.running(); n != 1 {
		t.Errorf("%d instances, want 1", n)
	}
}

// Delete asks again only while the instance runs: one already shutting down is
// left to finish (Karpenter's Delete skips it too), and once terminated the claim
// has nothing left to pay for.
func TestDeleteLeavesAShuttingDownInstanceToFinish(t *testing.T) {
	f := newUnitFixture(t)
	id := f.ec2.addInstances(1, "ami-1", "subnet-1")[0]
	nc := &v1.NodeClaim{Status: v1.NodeClaimStatus{ProviderID: dtaws.ProviderIDPrefix + "us-west-2a/" + id}}
	f.ec2.setState(id, ec2types.InstanceStateNameShuttingDown)
	if err := f.cp.Delete(f.ctx, nc); err != nil {
		t.Fatal(err)
	}
	if n := f.ec2.count("TerminateInstances"); n != 0 {
		t.Errorf("%d TerminateInstances calls for an instance already shutting down", n)
	}
	f.ec2.setState(id, ec2types.InstanceStateNameTerminated)
	if err := f.cp.Delete(f.ctx, nc); !cloudprovider.IsNodeClaimNotFound(err) {
		t.Errorf("Delete of a terminated instance: %v; want NodeClaimNotFound", err)
	}
}
