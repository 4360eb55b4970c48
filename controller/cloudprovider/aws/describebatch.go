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
	describeBatchMax = 500
	// describeTimeout bounds a shared call, which outlives any one caller.
	describeTimeout = 30 * time.Second
)

// instanceDescriber batches single-instance describes into one DescribeInstances
// call by instance-id filter, as Karpenter's batcher does: a filter, unlike
// InstanceIds, does not fail the whole call for one instance that is gone.
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
		found := map[string]*ec2types.Instance{}
		paginator := ec2.NewDescribeInstancesPaginator(d.api, &ec2.DescribeInstancesInput{
			Filters: []ec2types.Filter{{Name: aws.String("instance-id"), Values: chunk}}})
		var err error
		for err == nil && paginator.HasMorePages() {
			var page *ec2.DescribeInstancesOutput
			if page, err = paginator.NextPage(ctx); err == nil {
				for _, r := range page.Reservations {
					for i := range r.Instances {
						found[aws.ToString(r.Instances[i].InstanceId)] = &r.Instances[i]
					}
				}
			}
		}
		for _, id := range chunk {
			for _, ch := range waiting[id] {
				ch <- describeResult{inst: found[id], err: err}
			}
		}
	}
}
