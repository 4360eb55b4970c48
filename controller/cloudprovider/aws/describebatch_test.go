package aws

import (
	"context"
	"fmt"
	"sync"
	"testing"

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
	d := &instanceDescriber{api: api}
	var wg sync.WaitGroup
	errs := make(chan error, 51)
	for i := 0; i <= 50; i++ {
		wg.Add(1)
		go func(id string) {
			defer wg.Done()
			inst, err := d.describe(context.Background(), id)
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
			if inst, err := d.describe(context.Background(), id); err != nil || inst == nil {
				t.Errorf("%s: %v, %v", id, inst, err)
			}
		}(fmt.Sprintf("i-%d", i))
	}
	found.Wait()
	if api.calls > 2 {
		t.Errorf("%d DescribeInstances calls for 50 concurrent describes of known instances; want them batched", api.calls)
	}
}
