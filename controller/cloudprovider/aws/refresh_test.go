package aws_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	dtaws "github.com/dovetail-sh/dovetail/controller/cloudprovider/aws"
)

var throttled = apiError("RequestLimitExceeded", "Request limit exceeded.")

// A failed refresh serves the last good list, and provisioning goes on.
func TestInstanceTypeRefreshFailureServesTheLastList(t *testing.T) {
	f := newUnitFixture(t)
	provider := dtaws.NewInstanceTypeProvider(f.ec2, "us-west-2", dtaws.Settings{}, f.clock)
	first, err := provider.List(f.ctx)
	if err != nil || len(first.InstanceTypes) != 3 {
		t.Fatalf("first List = %v, %v", first, err)
	}

	errorsBefore := testutil.ToFloat64(dtaws.InstanceTypeRefreshErrors)
	f.clock.Step(dtaws.InstanceTypeTTL)
	for _, action := range []string{"DescribeInstanceTypes", "DescribeInstanceTypeOfferings"} {
		f.ec2.setFail(action, throttled)
		got, err := provider.List(f.ctx)
		if err != nil || got != first {
			t.Errorf("List while %s fails = %v, %v; want the last good list", action, got, err)
		}
		f.ec2.setFail(action, nil)
		f.clock.Step(dtaws.InstanceTypeRetry)
	}
	if n := testutil.ToFloat64(dtaws.InstanceTypeRefreshErrors) - errorsBefore; n != 2 {
		t.Errorf("refresh errors counted %v, want 2", n)
	}

	// After a failure EC2 is not asked again on every call.
	f.ec2.setFail("DescribeInstanceTypes", throttled)
	if _, err := provider.List(f.ctx); err != nil {
		t.Fatal(err)
	}
	calls := f.ec2.count("DescribeInstanceTypes")
	for i := 0; i < 10; i++ {
		if _, err := provider.List(f.ctx); err != nil {
			t.Fatal(err)
		}
	}
	if n := f.ec2.count("DescribeInstanceTypes") - calls; n != 0 {
		t.Errorf("%d more DescribeInstanceTypes calls within the retry interval, want 0", n)
	}
	f.ec2.setFail("DescribeInstanceTypes", nil)
	f.clock.Step(dtaws.InstanceTypeRetry)
	if got, err := provider.List(f.ctx); err != nil || got == first || f.ec2.count("DescribeInstanceTypes") != calls+1 {
		t.Errorf("after the retry interval List = %v, %v with %d calls; want a fresh list", got, err, f.ec2.count("DescribeInstanceTypes")-calls)
	}

	// With nothing ever loaded there is nothing to serve.
	empty := dtaws.NewInstanceTypeProvider(f.ec2, "us-west-2", dtaws.Settings{}, f.clock)
	f.ec2.setFail("DescribeInstanceTypes", throttled)
	if _, err := empty.List(f.ctx); err == nil {
		t.Error("List with no list ever loaded and EC2 failing returned no error")
	}
}

func TestLaunchWhileInstanceTypeRefreshFails(t *testing.T) {
	f := newUnitFixture(t)
	if _, err := f.cp.Create(f.ctx, onDemandClaim("before", "uid-1")); err != nil {
		t.Fatal(err)
	}
	f.clock.Step(dtaws.InstanceTypeTTL)
	f.ec2.setFail("DescribeInstanceTypes", throttled)
	launched, err := f.cp.Create(f.ctx, onDemandClaim("during", "uid-2"))
	if err != nil {
		t.Fatalf("a launch while the instance-type refresh fails: %v; want it served from the last list", err)
	}
	if launched.Labels[v1.LabelInstanceType] != "m5.large" {
		t.Errorf("launched %s", launched.Labels[v1.LabelInstanceType])
	}
}
