package settings

import (
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestFromContainer: a controller container's settings are read as its process
// reads them: env over the defaults, its command's and args' flags over env;
// values from references a manifest cannot resolve are named and keep their
// defaults; a value that does not parse names its variable.
func TestFromContainer(t *testing.T) {
	c := &corev1.Container{
		Name:    "controller",
		Command: []string{"/dovetail-controller", "--drift-on-metadata=false"},
		Args:    []string{"--feature-gates=CapacityBuffer=false", "--a-newer-flag=1", "--batch-max-duration", "20s"},
		Env: []corev1.EnvVar{
			{Name: "FEATURE_GATES", Value: "NodeOverlay=true,CapacityBuffer=true"},
			{Name: "DRIFT_ON_METADATA", Value: "true"},
			{Name: "NODE_OVERHEAD_PRICE_PER_HOUR", Value: "0.02"},
			{Name: "VM_MEMORY_OVERHEAD_PERCENT", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{Key: "overhead"}}},
			{Name: "POD_NAMESPACE", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}},
		},
	}
	o, fs, notes, err := FromContainer(c)
	if err != nil {
		t.Fatal(err)
	}
	if !o.FeatureGates.NodeOverlay || o.FeatureGates.CapacityBuffer || o.DriftOnMetadata || o.NodeCosts.PerNodeHour != 0.02 || o.VMMemoryOverheadPercent != 0.075 {
		t.Errorf("settings: gates %s, drift-on-metadata %t, node overhead %v, vm overhead %v; want NodeOverlay on, CapacityBuffer off (args over env), false (command over env), 0.02, the default 0.075",
			o.FeatureGates.String(), o.DriftOnMetadata, o.NodeCosts.PerNodeHour, o.VMMemoryOverheadPercent)
	}
	if all := strings.Join(notes, "\n"); len(notes) != 2 || !strings.Contains(all, "VM_MEMORY_OVERHEAD_PERCENT") || !strings.Contains(all, "--a-newer-flag=1") || o.BatchMaxDuration.String() != "20s" {
		t.Errorf("notes %q, batch-max-duration %v; want VM_MEMORY_OVERHEAD_PERCENT named (POD_NAMESPACE does not change a decision), the unknown argument named and the rest read", notes, o.BatchMaxDuration)
	}
	if err := fs.Set("feature-gates", "NodeOverlay=false"); err != nil || o.FeatureGates.NodeOverlay || o.FeatureGates.CapacityBuffer {
		t.Errorf("a flag set over the container's: %v, gates %s; want NodeOverlay off and the rest kept", err, o.FeatureGates.String())
	}
	c.Env = []corev1.EnvVar{{Name: "FEATURE_GATES", Value: "NodeOverlay=yes"}}
	if _, _, _, err := FromContainer(c); err == nil || !strings.Contains(err.Error(), "FEATURE_GATES") {
		t.Errorf("a bad FEATURE_GATES: %v; want an error naming it", err)
	}
	// The defaults are the flags' own, whatever this process's environment says:
	// a prediction of a cluster must not take the shell's settings.
	t.Setenv("FEATURE_GATES", "NodeOverlay=true")
	t.Setenv("DRIFT_ON_METADATA", "true")
	t.Setenv("NODE_OVERHEAD_PRICE_PER_HOUR", "0.02")
	if d := Default(); d.FeatureGates.NodeOverlay || d.DriftOnMetadata || d.NodeCosts.PerNodeHour == 0.02 {
		t.Errorf("defaults (gates %s, drift-on-metadata %t, node overhead %v) read this process's environment", d.FeatureGates.String(), d.DriftOnMetadata, d.NodeCosts.PerNodeHour)
	}
}

// TestControllerContainer: the controller's container is found by its image, or by
// the chart's label and container name; other Deployments run no controller.
func TestControllerContainer(t *testing.T) {
	deployment := func(labels map[string]string, containers ...corev1.Container) *appsv1.Deployment {
		return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: appsv1.DeploymentSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: containers}}}}
	}
	sidecar := corev1.Container{Name: "proxy", Image: "envoy:1"}
	for _, tc := range []struct {
		name string
		d    *appsv1.Deployment
		want string
	}{
		{"by image", deployment(nil, sidecar, corev1.Container{Name: "c", Image: "123.dkr.ecr.us-west-2.amazonaws.com/mirror/dovetail-controller:v1@sha256:ab"}), "c"},
		{"by label and name", deployment(map[string]string{"app.kubernetes.io/name": "dovetail"}, sidecar, corev1.Container{Name: "controller", Image: "registry.local/ctl:dev"}), "controller"},
		{"by label, the only one", deployment(map[string]string{"app.kubernetes.io/name": "dovetail"}, corev1.Container{Name: "x", Image: "registry.local/ctl:dev"}), "x"},
		{"another workload", deployment(map[string]string{"app": "web"}, corev1.Container{Name: "controller", Image: "web:1"}), ""},
		{"Karpenter", deployment(map[string]string{"app.kubernetes.io/name": "karpenter"}, corev1.Container{Name: "controller", Image: "public.ecr.aws/karpenter/controller:1.15.0"}), ""},
	} {
		c, ok := ControllerContainer(tc.d)
		got := ""
		if ok {
			got = c.Name
		}
		if got != tc.want {
			t.Errorf("%s: container %q; want %q", tc.name, got, tc.want)
		}
	}
}
