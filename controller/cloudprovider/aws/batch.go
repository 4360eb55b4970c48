package aws

import (
	"context"
	"fmt"
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
	// launchCheckWindow is longer: a burst's launches start over a few hundred
	// milliseconds as their claims are created, and the check is the first step
	// of a launch that takes seconds (Karpenter's CreateFleet batcher waits up to
	// a second).
	launchCheckWindow = 100 * time.Millisecond
	// terminateWindow gathers the terminations of a disruption batch or an
	// emptied pool, as Karpenter's terminate batcher does (100 ms idle).
	terminateWindow = 100 * time.Millisecond
	// describeBatchMax bounds the instance IDs one describe asks for.
	describeBatchMax = 200
	// terminateBatchMax is Karpenter's bound on the IDs one TerminateInstances
	// takes.
	terminateBatchMax = 500
	// launchCheckBatchMax bounds the claims one launch check asks about: EC2
	// allows 200 filter values a call, and the check's other filters take 3.
	launchCheckBatchMax = 150
	// batchTimeout bounds a shared call, which outlives any one caller.
	batchTimeout = 30 * time.Second
	// pageSize is what each page of a DescribeInstances asks for, as Karpenter
	// does: an unpaged answer for thousands of instances can time out.
	pageSize = 1000
)

type describeAPI interface {
	DescribeInstances(context.Context, *ec2.DescribeInstancesInput, ...func(*ec2.Options)) (*ec2.DescribeInstancesOutput, error)
}

type terminateAPI interface {
	TerminateInstances(context.Context, *ec2.TerminateInstancesInput, ...func(*ec2.Options)) (*ec2.TerminateInstancesOutput, error)
}

// batcher gathers the single-key lookups made within a window into shared calls,
// as Karpenter's batchers do.
type batcher[V any] struct {
	window time.Duration
	max    int
	// call answers for the keys; a key missing from the answer has none.
	call func(ctx context.Context, keys []string) (map[string]V, error)
	// split asks again one key at a time when a shared call fails, so that one
	// key's refusal (an instance ID EC2 does not know) never becomes every
	// caller's; a key the failed call answered for keeps that answer. Without
	// it, every caller gets the error.
	split bool

	mu      sync.Mutex
	waiting map[string][]chan batchResult[V]
}

type batchResult[V any] struct {
	value V
	err   error
}

// get is the answer for the key, or V's zero value when there is none.
func (b *batcher[V]) get(ctx context.Context, key string) (V, error) {
	ch := make(chan batchResult[V], 1)
	b.mu.Lock()
	if b.waiting == nil {
		b.waiting = map[string][]chan batchResult[V]{}
	}
	if len(b.waiting) == 0 {
		time.AfterFunc(b.window, b.flush)
	}
	b.waiting[key] = append(b.waiting[key], ch)
	b.mu.Unlock()
	select {
	case r := <-ch:
		return r.value, r.err
	case <-ctx.Done():
		var zero V
		return zero, ctx.Err()
	}
}

func (b *batcher[V]) flush() {
	b.mu.Lock()
	waiting := b.waiting
	b.waiting = nil
	b.mu.Unlock()
	keys := make([]string, 0, len(waiting))
	for k := range waiting {
		keys = append(keys, k)
	}
	ctx, cancel := context.WithTimeout(context.Background(), batchTimeout)
	defer cancel()
	for start := 0; start < len(keys); start += b.max {
		chunk := keys[start:min(start+b.max, len(keys))]
		found, err := b.call(ctx, chunk)
		for _, k := range chunk {
			value, answered := found[k]
			r := batchResult[V]{value: value, err: err}
			switch {
			case err == nil || !b.split:
			case answered:
				// The failed call still answered for this key.
				r.err = nil
			case len(chunk) > 1:
				var one map[string]V
				one, r.err = b.call(ctx, []string{k})
				r.value = one[k]
			}
			for _, ch := range waiting[k] {
				ch <- r
			}
		}
	}
}

