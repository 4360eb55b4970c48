package provisioning

import (
	"context"
	"time"

	"k8s.io/utils/clock"
)

// Batcher decides when to solve. A fixed window makes the first pods of a burst wait
// for the whole window (and arrivals keep extending it), so the batcher solves at
// once when nothing has been solved for an idle period, and batches only while pods
// keep arriving right after a solve: between windows of idle (no new pod for that
// long) and max (a hard cap).
type Batcher struct {
	trigger   chan struct{}
	recheck   chan struct{}
	idle, max time.Duration
	clock     clock.Clock
	lastSolve time.Time
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
	if b.lastSolve.IsZero() || b.clock.Since(b.lastSolve) >= b.idle {
		return true
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

// Solved records the end of a solve, which starts the next idle period.
func (b *Batcher) Solved() { b.lastSolve = b.clock.Now() }
