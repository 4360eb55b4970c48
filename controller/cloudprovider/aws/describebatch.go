package aws

import (
	"context"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

const (
	// describeWindow is how long a describe waits for others to share its call:
	// the lifecycle, termination and GC controllers each ask about one instance at
	// a time, dozens at once in a burst.
	describeWindow = 20 * time.Millisecond
	// describeBatchMax bounds the instances one call asks for.
	describeBatchMax = 200
	// describeTimeout bounds a shared call, which outlives any one caller.
	describeTimeout = 30 * time.Second
)

// instanceDescriber batches single-instance describes into one DescribeInstances
// call, as Karpenter's batcher does. A call that fails (one instance gone, a
// throttle, a zone EC2 cannot answer for) is retried one instance at a time, so
// that one instance's answer never becomes every caller's.
type instanceDescriber struct {
	api interface {
		DescribeInstances(context.Context, *ec2.DescribeInstancesInput, ...func(*ec2.Options)) (*ec2.DescribeInstancesOutput, error)
	}
	mu      sync.Mutex
	waiting map[string][]chan describeResult
}

type describeResult struct {
	inst *ec2types.Instance
	err  error
}

// describe is the instance with the id, nil if EC2 does not know it.
func (d *instanceDescriber) describe(ctx context.Context, id string) (*ec2types.Instance, error) {
	ch := make(chan describeResult, 1)
	d.mu.Lock()
	if d.waiting == nil {
		d.waiting = map[string][]chan describeResult{}
	}
	if len(d.waiting) == 0 {
		time.AfterFunc(describeWindow, d.flush)
	}
	d.waiting[id] = append(d.waiting[id], ch)
	d.mu.Unlock()
	select {
	case r := <-ch:
		return r.inst, r.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (d *instanceDescriber) flush() {
	d.mu.Lock()
	waiting := d.waiting
	d.waiting = nil
	d.mu.Unlock()
	ids := make([]string, 0, len(waiting))
	for id := range waiting {
		ids = append(ids, id)
	}
	ctx, cancel := context.WithTimeout(context.Background(), describeTimeout)
	defer cancel()
	for start := 0; start < len(ids); start += describeBatchMax {
		chunk := ids[start:min(start+describeBatchMax, len(ids))]
		found, err := d.call(ctx, chunk)
		for _, id := range chunk {
			r := describeResult{inst: found[id]}
			if err != nil {
				if len(chunk) > 1 {
					var one map[string]*ec2types.Instance
					one, r.err = d.call(ctx, []string{id})
					r.inst = one[id]
				} else {
					r.err = err
				}
			}
			for _, ch := range waiting[id] {
				ch <- r
			}
		}
	}
}

// call describes the instances by ID; an ID EC2 reports unknown is absent from
// the answer when it is the only one asked for.
func (d *instanceDescriber) call(ctx context.Context, ids []string) (map[string]*ec2types.Instance, error) {
	found := map[string]*ec2types.Instance{}
	paginator := ec2.NewDescribeInstancesPaginator(d.api, &ec2.DescribeInstancesInput{InstanceIds: ids})
	for paginator.HasMorePages() {
		page, err := paginator.NextPage(ctx)
		if len(ids) == 1 && isCode(err, "InvalidInstanceID.NotFound", "InvalidInstanceID.Malformed") {
			return found, nil
		}
		if err != nil {
			return nil, err
		}
		for _, r := range page.Reservations {
			for i := range r.Instances {
				found[aws.ToString(r.Instances[i].InstanceId)] = &r.Instances[i]
			}
		}
	}
	return found, nil
}
