package aws

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/smithy-go"
)

// describeCounter answers DescribeInstances by instance IDs from a fixed set, as
// EC2 does: one unknown ID fails the whole call. It counts calls.
type describeCounter struct {
	mu    sync.Mutex
	calls int
	known map[string]bool
}

func (d *describeCounter) DescribeInstances(_ context.Context, in *ec2.DescribeInstancesInput, _ ...func(*ec2.Options)) (*ec2.DescribeInstancesOutput, error) {
	d.mu.Lock()
	d.calls++
	d.mu.Unlock()
	if len(in.InstanceIds) == 0 || len(in.Filters) > 0 {
		return nil, fmt.Errorf("unexpected input %+v", in)
	}
	var found []ec2types.Instance
	for _, id := range in.InstanceIds {
		if !d.known[id] {
			return nil, &smithy.GenericAPIError{Code: "InvalidInstanceID.NotFound", Message: "The instance ID '" + id + "' does not exist"}
		}
		found = append(found, ec2types.Instance{InstanceId: aws.String(id)})
	}
	return &ec2.DescribeInstancesOutput{Reservations: []ec2types.Reservation{{Instances: found}}}, nil
}

// Describes made together share one call; when EC2 refuses it for an instance it
// does not know, each is asked alone, so that one is reported missing and the
// others found.
func TestConcurrentDescribesShareOneCall(t *testing.T) {
	api := &describeCounter{known: map[string]bool{}}
	for i := 0; i < 50; i++ {
		api.known[fmt.Sprintf("i-%d", i)] = true
	}
	d := newInstanceDescriber(api)
	var wg sync.WaitGroup
	errs := make(chan error, 51)
	for i := 0; i <= 50; i++ {
		wg.Add(1)
		go func(id string) {
			defer wg.Done()
			inst, err := d.get(context.Background(), id)
			switch {
			case err != nil:
				errs <- err
			case id == "i-50" && inst != nil:
				errs <- fmt.Errorf("%s is unknown to EC2 but was found", id)
			case id != "i-50" && (inst == nil || aws.ToString(inst.InstanceId) != id):
				errs <- fmt.Errorf("%s: got %v", id, inst)
			}
		}(fmt.Sprintf("i-%d", i))
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	// One shared call, refused for the unknown instance, then one each.
	if api.calls > 2+51 {
		t.Errorf("%d DescribeInstances calls for 51 concurrent describes", api.calls)
	}
	api.calls = 0
	var found sync.WaitGroup
	for i := 0; i < 50; i++ {
		found.Add(1)
		go func(id string) {
			defer found.Done()
			if inst, err := d.get(context.Background(), id); err != nil || inst == nil {
				t.Errorf("%s: %v, %v", id, inst, err)
			}
		}(fmt.Sprintf("i-%d", i))
	}
	found.Wait()
	if api.calls > 2 {
		t.Errorf("%d DescribeInstances calls for 50 concurrent describes of known instances; want them batched", api.calls)
	}
}

// taggedInstances answers DescribeInstances by the claim-name tag filter, as EC2
// does (at most 200 filter values a call), from instances per claim; fail
// refuses every call. It counts calls.
type taggedInstances struct {
	mu       sync.Mutex
	calls    int
	fail     error
	instance map[string][]ec2types.Instance
}

func (d *taggedInstances) DescribeInstances(_ context.Context, in *ec2.DescribeInstancesInput, _ ...func(*ec2.Options)) (*ec2.DescribeInstancesOutput, error) {
	d.mu.Lock()
	d.calls++
	d.mu.Unlock()
	if d.fail != nil {
		return nil, d.fail
	}
	if len(in.InstanceIds) > 0 || aws.ToInt32(in.MaxResults) == 0 {
		return nil, fmt.Errorf("unexpected input %+v", in)
	}
	values := 0
	for _, f := range in.Filters {
		values += len(f.Values)
	}
	if values > 200 {
		return nil, &smithy.GenericAPIError{Code: "FilterLimitExceeded", Message: "The maximum number of filter values specified on a single call is 200"}
	}
	var found []ec2types.Instance
	for _, f := range in.Filters {
		if aws.ToString(f.Name) == "tag:"+TagNodeClaim {
			for _, name := range f.Values {
				found = append(found, d.instance[name]...)
			}
		}
	}
	return &ec2.DescribeInstancesOutput{Reservations: []ec2types.Reservation{{Instances: found}}}, nil
}

// The check every launch makes first is shared by a burst of launches: each
// claim gets its earliest instance, a claim with none gets nil, and a refused
// call is every waiter's error (asking again one by one would only add to a
// throttle).
func TestConcurrentLaunchChecksShareOneCall(t *testing.T) {
	early, late := time.Unix(100, 0), time.Unix(200, 0)
	api := &taggedInstances{instance: map[string][]ec2types.Instance{}}
	for i := 0; i < 240; i++ {
		name := fmt.Sprintf("claim-%d", i)
		api.instance[name] = []ec2types.Instance{
			{InstanceId: aws.String("i-late-" + name), LaunchTime: &late, Tags: []ec2types.Tag{{Key: aws.String(TagNodeClaim), Value: aws.String(name)}}},
			{InstanceId: aws.String("i-early-" + name), LaunchTime: &early, Tags: []ec2types.Tag{{Key: aws.String(TagNodeClaim), Value: aws.String(name)}}},
		}
	}
	lookup := newLaunchedLookup(api, "c")
	var wg sync.WaitGroup
	for i := 0; i < 250; i++ {
		wg.Add(1)
		go func(name string) {
			defer wg.Done()
			inst, err := lookup.get(context.Background(), name)
			switch {
			case err != nil:
				t.Errorf("%s: %v", name, err)
			case api.instance[name] == nil && inst != nil:
				t.Errorf("%s has no instance but got %s", name, aws.ToString(inst.InstanceId))
			case api.instance[name] != nil && (inst == nil || aws.ToString(inst.InstanceId) != "i-early-"+name):
				t.Errorf("%s: got %v, want its earliest instance", name, inst)
			}
		}(fmt.Sprintf("claim-%d", i))
	}
	wg.Wait()
	// 250 claims are two calls within EC2's 200 filter values, or a few more if
	// they straddle windows.
	if api.calls > 4 {
		t.Errorf("%d DescribeInstances calls for 250 concurrent launch checks; want them batched", api.calls)
	}

	api.calls, api.fail = 0, &smithy.GenericAPIError{Code: "RequestLimitExceeded", Message: "Request limit exceeded."}
	var refused sync.WaitGroup
	for i := 0; i < 20; i++ {
		refused.Add(1)
		go func(name string) {
			defer refused.Done()
			if _, err := lookup.get(context.Background(), name); err == nil {
				t.Errorf("%s: a refused call must fail the check, not report no instance", name)
			}
		}(fmt.Sprintf("claim-%d", i))
	}
	refused.Wait()
	if api.calls > 2 {
		t.Errorf("%d calls for 20 checks refused together; want no call per claim", api.calls)
	}
}
