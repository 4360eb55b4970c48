package operator

import (
	"flag"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/dovetail-sh/dovetail/controller/repair"
)

// TestRepairMethodIsKarpenters holds the choice between node repair as a disruption
// method and the standalone controller to Karpenter v1.15's "Repair Method
// Registration" (pkg/controllers/disruption/validation_test.go), from the flags and
// environment a user sets.
func TestRepairMethodIsKarpenters(t *testing.T) {
	notReady := corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionFalse}
	for _, c := range []struct {
		name       string
		env        map[string]string
		policies   []repair.Policy
		wantMethod bool
		wantErr    string
	}{
		{name: "registers repair when the feature gate is enabled (legacy-node-repair defaults to false)",
			env: map[string]string{"FEATURE_GATES": "NodeRepair=true"}, wantMethod: true},
		{name: "does not register repair when the feature gate is disabled",
			env: map[string]string{"FEATURE_GATES": "NodeRepair=false"}},
		{name: "builds no matcher when the feature gate is disabled, whatever the legacy flag",
			env: map[string]string{"LEGACY_NODE_REPAIR": "false"}},
		{name: "hands repair to the standalone controller with --legacy-node-repair",
			env: map[string]string{"FEATURE_GATES": "NodeRepair=true", "LEGACY_NODE_REPAIR": "true"}},
		{name: "builds a matcher when the feature gate is enabled and policies are valid",
			env: map[string]string{"FEATURE_GATES": "NodeRepair=true"}, wantMethod: true,
			policies: []repair.Policy{{ConditionType: corev1.NodeReady, ConditionStatus: corev1.ConditionFalse, Action: repair.Replace}}},
		{name: "fails when repair is enabled without any policies",
			env: map[string]string{"FEATURE_GATES": "NodeRepair=true"}, policies: []repair.Policy{}, wantErr: "node repair policies"},
		{name: "fails when the complete policy set is invalid",
			env:      map[string]string{"FEATURE_GATES": "NodeRepair=true"},
			policies: []repair.Policy{{ConditionType: corev1.NodeReady, ConditionStatus: corev1.ConditionFalse, ReasonRegex: "(", Action: repair.Replace}},
			wantErr:  "node repair policies"},
	} {
		t.Run(c.name, func(t *testing.T) {
			for k, v := range c.env {
				t.Setenv(k, v)
			}
			var o Options
			fs := flag.NewFlagSet("test", flag.ContinueOnError)
			o.AddFlags(fs)
			if err := fs.Parse(nil); err != nil {
				t.Fatal(err)
			}
			o.RepairPolicies = c.policies
			m, err := repairMethod(o)
			switch {
			case c.wantErr != "":
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("error %v; want one containing %q", err, c.wantErr)
				}
				return
			case err != nil:
				t.Fatal(err)
			}
			if got := m != nil; got != c.wantMethod {
				t.Fatalf("repair as a disruption method: %t; want %t", got, c.wantMethod)
			}
			if m != nil && !m.Covers(notReady) {
				t.Errorf("the matcher does not cover Ready=False")
			}
		})
	}
}
