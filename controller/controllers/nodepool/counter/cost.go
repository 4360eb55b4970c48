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
	// Indexed by name only: a map over every offering was rebuilt on each claim
	// change and, at thousands of claims, was a large share of the live heap.
	byName := make(map[string]*scheduling.InstanceType, len(types))
	for _, it := range types {
		byName[it.Name] = it
	}
	total := 0.0
	for i := range claims {
		nc := &claims[i]
		if nc.Status.ProviderID == "" {
			continue
		}
		price, ok := offeringPrice(byName[nc.Labels[v1.LabelInstanceType]], nc.Labels[v1.LabelCapacityType], nc.Labels[v1.LabelTopologyZone])
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

// offeringPrice is the price of the type's offering in the zone and capacity
// type; of several listed for both, the last.
func offeringPrice(it *scheduling.InstanceType, capacityType, zone string) (float64, bool) {
	if it == nil {
		return 0, false
	}
	price, ok := 0.0, false
	for _, o := range it.Offerings {
		if o.CapacityType == capacityType && o.Zone == zone {
			price, ok = o.Price, true
		}
	}
	return price, ok
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
