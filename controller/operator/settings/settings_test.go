package settings

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"flag"
	"fmt"
	"math/big"
	"os"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"
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

// Lease timings client-go would refuse at start are refused at validation, naming
// the flags; unset ones are controller-runtime's defaults.
func TestLeaderElectionTiming(t *testing.T) {
	o := Options{CloudProvider: "kwok", BatchIdleDuration: time.Second, BatchMaxDuration: 10 * time.Second, LogLevel: "info",
		VMMemoryOverheadPercent: 0.075, DisruptionPeriod: 10 * time.Second, LeaderElect: true}
	if err := o.Validate(); err != nil {
		t.Errorf("the default lease timing refused: %v", err)
	}
	o.LeaderElectionLeaseDuration, o.LeaderElectionRenewDeadline, o.LeaderElectionRetryPeriod = 6*time.Second, 4*time.Second, time.Second
	if err := o.Validate(); err != nil {
		t.Errorf("6s/4s/1s refused: %v", err)
	}
	for _, bad := range [][3]time.Duration{{4 * time.Second, 6 * time.Second, time.Second}, {6 * time.Second, 4 * time.Second, 4 * time.Second}} {
		o.LeaderElectionLeaseDuration, o.LeaderElectionRenewDeadline, o.LeaderElectionRetryPeriod = bad[0], bad[1], bad[2]
		if err := o.Validate(); err == nil || !strings.Contains(err.Error(), "--leader-election-renew-deadline") {
			t.Errorf("lease %s, renew %s, retry %s: %v", bad[0], bad[1], bad[2], err)
		}
	}
}

