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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/controller/cloudprovider"
	"github.com/dovetail-sh/dovetail/controller/controllers/drainable"
	"github.com/dovetail-sh/dovetail/controller/controllers/periodic"
	"github.com/dovetail-sh/dovetail/controller/metrics"
)

// Defaults: how often to look, how old an instance or claim must be before it
// counts as orphaned (a launch records its providerID within moments), and how
// long an instance tagged with a claim that has not recorded it may wait for the
// claim to adopt it (the lifecycle controller gives up on a launch after the
// registration TTL, 15 minutes by default, and deletes the claim).
const (
	DefaultPeriod      = 2 * time.Minute
	DefaultGrace       = 30 * time.Second
	DefaultLaunchGrace = 15 * time.Minute
)

// Controller is the garbage collector.
type Controller struct {
	kube        client.Client
	cloud       cloudprovider.CloudProvider
	clock       clock.Clock
	Period      time.Duration
	Grace       time.Duration
	LaunchGrace time.Duration
}

// NewController wires the controller with the default period and graces.
func NewController(kube client.Client, cloud cloudprovider.CloudProvider, clk clock.Clock) *Controller {
	return &Controller{kube: kube, cloud: cloud, clock: clk, Period: DefaultPeriod, Grace: DefaultGrace, LaunchGrace: DefaultLaunchGrace}
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
		switch {
		case nc.Status.ProviderID != "":
			known.Insert(nc.Status.ProviderID)
		case nc.DeletionTimestamp == nil:
			// Launched but not yet recorded: the instance carries the claim's name,
			// and the claim's next launch finds it. A deleting claim never will.
			pendingLaunch.Insert(nc.Name)
		}
	}
	now := c.clock.Now()
	var errs []error
	live := sets.New[string]()
	for _, inst := range instances {
		live.Insert(inst.Status.ProviderID)
		age := now.Sub(inst.CreationTimestamp.Time)
		if known.Has(inst.Status.ProviderID) || age < c.Grace || (pendingLaunch.Has(inst.Name) && age < c.LaunchGrace) {
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
		since := nc.CreationTimestamp.Time
		if launched := meta.FindStatusCondition(nc.Status.Conditions, v1.ConditionTypeLaunched); launched != nil && launched.Status == metav1.ConditionTrue {
			since = launched.LastTransitionTime.Time
		}
		if nc.Status.ProviderID == "" || live.Has(nc.Status.ProviderID) || nc.DeletionTimestamp != nil || now.Sub(since) < c.Grace {
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
		metrics.Disruption{Reason: "garbage_collected", NodePool: nc.Labels[v1.LabelNodePool], CapacityType: nc.Labels[v1.LabelCapacityType],
			TerminationMode: metrics.TerminationMode(nc.Spec.TerminationGracePeriod)}.Record(drainable.Count(ctx, c.kube, nc.Status.NodeName))
	}
	return errors.Join(errs...)
}
