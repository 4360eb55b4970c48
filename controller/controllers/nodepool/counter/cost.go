package counter

import (
	"context"
	"math"

	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	commitmentcontroller "github.com/dovetail-sh/dovetail/controller/controllers/commitment"
	"github.com/dovetail-sh/dovetail/controller/metrics"
	"github.com/dovetail-sh/dovetail/controller/scheduling"
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
	if _, limited := scheduling.SpendLimit(np); limited {
		metrics.NodePoolUsage.WithLabelValues(np.Name, string(scheduling.ResourceSpendPerHour)).Set(c.spend(ctx, np, total))
	}
}

// spend is what the pool's launched nodes cost per hour at the prices its
// dovetail.sh/usd-per-hour limit counts: list prices less what commitments pay,
// charged over the whole fleet as AWS bills them.
func (c *Controller) spend(ctx context.Context, np *v1.NodePool, list float64) float64 {
	ledger := c.Commitments.Ledger()
	if ledger == nil {
		return list
	}
	claims, prices, _, err := commitmentcontroller.ChargeClaims(ctx, c.kube, c.cloud, ledger.Clone())
	if err != nil {
		metrics.NodePoolCostTrackerErrors.WithLabelValues(np.Name).Inc()
	}
	total := 0.0
	for i, nc := range claims {
		if nc.Labels[v1.LabelNodePool] == np.Name && !math.IsNaN(prices[i]) {
			total += prices[i]
		}
	}
	return total
}
