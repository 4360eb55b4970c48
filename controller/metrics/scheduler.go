package metrics

import (
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/utils/clock"
)

// Simulation is one scheduling simulation being run, as Karpenter's scheduler metrics
// see it: while it runs, karpenter_scheduler_queue_depth holds its pods and
// karpenter_scheduler_unfinished_work_seconds how long it has run; when it ends, its
// duration goes to karpenter_scheduler_scheduling_duration_seconds.
type Simulation struct {
	controller, id string
	start          time.Time
	clock          clock.PassiveClock
}

var simulationIDs atomic.Int64

// StartSimulation records a simulation of pods pods for controller (provisioner or
// disruption).
func StartSimulation(clk clock.PassiveClock, controller string, pods int) *Simulation {
	s := &Simulation{controller: controller, id: strconv.FormatInt(simulationIDs.Add(1), 10), start: clk.Now(), clock: clk}
	SchedulerQueueDepth.WithLabelValues(controller, s.id).Set(float64(pods))
	schedulerUnfinishedWork.add(s)
	return s
}

// Done ends the simulation and returns how long it took.
func (s *Simulation) Done() time.Duration {
	d := s.clock.Since(s.start)
	SchedulingDuration.WithLabelValues(s.controller).Observe(d.Seconds())
	SchedulerQueueDepth.DeleteLabelValues(s.controller, s.id)
	schedulerUnfinishedWork.remove(s)
	return d
}

var descUnfinishedWork = prometheus.NewDesc("karpenter_scheduler_unfinished_work_seconds",
	"How many seconds of work has been done that is in progress and hasn't been considered in the scheduling duration yet.", []string{"controller", "scheduling_id"}, nil)

// unfinishedWork reports, when scraped, how long each running simulation has run.
type unfinishedWork struct {
	mu      sync.Mutex
	running map[*Simulation]bool
}

var schedulerUnfinishedWork = &unfinishedWork{running: map[*Simulation]bool{}}

func (u *unfinishedWork) add(s *Simulation) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.running[s] = true
}

func (u *unfinishedWork) remove(s *Simulation) {
	u.mu.Lock()
	defer u.mu.Unlock()
	delete(u.running, s)
}

func (u *unfinishedWork) Describe(ch chan<- *prometheus.Desc) { ch <- descUnfinishedWork }

func (u *unfinishedWork) Collect(ch chan<- prometheus.Metric) {
	u.mu.Lock()
	defer u.mu.Unlock()
	for s := range u.running {
		ch <- prometheus.MustNewConstMetric(descUnfinishedWork, prometheus.GaugeValue, s.clock.Since(s.start).Seconds(), s.controller, s.id)
	}
}
