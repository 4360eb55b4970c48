package templates_test

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/dovetail-sh/dovetail/templates"
)

// devImage is an image built from the repository's Dockerfile: the tests' binary is
// built from source and has no released image of its own.
const devImage = "registry.example.com/dovetail-controller:dev"

// A build from source has no default image and says so, naming the fix (a release's
// default, its own image, is checked by hack/release's TestReleaseInstalls).
func TestABuildFromSourceAsksForAnImage(t *testing.T) {
	if templates.DefaultImage != "" {
		t.Fatalf("an unstamped build defaults to %s", templates.DefaultImage)
	}
	v := templates.DefaultValues()
	v.Settings.ClusterName = "demo"
	if _, err := templates.Manifests(v); err == nil || !strings.Contains(err.Error(), "image is required: this build of Dovetail is not a release") {
		t.Fatalf("manifests without an image: %v", err)
	}
	v.Image = "registry.example.com/dovetail-controller"
	if _, err := templates.Manifests(v); err == nil || !strings.Contains(err.Error(), `image "registry.example.com/dovetail-controller" names no tag or digest`) {
		t.Fatalf("manifests of an image without a tag: %v", err)
	}
	v.Image = "registry.example.com:5000/dovetail-controller@sha256:" + strings.Repeat("ab", 32)
	objs, err := templates.Manifests(v)
	if err != nil {
		t.Fatalf("an image by digest alone: %v", err)
	}
	for _, o := range objs {
		if o.GetKind() == "Deployment" {
			containers, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
			if got := containers[0].(map[string]any)["image"]; got != v.Image {
				t.Errorf("the Deployment runs %v, want %s", got, v.Image)
			}
		}
	}
}

func TestManifests(t *testing.T) {
	v := templates.DefaultValues()
	v.Settings.ClusterName = "demo"
	v.Image = devImage
	v.Settings.InterruptionQueue = "demo-interruptions"
	v.Settings.FeatureGates = map[string]bool{"SpotToSpotConsolidation": true}
	v.IRSARoleARN = "arn:aws:iam::123456789012:role/dovetail"
	objs, err := templates.Manifests(v)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, o := range objs {
		kinds = append(kinds, o.GetKind())
	}
	if got := strings.Join(kinds, ","); got != "Namespace,PodDisruptionBudget,ServiceAccount,ClusterRole,ClusterRole,ClusterRoleBinding,Role,RoleBinding,Service,Deployment" {
		t.Fatalf("kinds in order: %s", got)
	}
	sa := objs[2]
	if sa.GetAnnotations()["eks.amazonaws.com/role-arn"] != v.IRSARoleARN {
		t.Errorf("service account annotations %v", sa.GetAnnotations())
	}
	deploy := objs[9]
	if r, _, _ := unstructured.NestedInt64(deploy.Object, "spec", "replicas"); r != 2 {
		t.Errorf("replicas %d", r)
	}
	containers, _, _ := unstructured.NestedSlice(deploy.Object, "spec", "template", "spec", "containers")
	c := containers[0].(map[string]any)
	env := map[string]string{}
	for _, e := range c["env"].([]any) {
		m := e.(map[string]any)
		if v, ok := m["value"].(string); ok {
			env[m["name"].(string)] = v
		}
	}
	for k, want := range map[string]string{"CLUSTER_NAME": "demo", "INTERRUPTION_QUEUE": "demo-interruptions", "FEATURE_GATES": "SpotToSpotConsolidation=true", "LOG_LEVEL": "info"} {
		if env[k] != want {
			t.Errorf("env %s = %q, want %q", k, env[k], want)
		}
	}
	// The Go runtime's soft limit follows the container's memory limit.
	var memoryLimitRef map[string]any
	for _, e := range c["env"].([]any) {
		if m := e.(map[string]any); m["name"] == "MEMORY_LIMIT" {
			memoryLimitRef, _, _ = unstructured.NestedMap(m, "valueFrom", "resourceFieldRef")
		}
	}
	if memoryLimitRef["resource"] != "limits.memory" || memoryLimitRef["containerName"] != c["name"] {
		t.Errorf("MEMORY_LIMIT should come from the container's limits.memory, got %v", memoryLimitRef)
	}
	// Node costs at the controller's defaults are left to the controller.
	for _, k := range []string{"ROOT_VOLUME_PRICE_PER_GIB_MONTH", "PUBLIC_IPV4_PRICE_PER_HOUR", "NODE_OVERHEAD_PRICE_PER_HOUR", "FEWER_NODES_TOLERANCE"} {
		if v, ok := env[k]; ok {
			t.Errorf("env %s = %q rendered at its default", k, v)
		}
	}
	if ro, _, _ := unstructured.NestedBool(c, "securityContext", "readOnlyRootFilesystem"); !ro {
		t.Error("the root filesystem should be read-only")
	}
	if nonRoot, _, _ := unstructured.NestedBool(deploy.Object, "spec", "template", "spec", "securityContext", "runAsNonRoot"); !nonRoot {
		t.Error("the pod should run as non-root")
	}

	v.CreateNamespace = false
	v.Settings.ClusterName = ""
	if _, err := templates.Manifests(v); err == nil || !strings.Contains(err.Error(), "cluster name is required") {
		t.Errorf("a missing cluster name gave %v", err)
	}
}

