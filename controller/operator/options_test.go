package operator

import (
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
