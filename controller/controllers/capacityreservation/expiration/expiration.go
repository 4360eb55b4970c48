// Package expiration replaces the nodes of capacity blocks before EC2
// reclaims them: 40 minutes before a block ends (10 before EC2 starts taking its
// instances back) each of its NodeClaims is deleted, drained the usual way, and its
// pods planned again elsewhere, as Karpenter's capacityreservation.expiration does.
package expiration

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	awsv1 "github.com/dovetail-sh/dovetail/controller/apis/aws/v1"
	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/controller/cloudprovider/aws/nodeclass"
	"github.com/dovetail-sh/dovetail/controller/controllers/periodic"
	"github.com/dovetail-sh/dovetail/controller/metrics"
)

// Period is how often the claims of reservations are checked.
const Period = time.Minute

// Controller deletes the claims of expiring capacity blocks.
type Controller struct {
	kube     client.Client
	clock    clock.Clock
	recorder record.EventRecorder
}

// NewController builds the controller.
func NewController(kube client.Client, clk clock.Clock, recorder record.EventRecorder) *Controller {
	return &Controller{kube: kube, clock: clk, recorder: recorder}
}

func (c *Controller) Name() string { return "capacityreservation.expiration" }

func (c *Controller) Register(_ context.Context, mgr manager.Manager) error {
	return mgr.Add(periodic.Runnable(c.clock, Period, c.Name(), c.Reconcile))
}

// Reconcile deletes every claim in a capacity block that ends within
// nodeclass.CapacityBlockExpiration, by its class's record of the block.
func (c *Controller) Reconcile(ctx context.Context) error {
	var claims v1.NodeClaimList
	if err := c.kube.List(ctx, &claims, client.HasLabels{v1.LabelCapacityReservationID}); err != nil {
		return fmt.Errorf("listing the nodeclaims of capacity reservations, %w", err)
	}
	classes := map[string]*awsv1.EC2NodeClass{}
	now := c.clock.Now()
	var errs []error
	for i := range claims.Items {
		nc := &claims.Items[i]
		if nc.DeletionTimestamp != nil || nc.Spec.NodeClassRef == nil {
			continue
		}
		name := nc.Spec.NodeClassRef.Name
		class, ok := classes[name]
		if !ok {
			class = &awsv1.EC2NodeClass{}
			if err := c.kube.Get(ctx, client.ObjectKey{Name: name}, class); err != nil {
				class = nil
				if client.IgnoreNotFound(err) != nil {
					errs = append(errs, err)
				}
			}
			classes[name] = class
		}
		if class == nil {
			continue
		}
		id := nc.Labels[v1.LabelCapacityReservationID]
		for _, r := range class.Status.CapacityReservations {
			if r.ID != id || !nodeclass.Expiring(r, now) {
				continue
			}
			log.FromContext(ctx).Info("initiating delete for capacity block expiration", "nodeclaim", nc.Name, "capacityReservation", id, "endTime", r.EndTime.UTC().Format(time.RFC3339))
			c.recorder.Eventf(nc, corev1.EventTypeNormal, "CapacityBlockExpiring", "Capacity block %s ends at %s; replacing the node before EC2 reclaims it", id, r.EndTime.UTC().Format(time.RFC3339))
			if err := c.kube.Delete(ctx, nc); client.IgnoreNotFound(err) != nil {
				errs = append(errs, fmt.Errorf("deleting nodeclaim %s of expiring capacity block %s, %w", nc.Name, id, err))
				continue
			}
			metrics.Disruption{Reason: "capacity_block_expiring", NodePool: nc.Labels[v1.LabelNodePool], CapacityType: nc.Labels[v1.LabelCapacityType],
				TerminationMode: metrics.TerminationMode(nc.Spec.TerminationGracePeriod)}.Record(-1)
		}
	}
	return errors.Join(errs...)
}
