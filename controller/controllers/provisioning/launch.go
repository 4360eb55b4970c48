package provisioning

import (
	"context"
	"fmt"
	"strconv"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/sets"
	"sigs.k8s.io/controller-runtime/pkg/log"

	dovetailv1alpha1 "github.com/dovetail-sh/dovetail/controller/apis/dovetail/v1alpha1"
	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/controller/capacitymix"
	"github.com/dovetail-sh/dovetail/controller/engineinput"
	"github.com/dovetail-sh/dovetail/controller/metrics"
	"github.com/dovetail-sh/dovetail/controller/scheduling"
	"github.com/dovetail-sh/dovetail/controller/state"
)

// launchOptions are what a launch adds to a plan: marks on the claim, and the
// claims (or their nodes) it replaces, which a capacity mix counts as gone.
type launchOptions struct {
	mark      func(*v1.NodeClaim)
	replacing sets.Set[string]
}

// create writes one planned NodeClaim.
func (p *Provisioner) create(ctx context.Context, np *v1.NodePool, plan *scheduling.NodeClaimPlan, reason string, opts launchOptions) (*v1.NodeClaim, error) {
	if np == nil {
		return nil, fmt.Errorf("nodepool %s disappeared", plan.NodePool)
	}
	plan, err := hostable(ctx, plan, engineinput.MaxInstanceTypes)
	if err != nil {
		return nil, fmt.Errorf("checking the planned nodeclaim, %w", err)
	}
	nc := engineinput.ClaimOf(np, plan)
	if opts.mark != nil {
		opts.mark(nc)
	}
	if mix, ok, err := capacitymix.Of(np); err != nil {
		log.FromContext(ctx).Error(err, "ignoring the nodepool's capacity mix", "nodepool", np.Name)
	} else if ok {
		// Decided and created one at a time, so each decision counts the last.
		p.mixMu.Lock()
		defer p.mixMu.Unlock()
		if err := p.holdMix(ctx, np, mix, plan, nc, opts.replacing); err != nil {
			return nil, err
		}
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
	return p.create(ctx, np, plan, reason, launchOptions{})
}

// LaunchReplacing is Launch for the replacement of the claims (or nodes) named in
// replacing, which are about to go: a pool's capacity mix is held as if they were gone.
func (p *Provisioner) LaunchReplacing(ctx context.Context, np *v1.NodePool, plan *scheduling.NodeClaimPlan, reason string, replacing sets.Set[string]) (*v1.NodeClaim, error) {
	return p.create(ctx, np, plan, reason, launchOptions{replacing: replacing})
}

// LaunchMarked creates the NodeClaim a plan describes with what mark adds (the
// ProvisioningRequest a gang's claims are launched for).
func (p *Provisioner) LaunchMarked(ctx context.Context, np *v1.NodePool, plan *scheduling.NodeClaimPlan, reason string, mark func(*v1.NodeClaim)) (*v1.NodeClaim, error) {
	return p.create(ctx, np, plan, reason, launchOptions{mark: mark})
}

// holdMix pins to on-demand a claim that could launch as spot when one more spot
// node would break the pool's mix, counting the pool's claims as they are now
// (those not launched yet that may be spot as spot), and prices it as such.
func (p *Provisioner) holdMix(ctx context.Context, np *v1.NodePool, mix capacitymix.Mix, plan *scheduling.NodeClaimPlan, nc *v1.NodeClaim, replacing sets.Set[string]) error {
	if !capacitymix.MaySpot(nc) {
		return nil
	}
	view, err := p.cluster.Read(ctx, state.ReadOnly)
	if err != nil {
		return err
	}
	claims := view.Claims
	if replacing.Len() > 0 {
		claims = make([]v1.NodeClaim, 0, len(view.Claims))
		for i := range view.Claims {
			if !replacing.Has(view.Claims[i].Name) && !replacing.Has(view.Claims[i].Status.NodeName) {
				claims = append(claims, view.Claims[i])
			}
		}
	}
	counts := capacitymix.CountPool(claims, np.Name)
	if mix.AllowsSpot(counts) {
		return nil
	}
	if !capacitymix.PinOnDemand(nc) {
		log.FromContext(ctx).Info("the nodepool's capacity mix asks for on-demand but its requirements allow spot only", "nodepool", np.Name, "mix", mix.String())
		return nil
	}
	if _, offering, ok := capacitymix.CheapestOnDemand(plan); ok {
		nc.Annotations[dovetailv1alpha1.PlannedPriceAnnotationKey] = strconv.FormatFloat(offering.Price, 'f', 6, 64)
	}
	log.FromContext(ctx).V(1).Info("launching on-demand to keep the nodepool's capacity mix", "nodepool", np.Name, "mix", mix.String(), "nodes", counts.String())
	return nil
}
