package operator

import (
	"flag"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/dovetail-sh/dovetail/controller/scheduling"
)

func TestEndpointsFlag(t *testing.T) {
	var e Endpoints
	if err := e.Set("ec2=https://vpce-1.ec2.example, sqs=https://vpce-2.sqs.example"); err != nil {
		t.Fatal(err)
	}
	if e["ec2"] != "https://vpce-1.ec2.example" || e["sqs"] != "https://vpce-2.sqs.example" || e.String() != "ec2=https://vpce-1.ec2.example,sqs=https://vpce-2.sqs.example" {
		t.Errorf("parsed %v (%s)", e, e.String())
	}
	for in, want := range map[string]string{"ec2": "want service=URL", "s3=https://x": `unknown service "s3"`} {
		if err := e.Set(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Set(%q) = %v, want an error saying %q", in, err, want)
		}
	}
}

func TestValidateAWS(t *testing.T) {
	o := Options{CloudProvider: "aws", BatchIdleDuration: time.Second, BatchMaxDuration: 10 * time.Second, LogLevel: "info", VMMemoryOverheadPercent: 0.075, DisruptionPeriod: 10 * time.Second}
	err := o.Validate()
	if err == nil || !strings.Contains(err.Error(), "--cluster-name is required") || !strings.Contains(err.Error(), "--aws-region") {
		t.Errorf("aws without cluster name and region: %v", err)
	}
	o.ClusterName, o.AWSRegion = "prod", "us-west-2"
	if err := o.Validate(); err != nil {
		t.Errorf("valid aws options refused: %v", err)
	}
	o.CloudProvider = "gcp"
	if err := o.Validate(); err == nil || !strings.Contains(err.Error(), "use aws or kwok") {
		t.Errorf("unknown provider: %v", err)
	}
}

// TestNodeCostFlags: defaults are AWS's, the root volume is given per GiB-month as
// AWS prices it, the environment sets what the Deployment renders, and bad values
// name their flag.
func TestNodeCostFlags(t *testing.T) {
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	var c scheduling.NodeCosts
	AddNodeCostFlags(fs, &c)
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
	AddNodeCostFlags(flag.NewFlagSet("env", flag.ContinueOnError), &c)
	if c.PerNodeHour != 0.02 {
		t.Errorf("NODE_OVERHEAD_PRICE_PER_HOUR=0.02 gave %v", c.PerNodeHour)
	}
	c.PublicIPv4PerHour, c.FewerNodesTolerance = -1, 2
	errs := strings.Join(ValidateNodeCosts(c), "; ")
	for _, want := range []string{"--public-ipv4-price-per-hour must not be negative", "--fewer-nodes-tolerance must be in [0, 0.5]"} {
		if !strings.Contains(errs, want) {
			t.Errorf("validation %q does not say %q", errs, want)
		}
	}
}
