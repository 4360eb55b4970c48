package nodecosts

import (
	"flag"
	"math"
	"strings"
	"testing"

	"github.com/dovetail-sh/dovetail/controller/scheduling"
)

// TestNodeCostFlags: defaults are AWS's, the root volume is given per GiB-month as
// AWS prices it, the environment sets what the Deployment renders, and bad values
// name their flag.
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
	t.Setenv("NODE_OVERHEAD_PRICE_PER_HOUR", "0.02")
	AddFlags(flag.NewFlagSet("env", flag.ContinueOnError), &c)
	if c.PerNodeHour != 0.02 {
		t.Errorf("NODE_OVERHEAD_PRICE_PER_HOUR=0.02 gave %v", c.PerNodeHour)
	}
	c.PublicIPv4PerHour, c.FewerNodesTolerance = -1, 2
	errs := strings.Join(Validate(c), "; ")
	for _, want := range []string{"--public-ipv4-price-per-hour must not be negative", "--fewer-nodes-tolerance must be in [0, 0.5]"} {
		if !strings.Contains(errs, want) {
			t.Errorf("validation %q does not say %q", errs, want)
		}
	}
}
