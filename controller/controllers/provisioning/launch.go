package provisioning

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/controller/engineinput"
	"github.com/dovetail-sh/dovetail/controller/metrics"
	"github.com/dovetail-sh/dovetail/controller/scheduling"
)

// create writes one planned NodeClaim, with what marks add to it.
func (p *Provisioner) create(ctx context.Context, np *v1.NodePool, plan *scheduling.NodeClaimPlan, reason string, marks ...func(*v1.NodeClaim)) (*v1.NodeClaim, error) {
	if np == nil {
		return nil, fmt.Errorf("nodepool %s disappeared", plan.NodePool)
	}
	plan, err := hostable(ctx, plan, engineinput.MaxInstanceTypes)
	if err != nil {
		return nil, fmt.Errorf("checking the planned nodeclaim, %w", err)
	}
	nc := engineinput.ClaimOf(np, plan)
	for _, mark := range marks {
		mark(nc)
	}
	if err := p.kube.Create(ctx, nc); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("creating nodeclaim, the NodeClaim CRD is not installed: %w", err)
		}
		return nil, fmt.Errorf("creating nodeclaim, %w", err)
	}
	p.cluster.ClaimCreated(nc)
	// The engine keeps every minValues (minValuesPolicy Strict): never relaxed.
	metrics.NodeClaimsCreated.WithLabelValues(reason, np.Name, "false").Inc()
	return nc, nil
}

// Launch creates the NodeClaim a plan describes, as a replacement for disrupted
// capacity; reason ("drifted", "underutilized", ...) labels the created metric.
func (p *Provisioner) Launch(ctx context.Context, np *v1.NodePool, plan *scheduling.NodeClaimPlan, reason string) (*v1.NodeClaim, error) {
	return p.create(ctx, np, plan, reason)
}

// LaunchMarked creates the NodeClaim a plan describes with what mark adds (the
// ProvisioningRequest a gang's claims are launched for).
func (p *Provisioner) LaunchMarked(ctx context.Context, np *v1.NodePool, plan *scheduling.NodeClaimPlan, reason string, mark func(*v1.NodeClaim)) (*v1.NodeClaim, error) {
	return p.create(ctx, np, plan, reason, mark)
}
