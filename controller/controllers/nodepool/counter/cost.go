package counter

import (
	"context"

	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/controller/metrics"
)

// recordCost sets karpenter_nodepools_cost_total: the hourly price of the pool's
// launched nodes at the prices the engine plans with. A node whose offering has no
// price (a type the pool no longer allows, a provider error) counts in
// karpenter_nodepools_cost_tracker_errors_total and adds nothing.
func (c *Controller) recordCost(ctx context.Context, np *v1.NodePool, claims []v1.NodeClaim) {
	if c.cloud == nil {
		return
	}
	types, err := c.cloud.GetInstanceTypes(ctx, np)
	if err != nil {
		metrics.NodePoolCostTrackerErrors.WithLabelValues(np.Name).Inc()
		return
	}
	prices := map[[3]string]float64{}
	for _, it := range types {
		for _, o := range it.Offerings {
			prices[[3]string{it.Name, o.CapacityType, o.Zone}] = o.Price
		}
	}
	total := 0.0
	for i := range claims {
		nc := &claims[i]
		if nc.Status.ProviderID == "" {
			continue
		}
		price, ok := prices[[3]string{nc.Labels[v1.LabelInstanceType], nc.Labels[v1.LabelCapacityType], nc.Labels[v1.LabelTopologyZone]}]
		if !ok {
			metrics.NodePoolCostTrackerErrors.WithLabelValues(np.Name).Inc()
			continue
		}
		total += price
	}
	metrics.NodePoolCost.WithLabelValues(np.Name).Set(total)
}
