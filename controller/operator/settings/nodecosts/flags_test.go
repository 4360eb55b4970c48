package nodecosts

import (
	"flag"
	"math"
	"strings"
	"testing"

	"github.com/dovetail-sh/dovetail/controller/scheduling"
)

// TestNodeCostFlags: defaults are AWS's, the root volume is given per GiB-month as
// AWS prices it, and bad values name their flag. The environment the Deployment
// renders is read by the controller's settings (settings' TestFromContainer).
func TestNodeCostFlags(t *testing.T) {
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	var c scheduling.NodeCosts
	AddFlags(fs, &c)
	if c != scheduling.DefaultNodeCosts() {
		t.Errorf("defaults %+v, want %+v", c, scheduling.DefaultNodeCosts())
	}
	if err := fs.Parse([]string{"--root-volume-price-per-gib-month=0.146", "--public-ipv4-price-per-hour=0", "--fewer-nodes-tolerance=0.05"}); err != nil {
		t.Fatal(err)
	}
	if math.Abs(c.RootVolumePerGiBHour-0.0002) > 1e-12 || c.PublicIPv4PerHour != 0 || c.FewerNodesTolerance != 0.05 {
		t.Errorf("parsed %+v", c)
	}
	c.PublicIPv4PerHour, c.FewerNodesTolerance = -1, 2
	errs := strings.Join(Validate(c), "; ")
	for _, want := range []string{"--public-ipv4-price-per-hour must not be negative", "--fewer-nodes-tolerance must be in [0, 0.5]"} {
		if !strings.Contains(errs, want) {
			t.Errorf("validation %q does not say %q", errs, want)
		}
	}
}
