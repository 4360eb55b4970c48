// Package metricstest reads the controller's metrics in tests.
package metricstest

import (
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// Sum is the total of a counter vector's series whose label has value, whatever
// their other labels: what a test of one label asks, without spelling out the rest.
func Sum(c prometheus.Collector, label, value string) float64 {
	ch := make(chan prometheus.Metric, 100)
	go func() {
		c.Collect(ch)
		close(ch)
	}()
	total := 0.0
	for m := range ch {
		var out dto.Metric
		if err := m.Write(&out); err != nil || out.Counter == nil {
			continue
		}
		for _, l := range out.Label {
			if l.GetName() == label && l.GetValue() == value {
				total += out.Counter.GetValue()
			}
		}
	}
	return total
}
