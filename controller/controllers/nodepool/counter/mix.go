package counter

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/log"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/controller/capacitymix"
)

// capacityMix is each pool's nodes by how they are bought, for pools with a
// capacity mix: what the mix is held to.
var capacityMix = prometheus.NewGaugeVec(prometheus.GaugeOpts{
	Namespace: "dovetail", Subsystem: "nodepool", Name: "capacity_mix_nodes",
	Help: "Nodes (claims not being deleted) of a nodepool with a capacity mix (dovetail.sh/on-demand-base, dovetail.sh/spot-percent), by capacity type; a claim still launching that may be spot counts as spot. Labeled by nodepool and capacity_type.",
}, []string{"nodepool", "capacity_type"})

func init() { crmetrics.Registry.MustRegister(capacityMix) }

// recordMix reports the pool's mix, or takes its series away when it has none.
func (c *Controller) recordMix(ctx context.Context, np *v1.NodePool, claims []v1.NodeClaim) {
	mix, ok, err := capacitymix.Of(np)
	if err != nil {
		log.FromContext(ctx).Error(err, "the nodepool's capacity mix is ignored", "nodepool", np.Name)
	}
	if !ok || err != nil {
		capacityMix.DeletePartialMatch(prometheus.Labels{"nodepool": np.Name})
		return
	}
	counts := capacitymix.CountPool(claims, np.Name)
	capacityMix.WithLabelValues(np.Name, v1.CapacityTypeOnDemand).Set(float64(counts.OnDemand))
	capacityMix.WithLabelValues(np.Name, v1.CapacityTypeSpot).Set(float64(counts.Spot))
	if !mix.Holds(counts) {
		log.FromContext(ctx).V(1).Info("the nodepool's capacity mix does not hold yet", "nodepool", np.Name, "mix", mix.String(), "nodes", counts.String())
	}
}
