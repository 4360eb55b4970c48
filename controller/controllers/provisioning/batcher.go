package provisioning

import (
	"context"
	"time"

	"k8s.io/utils/clock"
)

// Batcher decides when to solve: a batch opens with the first pod and closes after
// an idle window without a new pod, or at the max window. Solving the first pod of a
// burst at once looked faster, but sized a node for that pod alone and left the
// rest of the burst to other nodes: more nodes than one plan for the whole burst, a
// partly empty node per burst, and a fleet that `dovetail simulate` did not predict.
// While a batch gathers, the nodes its pods already fill are launched every half
// idle window, so a large burst does not wait for its close.
type Batcher struct {
	trigger   chan struct{}
	recheck   chan struct{}
	idle, max time.Duration
	clock     clock.Clock
}

// NewBatcher makes a batcher with the given windows.
func NewBatcher(clk clock.Clock, idle, max time.Duration) *Batcher {
	return &Batcher{trigger: make(chan struct{}, 1), recheck: make(chan struct{}, 1), idle: idle, max: max, clock: clk}
}

// Trigger notes that a pod may need capacity. It never blocks.
func (b *Batcher) Trigger() {
	select {
	case b.trigger <- struct{}{}:
	default:
	}
}

// Recheck asks for a solve without opening a batch: nothing new arrived, the state
// only needs another look. It never extends a batch that new pods opened.
func (b *Batcher) Recheck() {
	select {
	case b.recheck <- struct{}{}:
	default:
	}
}

// Wait blocks until a batch should be solved; false when ctx ends. While a batch is
// gathering, onTick runs every half idle period: the provisioner uses it to launch
// the nodes the pods gathered so far already fill, which waiting cannot improve.
func (b *Batcher) Wait(ctx context.Context, onTick func()) bool {
	select {
	case <-ctx.Done():
		return false
	case <-b.recheck:
		return true
	case <-b.trigger:
	}
	idle := b.clock.NewTimer(b.idle)
	defer idle.Stop()
	hard := b.clock.NewTimer(b.max)
	defer hard.Stop()
	tick := b.clock.NewTimer(b.idle / 2)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return false
		case <-tick.C():
			if onTick != nil {
				onTick()
			}
			tick.Reset(b.idle / 2)
		case <-b.trigger:
			if !idle.Stop() {
				select {
				case <-idle.C():
				default:
				}
			}
			idle.Reset(b.idle)
		case <-idle.C():
			return true
		case <-hard.C():
			return true
		}
	}
}