// newInstanceDescriber batches describes by instance ID. A call that fails (one
// instance gone, a throttle, a zone EC2 cannot answer for) is asked again one
// instance at a time.
func newInstanceDescriber(api describeAPI) *batcher[*ec2types.Instance] {
	return &batcher[*ec2types.Instance]{window: describeWindow, max: describeBatchMax, split: true, call: func(ctx context.Context, ids []string) (map[string]*ec2types.Instance, error) {
		found := map[string]*ec2types.Instance{}
		err := eachInstance(ctx, api, &ec2.DescribeInstancesInput{InstanceIds: ids}, func(inst *ec2types.Instance) {
			found[aws.ToString(inst.InstanceId)] = inst
		})
		// An ID EC2 reports unknown is absent from the answer when it is the only
		// one asked for.
		if len(ids) == 1 && isCode(err, "InvalidInstanceID.NotFound", "InvalidInstanceID.Malformed") {
			return found, nil
		}
		return found, err
	}}
}

// newLaunchedLookup batches the check a launch makes first, by claim name: the
// earliest pending or running instance of the cluster tagged with each claim.
// Every launch of a burst asks it, so asking together is one call for dozens.
func newLaunchedLookup(api describeAPI, cluster string) *batcher[*ec2types.Instance] {
	return &batcher[*ec2types.Instance]{window: launchCheckWindow, max: launchCheckBatchMax, call: func(ctx context.Context, names []string) (map[string]*ec2types.Instance, error) {
		found := map[string]*ec2types.Instance{}
		err := eachInstance(ctx, api, &ec2.DescribeInstancesInput{Filters: []ec2types.Filter{
			{Name: aws.String("tag:" + ClusterTag(cluster)), Values: []string{"owned"}},
			{Name: aws.String("tag:" + TagNodeClaim), Values: names},
			{Name: aws.String("instance-state-name"), Values: []string{string(ec2types.InstanceStateNamePending), string(ec2types.InstanceStateNameRunning)}},
		}}, func(inst *ec2types.Instance) {
			name := tagValue(inst.Tags, TagNodeClaim)
			if prev := found[name]; prev == nil || aws.ToTime(inst.LaunchTime).Before(aws.ToTime(prev.LaunchTime)) {
				found[name] = inst
			}
		})
		return found, err
	}}
}

// newTerminator batches terminations by instance ID and answers each with the
// state EC2 moved it to. EC2 refuses a whole call for one instance it will not
// terminate (unknown, protected, denied by the policy), and may leave an instance
// out of its answer; either way each is asked again alone, so one instance's
// refusal is only its own.
func newTerminator(api terminateAPI) *batcher[ec2types.InstanceStateName] {
	return &batcher[ec2types.InstanceStateName]{window: terminateWindow, max: terminateBatchMax, split: true, call: func(ctx context.Context, ids []string) (map[string]ec2types.InstanceStateName, error) {
		out, err := api.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: ids})
		if err != nil {
			return nil, err
		}
		states := map[string]ec2types.InstanceStateName{}
		for _, change := range out.TerminatingInstances {
			if change.CurrentState != nil {
				states[aws.ToString(change.InstanceId)] = change.CurrentState.Name
			}
		}
		for _, id := range ids {
			if _, ok := states[id]; !ok {
				return states, fmt.Errorf("EC2 did not report instance %s terminating", id)
			}
		}
		return states, nil
	}}
}

// eachInstance pages through a DescribeInstances, pageSize at a time when the
// input may set a page size (EC2 refuses MaxResults beside InstanceIds).
func eachInstance(ctx context.Context, api describeAPI, in *ec2.DescribeInstancesInput, f func(*ec2types.Instance)) error {
	if len(in.InstanceIds) == 0 {
		in.MaxResults = aws.Int32(pageSize)
	}
	paginator := ec2.NewDescribeInstancesPaginator(api, in)
	for paginator.HasMorePages() {
		page, err := paginator.NextPage(ctx)
		if err != nil {
			return err
		}
		for _, r := range page.Reservations {
			for i := range r.Instances {
				f(&r.Instances[i])
			}
		}
	}
	return nil
}

func tagValue(tags []ec2types.Tag, key string) string {
	for _, t := range tags {
		if aws.ToString(t.Key) == key {
			return aws.ToString(t.Value)
		}
	}
	return ""
}
