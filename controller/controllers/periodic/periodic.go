// Package periodic runs work at a fixed period, for controllers that look at the
// whole cluster (or cloud) rather than react to one object.
package periodic

import (
	"context"
	"time"

	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// Runnable calls pass every period, counted from the end of the previous pass, on
// the elected leader, until the manager stops. A failed pass is logged and retried
// at the next period.
func Runnable(clk clock.Clock, period time.Duration, name string, pass func(context.Context) error) manager.Runnable {
	return manager.RunnableFunc(func(ctx context.Context) error {
		ctx = log.IntoContext(ctx, log.FromContext(ctx).WithName(name))
		timer := clk.NewTimer(period)
		defer timer.Stop()
		for {
			select {
			case <-ctx.Done():
				return nil
			case <-timer.C():
				if err := pass(ctx); err != nil && ctx.Err() == nil {
					log.FromContext(ctx).Error(err, "pass failed; retrying next period", "controller", name)
				}
				timer.Reset(period)
			}
		}
	})
}