func TestRenderPutsCRDsFirst(t *testing.T) {
	v := templates.DefaultValues()
	v.Settings.ClusterName = "demo"
	v.Image = devImage
	var buf bytes.Buffer
	if err := templates.Render(&buf, v); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	crd, deploy := strings.Index(out, "kind: CustomResourceDefinition"), strings.Index(out, "kind: Deployment")
	if crd < 0 || deploy < 0 || crd > deploy {
		t.Errorf("CRDs at %d, Deployment at %d", crd, deploy)
	}
}

// The production ClusterRole lets no one's controller create Nodes (kubelets do);
// only the kwok provider's separate role does, and it is bound to the same account.
func TestOnlyTheKwokProviderCreatesNodes(t *testing.T) {
	v := templates.DefaultValues()
	v.Settings.ClusterName = "demo"
	v.Image = devImage
	grants := func(objs []*unstructured.Unstructured, resource, verb string) bool {
		for _, o := range objs {
			if o.GetKind() != "ClusterRole" {
				continue
			}
			rules, _, _ := unstructured.NestedSlice(o.Object, "rules")
			for _, r := range rules {
				rule := r.(map[string]any)
				resources, _, _ := unstructured.NestedStringSlice(rule, "resources")
				verbs, _, _ := unstructured.NestedStringSlice(rule, "verbs")
				if slices.Contains(resources, resource) && slices.Contains(verbs, verb) {
					return true
				}
			}
		}
		return false
	}
	prod, err := templates.RBACManifests(v)
	if err != nil {
		t.Fatal(err)
	}
	if grants(prod, "nodes", "create") {
		t.Error("the production ClusterRole grants nodes create")
	}
	if !grants(prod, "pods", "delete") {
		t.Error("the production ClusterRole cannot delete the pods termination must delete past terminationGracePeriod")
	}
	kwok, err := templates.KwokProviderManifests(v)
	if err != nil {
		t.Fatal(err)
	}
	if !grants(kwok, "nodes", "create") || !grants(kwok, "nodes/status", "patch") {
		t.Error("the kwok provider's role does not grant what it needs")
	}
	for _, o := range kwok {
		if o.GetKind() == "ClusterRoleBinding" {
			subjects, _, _ := unstructured.NestedSlice(o.Object, "subjects")
			if s := subjects[0].(map[string]any); s["name"] != v.ServiceAccount || s["namespace"] != v.Namespace {
				t.Errorf("the kwok role is bound to %v, not the controller's ServiceAccount", s)
			}
		}
	}
}
