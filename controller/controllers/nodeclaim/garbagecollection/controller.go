// Package garbagecollection reconciles the cloud with the cluster's records: an
// instance the cloud provider launched for the cluster but no NodeClaim knows of is
// terminated, and a launched NodeClaim whose instance has gone is deleted, so nobody
// pays for a machine Kubernetes cannot see, nor waits for one that is not there.
package garbagecollection

import (
	"context"
	"errors"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/controller/cloudprovider"
	"github.com/dovetail-sh/dovetail/controller/controllers/periodic"
)

// Defaults: how often to look, and how old an instance or claim must be before it
// counts as orphaned (a launch records its providerID within moments).
const (
	DefaultPeriod = 2 * time.Minute
	DefaultGrace  = 30 * time.Second
)

// Controller is the garbage collector.
type Controller struct {
	kube   client.Client
	cloud  cloudprovider.CloudProvider
	clock  clock.Clock
	Period time.Duration
	Grace  time.Duration
}

// NewController wires the controller with the default period and grace.
func NewController(kube client.Client, cloud cloudprovider.CloudProvider, clk clock.Clock) *Controller {
	return &Controller{kube: kube, cloud: cloud, clock: clk, Period: DefaultPeriod, Grace: DefaultGrace}
}

func (c *Controller) Name() string { return "nodeclaim.garbagecollection" }

// Register runs Collect every Period on the elected leader.
func (c *Controller) Register(_ context.Context, mgr manager.Manager) error {
	return mgr.Add(periodic.Runnable(c.clock, c.Period, c.Name(), c.Collect))
}

// Collect makes one pass.
func (c *Controller) Collect(ctx context.Context) error {
	instances, err := c.cloud.List(ctx)
	if err != nil {
		return fmt.Errorf("listing instances, %w", err)
	}
	var claims v1.NodeClaimList
	if err := c.kube.List(ctx, &claims); err != nil {
		return fmt.Errorf("listing nodeclaims, %w", err)
	}
	known := sets.New[string]()
	pendingLaunch := sets.New[string]()
	for _, nc := range claims.Items {
		if nc.Status.ProviderID != "" {
			known.Insert(nc.Status.ProviderID)
		} else {
			// Launched but not yet recorded: the instance carries the claim's name.
			pendingLaunch.Insert(nc.Name)
		}
	}
	now := c.clock.Now()
	var errs []error
	live := sets.New[string]()
	for _, inst := range instances {
		live.Insert(inst.Status.ProviderID)
		if known.Has(inst.Status.ProviderID) || pendingLaunch.Has(inst.Name) || now.Sub(inst.CreationTimestamp.Time) < c.Grace {
			continue
		}
		if err := c.cloud.Delete(ctx, inst); err != nil && !cloudprovider.IsNodeClaimNotFound(err) {
			errs = append(errs, fmt.Errorf("terminating orphaned instance %s, %w", inst.Status.ProviderID, err))
			continue
		}
		log.FromContext(ctx).Info("terminated an instance no NodeClaim knows of", "providerID", inst.Status.ProviderID, "nodeclaim", inst.Name)
	}
	for i := range claims.Items {
		nc := &claims.Items[i]
		launched := meta.FindStatusCondition(nc.Status.Conditions, v1.ConditionTypeLaunched)
		if nc.Status.ProviderID == "" || live.Has(nc.Status.ProviderID) || nc.DeletionTimestamp != nil ||
			launched == nil || now.Sub(launched.LastTransitionTime.Time) < c.Grace {
			continue
		}
		// List can lag a launch; ask for the one instance before believing it gone.
		if _, err := c.cloud.Get(ctx, nc.Status.ProviderID); !cloudprovider.IsNodeClaimNotFound(err) {
			continue
		}
		if err := c.kube.Delete(ctx, nc); client.IgnoreNotFound(err) != nil {
			errs = append(errs, fmt.Errorf("deleting nodeclaim %s whose instance is gone, %w", nc.Name, err))
			continue
		}
		log.FromContext(ctx).Info("deleted a nodeclaim whose instance is gone", "nodeclaim", nc.Name, "providerID", nc.Status.ProviderID)
	}
	return errors.Join(errs...)
}
