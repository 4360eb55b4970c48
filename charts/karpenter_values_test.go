package charts_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"github.com/dovetail-sh/dovetail/tests/karpenterrelease"
)

// karpenterChartVersions are the releases of Karpenter's chart whose published
// values files must install: its first v1 release and the current one. The files
// are read from the karpenter-provider-aws Go module in the module cache, not copied
// into this repository.
var karpenterChartVersions = []string{"v1.0.0", karpenterrelease.Version}

// karpenterValues reads charts/karpenter/values.yaml of a karpenter-provider-aws
// release.
func karpenterValues(t *testing.T, version string) map[string]any {
	t.Helper()
	dir, err := karpenterrelease.ModuleDir("github.com/aws/karpenter-provider-aws", version)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(dir, "charts", "karpenter", "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	vals := map[string]any{}
	if err := yaml.Unmarshal(raw, &vals); err != nil {
		t.Fatal(err)
	}
	return vals
}

func setting(vals map[string]any, path string, v any) {
	keys := strings.Split(path, ".")
	m := vals
	for _, k := range keys[:len(keys)-1] {
		next, ok := m[k].(map[string]any)
		if !ok {
			next = map[string]any{}
			m[k] = next
		}
		m = next
	}
	m[keys[len(keys)-1]] = v
}

// Karpenter's own values files install as they are (given a cluster name, which
// their defaults leave empty): every key is carried out, and only a value Dovetail
// does not support stops the render, naming the key and the fix. Karpenter's
// defaults are never refused.
func TestKarpenterValuesFilesInstall(t *testing.T) {
	for _, version := range karpenterChartVersions {
		t.Run(version, func(t *testing.T) {
			vals := karpenterValues(t, version)
			setting(vals, "settings.clusterName", "demo")
			objs, err := helmTemplate(t, "karpenter", "kube-system", vals)
			if err != nil {
				t.Fatalf("Karpenter %s's values.yaml does not install: %v", version, err)
			}
			if deployment(t, objs) == nil {
				t.Fatalf("no Deployment rendered")
			}

			// The keys v1.14 added reach their objects.
			vals = karpenterValues(t, version)
			setting(vals, "settings.clusterName", "demo")
			setting(vals, "settings.amiRefreshInterval", "2m")
			setting(vals, "settings.subnetRefreshInterval", "3m")
			setting(vals, "serviceMonitor.enabled", true)
			setting(vals, "serviceMonitor.relabelings", []any{map[string]any{"targetLabel": "cluster", "replacement": "demo"}})
			setting(vals, "serviceMonitor.metricRelabelings", []any{map[string]any{"action": "drop", "regex": "go_.*", "sourceLabels": []any{"__name__"}}})
			setting(vals, "serviceMonitor.sampleLimit", 5000)
			objs, err = helmTemplate(t, "karpenter", "kube-system", vals)
			if err != nil {
				t.Fatal(err)
			}
			env := map[string]string{}
			for _, e := range deployment(t, objs).Spec.Template.Spec.Containers[0].Env {
				env[e.Name] = e.Value
			}
			if env["AMI_REFRESH_INTERVAL"] != "2m" || env["SUBNET_REFRESH_INTERVAL"] != "3m" {
				t.Errorf("refresh intervals in the controller's env: %q, %q", env["AMI_REFRESH_INTERVAL"], env["SUBNET_REFRESH_INTERVAL"])
			}
			if version == karpenterrelease.Version {
				// The keys v1.15 added: its file's defaults, carried to the controller.
				if env["SECURITY_GROUP_REFRESH_INTERVAL"] != "1m" || env["LEGACY_NODE_REPAIR"] != "false" {
					t.Errorf("v1.15 settings in the controller's env: SECURITY_GROUP_REFRESH_INTERVAL %q, LEGACY_NODE_REPAIR %q; want 1m and false", env["SECURITY_GROUP_REFRESH_INTERVAL"], env["LEGACY_NODE_REPAIR"])
				}
				for _, gate := range []string{"TerminateFirstDrift=false", "TerminateFirstRepair=false", "PodDeletionCostManagement=false"} {
					if !strings.Contains(env["FEATURE_GATES"], gate) {
						t.Errorf("FEATURE_GATES %q lacks %s", env["FEATURE_GATES"], gate)
					}
				}
			}
			var monitor map[string]any
			for _, o := range objs {
				if o.GetKind() == "ServiceMonitor" {
					monitor = o.Object
				}
			}
			if monitor == nil {
				t.Fatal("no ServiceMonitor rendered")
			}
			spec := monitor["spec"].(map[string]any)
			endpoint := spec["endpoints"].([]any)[0].(map[string]any)
			if fmt.Sprint(spec["sampleLimit"]) != "5000" || len(endpoint["relabelings"].([]any)) != 1 || len(endpoint["metricRelabelings"].([]any)) != 1 {
				t.Errorf("ServiceMonitor spec %v: want sampleLimit 5000 and the endpoint's relabelings and metricRelabelings", spec)
			}

			// Values Dovetail does not support are refused, naming the key.
			refused := map[string]string{
				"settings.enableZonalShift": "settings.enableZonalShift: true is not supported yet",
			}
			if version == karpenterrelease.Version {
				for path, want := range map[string]string{
					"settings.featureGates.podDeletionCostManagement": "settings.featureGates.podDeletionCostManagement: true is not supported yet",
					"settings.awsFeatureGates.nodeClassCEL":           "settings.awsFeatureGates.nodeClassCEL: true is not supported yet",
					"settings.awsFeatureGates.draNVIDIAGPU":           "settings.awsFeatureGates.draNVIDIAGPU: true is not supported yet",
					"settings.awsFeatureGates.draEFA":                 "settings.awsFeatureGates.draEFA: true is not supported yet",
					"settings.enableDRA":                              "settings.enableDRA: true is not supported yet",
				} {
					refused[path] = want
				}
			}
			for path, want := range refused {
				vals := karpenterValues(t, version)
				setting(vals, "settings.clusterName", "demo")
				setting(vals, path, true)
				if _, err := helmTemplate(t, "karpenter", "kube-system", vals); err == nil || !strings.Contains(err.Error(), want) {
					t.Errorf("%s: true gave %v; want %q", path, err, want)
				}
			}
			// Node repair both ways: the file's legacyNodeRepair (false in v1.15's:
			// repair as a disruption method), and true (the standalone controller).
			for _, legacy := range []bool{false, true} {
				vals = karpenterValues(t, version)
				setting(vals, "settings.clusterName", "demo")
				setting(vals, "settings.featureGates.nodeRepair", true)
				setting(vals, "settings.legacyNodeRepair", legacy)
				objs, err := helmTemplate(t, "karpenter", "kube-system", vals)
				if err != nil {
					t.Errorf("nodeRepair with legacyNodeRepair: %v is refused: %v", legacy, err)
					continue
				}
				rendered := ""
				for _, e := range deployment(t, objs).Spec.Template.Spec.Containers[0].Env {
					if e.Name == "LEGACY_NODE_REPAIR" {
						rendered = e.Value
					}
				}
				if rendered != fmt.Sprint(legacy) {
					t.Errorf("legacyNodeRepair: %v renders LEGACY_NODE_REPAIR=%q", legacy, rendered)
				}
			}
		})
	}
}

// deployment is the rendered controller Deployment, or nil.
func deployment(t *testing.T, objs []*unstructured.Unstructured) *appsv1.Deployment {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() != "Deployment" {
			continue
		}
		d := &appsv1.Deployment{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, d); err != nil {
			t.Fatal(err)
		}
		return d
	}
	return nil
}
