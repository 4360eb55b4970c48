package provisioning

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

// waitAsync runs Wait in the background and reports when it returns.
func waitAsync(b *Batcher, ticks *atomic.Int32) <-chan bool {
	out := make(chan bool, 1)
	go func() { out <- b.Wait(context.Background(), func() { ticks.Add(1) }) }()
	return out
}

func returned(t *testing.T, done <-chan bool) bool {
	t.Helper()
	select {
	case <-done:
		return true
	case <-time.After(50 * time.Millisecond):
		return false
	}
}

// trigger signals a new pod and waits until Wait has taken it, so the fake clock
// never steps past a reset the batcher has not made yet.
func trigger(b *Batcher) {
	b.Trigger()
	for i := 0; i < 100 && len(b.trigger) > 0; i++ {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(5 * time.Millisecond)
}

// settle steps the fake clock once Wait has set its timers.
func settle(clk *clocktesting.FakeClock, d time.Duration) {
	for i := 0; i < 100 && !clk.HasWaiters(); i++ {
		time.Sleep(time.Millisecond)
	}
	clk.Step(d)
}

// TestBatcherGathersFromTheFirstPod: even the first pod after a quiet period waits
// for the idle window, so the rest of its burst is planned with it.
func TestBatcherGathersFromTheFirstPod(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	b := NewBatcher(clk, time.Second, 10*time.Second)
	var ticks atomic.Int32
	done := waitAsync(b, &ticks)
	b.Trigger()
	settle(clk, 600*time.Millisecond) // a tick at 500ms, idle not yet over
	if returned(t, done) {
		t.Fatal("batch closed before the idle period passed")
	}
	if ticks.Load() != 1 {
		t.Errorf("want one mid-batch tick after half the idle period, got %d", ticks.Load())
	}
	trigger(b) // a new pod restarts the idle period
	settle(clk, 600*time.Millisecond)
	if returned(t, done) {
		t.Fatal("a new pod should extend the batch")
	}
	settle(clk, 500*time.Millisecond)
	if !returned(t, done) {
		t.Fatal("batch did not close after the idle period without new pods")
	}
}

func TestBatcherClosesAtTheMaxDuration(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	b := NewBatcher(clk, time.Second, 3*time.Second)
	var ticks atomic.Int32
	done := waitAsync(b, &ticks)
	b.Trigger()
	for i := 0; i < 7; i++ { // pods keep arriving every 500ms
		settle(clk, 500*time.Millisecond)
		trigger(b)
		if returned(t, done) {
			if elapsed := time.Duration(i+1) * 500 * time.Millisecond; elapsed < 3*time.Second {
				t.Fatalf("batch closed after %s, before the max duration", elapsed)
			}
			return
		}
	}
	t.Fatal("batch did not close at the max duration despite continuous arrivals")
}

func TestBatcherRecheckNeitherWaitsNorExtends(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	b := NewBatcher(clk, time.Second, 10*time.Second)
	var ticks atomic.Int32
	done := waitAsync(b, &ticks)
	b.Recheck()
	if !returned(t, done) {
		t.Fatal("a recheck should solve at once")
	}
}