// Every gate of Karpenter's starts, and one it does not know is refused naming it.
func TestFeatureGates(t *testing.T) {
	o := Options{CloudProvider: "kwok", BatchIdleDuration: time.Second, BatchMaxDuration: 10 * time.Second, LogLevel: "info", VMMemoryOverheadPercent: 0.075, DisruptionPeriod: 10 * time.Second}
	if err := o.FeatureGates.Set("CapacityBuffer=true,NodeRepair=true,NodeOverlay=true,StaticCapacity=true,SpotToSpotConsolidation=true,ReservedCapacity=false"); err != nil {
		t.Fatal(err)
	}
	if err := o.Validate(); err != nil {
		t.Errorf("Karpenter's gates refused: %v", err)
	}
	if err := o.FeatureGates.Set("Nonsense=true"); err == nil || !strings.Contains(err.Error(), "Nonsense") {
		t.Errorf("an unknown gate: %v", err)
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

// Karpenter's settings carry over at the values that describe what Dovetail does; a
// value that would change behaviour Dovetail lacks stops it at start, naming the
// setting and the fix, whether it comes as a flag or as Karpenter's env variable.
func TestKarpenterSettingsCarryOverOrAreRefused(t *testing.T) {
	ca := selfSignedCABundle(t)
	notCert := base64.StdEncoding.EncodeToString(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte("not DER")}))
	for name, c := range map[string]struct {
		env  map[string]string
		args []string
		want string // empty: accepted
	}{
		"Karpenter's defaults as env": {env: map[string]string{"PREFERENCE_POLICY": "Respect", "MIN_VALUES_POLICY": "Strict", "IGNORE_DRA_REQUESTS": "true",
			"DISABLE_CLUSTER_STATE_OBSERVABILITY": "false", "DISABLE_DRY_RUN": "false", "EKS_CONTROL_PLANE": "true", "CLUSTER_CA_BUNDLE": ca}},
		// Karpenter v1.15's chart, at its defaults.
		"Karpenter v1.15's defaults as env": {env: map[string]string{
			"FEATURE_GATES":                   "ReservedCapacity=true,SpotToSpotConsolidation=false,NodeRepair=false,NodeOverlay=false,StaticCapacity=false,CapacityBuffer=false,TerminateFirstDrift=false,TerminateFirstRepair=false,PodDeletionCostManagement=false",
			"AWS_FEATURE_GATES":               "NodeClassCEL=false,DRANVIDIAGPU=false,DRAEFA=false,RebootForRepair=false",
			"SECURITY_GROUP_REFRESH_INTERVAL": "1m", "IGNORE_DRA_REQUESTS": "true"}},
		"legacy node repair":         {env: map[string]string{"FEATURE_GATES": "NodeRepair=true", "LEGACY_NODE_REPAIR": "true"}},
		"node repair, legacy unsaid": {env: map[string]string{"FEATURE_GATES": "NodeRepair=true"}},
		"repair as disruption":       {env: map[string]string{"FEATURE_GATES": "NodeRepair=true", "LEGACY_NODE_REPAIR": "false"}},
		"terminate-first":            {env: map[string]string{"FEATURE_GATES": "TerminateFirstDrift=true,TerminateFirstRepair=true,NodeRepair=true", "LEGACY_NODE_REPAIR": "false"}},
		"pod deletion cost":          {args: []string{"--feature-gates", "PodDeletionCostManagement=true"}, want: "PodDeletionCostManagement=true: managing ReplicaSet pods' pod-deletion-cost annotations is not supported yet"},
		"reboot for repair":          {env: map[string]string{"AWS_FEATURE_GATES": "RebootForRepair=true", "FEATURE_GATES": "NodeRepair=true", "LEGACY_NODE_REPAIR": "false"}},
		"CEL kubelet settings":       {env: map[string]string{"AWS_FEATURE_GATES": "NodeClassCEL=true"}, want: "--aws-feature-gates (AWS_FEATURE_GATES) NodeClassCEL=true: CEL expressions in an EC2NodeClass's kubelet settings is not supported yet"},
		"an AWS gate misspelt":       {env: map[string]string{"AWS_FEATURE_GATES": "NodeClassCel=false"}, want: `unknown feature gate "NodeClassCel"; known gates are RebootForRepair, DRAEFA, DRANVIDIAGPU, NodeClassCEL`},
		"scheduler defaults":         {env: map[string]string{"SCHEDULER_CONFIG": "podTopologySpread:\n  defaultConstraints:\n  - {maxSkew: 1, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: ScheduleAnyway}"}},
		"scheduler defaults with a selector": {env: map[string]string{"SCHEDULER_CONFIG": "podTopologySpread:\n  defaultConstraints:\n  - {maxSkew: 1, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: ScheduleAnyway, labelSelector: {matchLabels: {app: web}}}"},
			want: "--scheduler-config (SCHEDULER_CONFIG): podTopologySpread.defaultConstraints[0].labelSelector must not be set"},
		"security groups too often": {env: map[string]string{"SECURITY_GROUP_REFRESH_INTERVAL": "30s"}, want: "--security-group-refresh-interval (SECURITY_GROUP_REFRESH_INTERVAL) must be at least 1m"},
		"dry runs off":              {args: []string{"--disable-dry-run"}},
		"Karpenter's log paths":     {env: map[string]string{"LOG_OUTPUT_PATHS": "stdout", "LOG_ERROR_OUTPUT_PATHS": "stderr"}},
		"logs to a file":            {env: map[string]string{"LOG_OUTPUT_PATHS": "stdout,/var/log/dovetail.log"}, want: `--log-output-paths (LOG_OUTPUT_PATHS): "/var/log/dovetail.log": writing logs to files is not supported yet`},
		"preferences ignored":       {env: map[string]string{"PREFERENCE_POLICY": "Ignore"}, want: "--preference-policy (PREFERENCE_POLICY) Ignore is not supported yet"},
		"a policy misspelt":         {args: []string{"--preference-policy", "respect"}, want: `--preference-policy (PREFERENCE_POLICY) "respect": use Respect`},
		"best-effort minValues":     {args: []string{"--min-values-policy", "BestEffort"}, want: "--min-values-policy (MIN_VALUES_POLICY) BestEffort is not supported yet"},
		"DRA planned":               {env: map[string]string{"IGNORE_DRA_REQUESTS": "false"}, want: "--ignore-dra-requests=false (IGNORE_DRA_REQUESTS)"},
		"DRA flag":                  {args: []string{"--ignore-dra-requests=false"}, want: "--ignore-dra-requests=false (IGNORE_DRA_REQUESTS)"},
		"DRA env unparsable":        {env: map[string]string{"IGNORE_DRA_REQUESTS": "yes please"}, want: `IGNORE_DRA_REQUESTS="yes please" (--ignore-dra-requests)`},
		"state metrics off":         {env: map[string]string{"DISABLE_CLUSTER_STATE_OBSERVABILITY": "true"}, want: "--disable-cluster-state-observability (DISABLE_CLUSTER_STATE_OBSERVABILITY)"},
		"CA not base64":             {env: map[string]string{"CLUSTER_CA_BUNDLE": "-----BEGIN CERTIFICATE-----"}, want: "--cluster-ca-bundle (CLUSTER_CA_BUNDLE): not base64"},
		"CA not PEM":                {args: []string{"--cluster-ca-bundle", "aGVsbG8="}, want: "--cluster-ca-bundle (CLUSTER_CA_BUNDLE): does not decode to a PEM certificate"},
		"CA not a certificate":      {args: []string{"--cluster-ca-bundle", notCert}, want: "--cluster-ca-bundle (CLUSTER_CA_BUNDLE): its PEM block is not an X.509 certificate"},
	} {
		t.Run(name, func(t *testing.T) {
			for k, v := range c.env {
				t.Setenv(k, v)
			}
			t.Setenv("AWS_REGION", "us-west-2")
			var o Options
			fs := flag.NewFlagSet("test", flag.ContinueOnError)
			o.AddFlags(fs)
			if err := fs.Parse(append([]string{"--cluster-name", "prod"}, c.args...)); err != nil {
				t.Fatal(err)
			}
			err := o.Validate()
			if c.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Validate() = %v; want it to say %s", err, c.want)
			}
		})
	}
}

func TestLogStreams(t *testing.T) {
	for in, want := range map[string][]zapcore.WriteSyncer{"": {os.Stderr}, "stdout": {os.Stdout}, "stderr, stdout": {os.Stderr, os.Stdout}} {
		got, err := LogStreams(in)
		if err != nil || fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("LogStreams(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
}

// selfSignedCABundle is a CA certificate as EKS gives one: base64 of its PEM.
func selfSignedCABundle(t *testing.T) string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "kubernetes"}, IsCA: true,
		NotBefore: time.Now(), NotAfter: time.Now().Add(time.Hour), BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}
