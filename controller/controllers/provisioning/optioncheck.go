package provisioning

import (
	"context"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/log"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/controller/scheduling"
	"github.com/dovetail-sh/dovetail/controller/scheduling/plancheck"
)

// Every NodeClaim is checked before it is written: an instance-type option a node
// of which could not run the claim's pods (their node affinity on the labels the
// node will carry, the pool's taints, the pods' requests, host ports) would let
// the cloud launch a node nobody can use, again and again while the pods wait.
// Such an option is an engine bug; it is dropped, logged and counted, so the bug
// costs a warning and not an instance.

// droppedOptions counts the options dropped.
var droppedOptions = prometheus.NewCounterVec(prometheus.CounterOpts{
	Namespace: "dovetail", Subsystem: "nodeclaims", Name: "options_dropped_total",
	Help: "Instance-type options of planned NodeClaims that could not run the claim's pods, dropped before the NodeClaim was written (any is a scheduling bug). Labeled by nodepool and the rule the option broke.",
}, []string{"nodepool", "rule"})

func init() { crmetrics.Registry.MustRegister(droppedOptions) }

// hostable returns the plan with only the options that can run its pods, the
// cheapest up to limit of them (the options a NodeClaim offers the cloud), or an
// error when none can or what is left breaks a minValues.
func hostable(ctx context.Context, plan *scheduling.NodeClaimPlan, limit int) (*scheduling.NodeClaimPlan, error) {
	check := plancheck.ForClaim(plan, plancheck.Capacity{})
	kept := make([]*scheduling.InstanceType, 0, min(limit, len(plan.InstanceTypeOptions)))
	var dropped []string
	var first plancheck.Violation
	for _, it := range plan.InstanceTypeOptions {
		if len(kept) == limit {
			break
		}
		vs := check.Option(it)
		if len(vs) == 0 {
			kept = append(kept, it)
			continue
		}
		if len(dropped) == 0 {
			first = vs[0]
		}
		dropped = append(dropped, it.Name)
		droppedOptions.WithLabelValues(plan.NodePool, vs[0].Rule).Inc()
	}
	if len(dropped) == 0 {
		return plan, nil
	}
	log.FromContext(ctx).Error(fmt.Errorf("%s", first), "dropping instance-type options that cannot run the nodeclaim's pods",
		"nodepool", plan.NodePool, "dropped", dropped, "kept", len(kept))
	if len(kept) == 0 {
		return nil, fmt.Errorf("no instance-type option of the planned nodeclaim can run its pods (%s)", first)
	}
	out := *plan
	out.InstanceTypeOptions = kept
	out.Requirements = plan.Requirements.Copy()
	names := make([]string, len(kept))
	for i, it := range kept {
		names[i] = it.Name
	}
	r := scheduling.MustRequirement(v1.LabelInstanceType, v1.OpIn, names...)
	r.MinValues = plan.Requirements.Get(v1.LabelInstanceType).MinValues
	out.Requirements[v1.LabelInstanceType] = r
	if _, ok := scheduling.MinValuesPrefix(out.Requirements, kept); !ok {
		return nil, fmt.Errorf("the instance-type options that can run the planned nodeclaim's pods no longer meet its minValues (%s)", first)
	}
	if out.InstanceType != kept[0] {
		// The commitment the plan charged was for the dropped type: the kept one
		// is priced at its list price.
		out.InstanceType, out.CoveredBy = kept[0], ""
		if o, ok := scheduling.CheapestOffering(kept[0], out.Requirements); ok {
			out.Offering, out.ListPrice = o, o.Price
		}
	}
	return &out, nil
}
