package simulate

import (
	"time"

	"github.com/dovetail-sh/dovetail/controller/operator/settings"
)

var fakeNow = time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)

// defaults are the controller's default settings with the feature gates given
// (Name=bool,...) turned on or off.
func defaults(gates ...string) *settings.Options {
	o := settings.Default()
	for _, g := range gates {
		if err := o.FeatureGates.Set(g); err != nil {
			panic(err)
		}
	}
	return o
}
