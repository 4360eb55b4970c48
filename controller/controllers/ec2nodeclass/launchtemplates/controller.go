// Package launchtemplates garbage-collects the launch templates the AWS provider
// creates: those of deleted EC2NodeClasses, and those no launch has used for a while
// (a class's images or settings changed, or a type of node is no longer launched).
package launchtemplates

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	awsv1 "github.com/dovetail-sh/dovetail/controller/apis/aws/v1"
	dtaws "github.com/dovetail-sh/dovetail/controller/cloudprovider/aws"
	"github.com/dovetail-sh/dovetail/controller/controllers/periodic"
)

// Defaults for the sweep.
const (
	DefaultPeriod = 10 * time.Minute
	DefaultIdle   = time.Hour
)

// Controller sweeps launch templates.
type Controller struct {
	kube      client.Client
	templates *dtaws.LaunchTemplates
	clock     clock.Clock
	Period    time.Duration
	Idle      time.Duration
}

// NewController wires the controller.
func NewController(kube client.Client, templates *dtaws.LaunchTemplates, clk clock.Clock) *Controller {
	return &Controller{kube: kube, templates: templates, clock: clk, Period: DefaultPeriod, Idle: DefaultIdle}
}

func (c *Controller) Name() string { return "launchtemplate.garbagecollection" }

func (c *Controller) Register(_ context.Context, mgr manager.Manager) error {
	return mgr.Add(periodic.Runnable(c.clock, c.Period, c.Name(), func(ctx context.Context) error {
		_, err := c.Sweep(ctx)
		return err
	}))
}

// Sweep makes one pass and returns the templates it deleted.
func (c *Controller) Sweep(ctx context.Context) ([]string, error) {
	var classes awsv1.EC2NodeClassList
	if err := c.kube.List(ctx, &classes); err != nil {
		return nil, err
	}
	live := sets.New[string]()
	for _, nc := range classes.Items {
		if nc.DeletionTimestamp == nil {
			live.Insert(nc.Name)
		}
	}
	deleted, err := c.templates.Sweep(ctx, live.Has, c.Idle)
	if len(deleted) > 0 {
		log.FromContext(ctx).Info("deleted launch templates", "names", deleted)
	}
	return deleted, err
}
