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

// terminateCounter answers TerminateInstances as EC2 does: one instance it will
// not terminate fails the whole call, and one it dropped (silent) is missing
// from the answer. It counts calls and the IDs each asked for.
type terminateCounter struct {
	mu        sync.Mutex
	calls     []int
	protected map[string]bool
	silent    map[string]bool
}

func (f *terminateCounter) TerminateInstances(_ context.Context, in *ec2.TerminateInstancesInput, _ ...func(*ec2.Options)) (*ec2.TerminateInstancesOutput, error) {
	f.mu.Lock()
	f.calls = append(f.calls, len(in.InstanceIds))
	f.mu.Unlock()
	if len(in.InstanceIds) > 1000 {
		return nil, &smithy.GenericAPIError{Code: "InvalidParameterValue", Message: "too many instance IDs"}
	}
	out := &ec2.TerminateInstancesOutput{}
	for _, id := range in.InstanceIds {
		if f.protected[id] {
			return nil, &smithy.GenericAPIError{Code: "OperationNotPermitted", Message: "The instance '" + id + "' may not be terminated"}
		}
		if f.silent[id] {
			continue
		}
		out.TerminatingInstances = append(out.TerminatingInstances, ec2types.InstanceStateChange{InstanceId: aws.String(id),
			CurrentState: &ec2types.InstanceState{Name: ec2types.InstanceStateNameShuttingDown}})
	}
	return out, nil
}

func terminateAll(t *batcher[ec2types.InstanceStateName], ids []string) map[string]error {
	var mu sync.Mutex
	errs := map[string]error{}
	var wg sync.WaitGroup
	for _, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			state, err := t.get(context.Background(), id)
			if err == nil && state != ec2types.InstanceStateNameShuttingDown {
				err = fmt.Errorf("state %q", state)
			}
			mu.Lock()
			errs[id] = err
			mu.Unlock()
		}()
	}
	wg.Wait()
	return errs
}

// Terminations made together share calls of at most 500 instances, as
// Karpenter's do; one instance EC2 refuses, or leaves out of its answer, fails
// only its own termination.
func TestConcurrentTerminationsShareOneCall(t *testing.T) {
	var ids []string
	for i := range 600 {
		ids = append(ids, fmt.Sprintf("i-%d", i))
	}
	api := &terminateCounter{}
	for id, err := range terminateAll(newTerminator(api), ids) {
		if err != nil {
			t.Errorf("%s: %v", id, err)
		}
	}
	if len(api.calls) != 2 || max(api.calls[0], api.calls[1]) != terminateBatchMax {
		t.Errorf("600 concurrent terminations took calls of %v instances; want one of 500 and one of 100", api.calls)
	}

	api = &terminateCounter{protected: map[string]bool{"i-3": true}, silent: map[string]bool{"i-7": true}}
	errs := terminateAll(newTerminator(api), ids[:20])
	for id, err := range errs {
		switch id {
		case "i-3":
			if !isCode(err, "OperationNotPermitted") {
				t.Errorf("the protected instance's termination: got %v, want EC2's refusal", err)
			}
		case "i-7":
			if err == nil {
				t.Error("an instance missing from EC2's answer was reported terminating")
			}
		default:
			if err != nil {
				t.Errorf("%s failed with another instance's refusal: %v", id, err)
			}
		}
	}
	// The shared call, refused for i-3, then each of the 20 alone.
	if len(api.calls) != 21 {
		t.Errorf("%d TerminateInstances calls for 20 terminations with one refused; want 21", len(api.calls))
	}
}
