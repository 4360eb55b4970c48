package simulate

import (
	"flag"
	"fmt"

	"github.com/dovetail-sh/dovetail/controller/operator/settings"
)

// ControllerSettings are the settings predictions take: those of the controller's
// Deployment in the input (the first, noting when there are others), else the
// controller's defaults. The flags returned set one by name over them, as a flag
// given to the CLI does; notes say where the settings came from.
func (in *Inputs) ControllerSettings() (ctl *settings.Options, flags *flag.FlagSet, notes []string, err error) {
	if len(in.Controllers) == 0 {
		ctl, flags, err = settings.Parse(func(string) (string, bool) { return "", false }, nil)
		return ctl, flags, nil, err
	}
	d := in.Controllers[0]
	ctl, flags, notes, err = settings.FromContainer(d.Container)
	if err != nil {
		return nil, nil, notes, fmt.Errorf("%s: the controller's Deployment %s/%s: %w", d.Where, d.Deployment.Namespace, d.Deployment.Name, err)
	}
	notes = append(notes, fmt.Sprintf("settings from the controller's Deployment %s/%s (feature gates %s, drift-on-metadata %t); flags given here override them", d.Deployment.Namespace, d.Deployment.Name, ctl.FeatureGates.String(), ctl.DriftOnMetadata))
	if len(in.Controllers) > 1 {
		notes = append(notes, fmt.Sprintf("%d Deployments run the controller; the settings are %s/%s's", len(in.Controllers), d.Deployment.Namespace, d.Deployment.Name))
	}
	return ctl, flags, notes, nil
}
