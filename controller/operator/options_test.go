package operator

import (
	"flag"
	"strings"
	"testing"
	"time"
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

// A gate for something not built is refused at start, not accepted and ignored.
func TestNodeRepairGateIsRefused(t *testing.T) {
	o := Options{CloudProvider: "kwok", BatchIdleDuration: time.Second, BatchMaxDuration: 10 * time.Second, LogLevel: "info", VMMemoryOverheadPercent: 0.075, DisruptionPeriod: 10 * time.Second}
	if err := o.FeatureGates.Set("NodeRepair=true"); err != nil {
		t.Fatal(err)
	}
	if err := o.Validate(); err == nil || !strings.Contains(err.Error(), "NodeRepair=true: node repair is not implemented yet") {
		t.Errorf("NodeRepair=true: %v", err)
	}
	if err := o.FeatureGates.Set("NodeRepair=false"); err != nil {
		t.Fatal(err)
	}
	if err := o.Validate(); err != nil {
		t.Errorf("NodeRepair=false refused: %v", err)
	}
}

// An environment variable that does not parse stops the controller and names itself,
// instead of leaving the setting at its default.
func TestBadEnvironmentIsRefused(t *testing.T) {
	t.Setenv("BATCH_IDLE_DURATION", "soon")
	t.Setenv("FEATURE_GATES", "SpotToSpot=true")
	t.Setenv("AWS_ENDPOINTS", "ec2=https://vpce.example")
	t.Setenv("CLOUD_PROVIDER", "kwok")
	var o Options
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	o.AddFlags(fs)
	if err := fs.Parse(nil); err != nil {
		t.Fatal(err)
	}
	err := o.Validate()
	for _, want := range []string{`BATCH_IDLE_DURATION="soon" (--batch-idle-duration)`, `FEATURE_GATES="SpotToSpot=true" (--feature-gates): unknown feature gate "SpotToSpot"`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate() = %v; want it to name %s", err, want)
		}
	}
	if o.AWSEndpoints["ec2"] != "https://vpce.example" {
		t.Errorf("AWS_ENDPOINTS was not read: %v", o.AWSEndpoints)
	}
	t.Setenv("BATCH_IDLE_DURATION", "2s")
	t.Setenv("FEATURE_GATES", "SpotToSpotConsolidation=true")
	o = Options{}
	fs = flag.NewFlagSet("test", flag.ContinueOnError)
	o.AddFlags(fs)
	if err := fs.Parse([]string{"--batch-idle-duration", "3s"}); err != nil {
		t.Fatal(err)
	}
	if err := o.Validate(); err != nil {
		t.Fatalf("valid environment refused: %v", err)
	}
	if o.BatchIdleDuration != 3*time.Second || !o.FeatureGates.SpotToSpotConsolidation {
		t.Errorf("the flag should win over the environment and the gate be on: %v, %+v", o.BatchIdleDuration, o.FeatureGates)
	}
}
