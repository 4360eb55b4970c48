package simulate

import (
	"errors"
	"flag"
	"fmt"
	"strings"

	"github.com/dovetail-sh/dovetail/controller/operator/settings"
	"github.com/dovetail-sh/dovetail/controller/operator/settings/nodecosts"
	"github.com/dovetail-sh/dovetail/controller/scheduling/defaultspread"
)

// ControllerSettings are the settings predictions take: those of the controller's
// Deployment in the input (the first, noting when there are others), else the
// controller's defaults. The flags returned set one by name over them, as a flag
// given to the CLI does; notes say where the settings came from.
func (in *Inputs) ControllerSettings() (ctl *settings.Options, flags *flag.FlagSet, notes []string, err error) {
	if len(in.Controllers) == 0 {
		ctl, flags, err = settings.Parse(func(string) (string, bool) { return "", false }, nil)
		// Said, since a snapshot without `deploy` predicts under settings the
		// cluster may not run.
		return ctl, flags, []string{"the input holds no controller Deployment: predicted under the controller's default settings (a snapshot of `kubectl get deploy,...` of the controller's namespace gives its own)"}, err
	}
	d := in.Controllers[0]
	ctl, flags, notes, err = settings.FromContainer(d.Container)
	if err != nil {
		return nil, nil, notes, fmt.Errorf("%s: the controller's Deployment %s/%s: %w", d.Where, d.Deployment.Namespace, d.Deployment.Name, err)
	}
	notes = append(notes, fmt.Sprintf("settings from the controller's Deployment %s/%s (feature gates %s, drift-on-metadata %t)", d.Deployment.Namespace, d.Deployment.Name, ctl.FeatureGates.String(), ctl.DriftOnMetadata))
	if len(in.Controllers) > 1 {
		notes = append(notes, fmt.Sprintf("%d Deployments run the controller; the settings are %s/%s's", len(in.Controllers), d.Deployment.Namespace, d.Deployment.Name))
	}
	return ctl, flags, notes, nil
}

// UseSettings checks the settings the controller would refuse to start with (its
// node costs, its --scheduler-config) and takes the scheduler defaults they give
// into the input, as the controller gives them to every view.
func (in *Inputs) UseSettings(ctl *settings.Options) error {
	if errs := nodecosts.Validate(ctl.NodeCosts); len(errs) > 0 {
		return errors.New(strings.Join(errs, "; "))
	}
	spread, err := defaultspread.Parse(ctl.SchedulerConfig)
	if err != nil {
		return fmt.Errorf("--scheduler-config: %w", err)
	}
	in.DefaultSpread = spread.Constraints()
	return nil
}
