// Package crds checks the generated CRDs on a real kube-apiserver: Karpenter's
// documented NodePools and the public compat corpus are accepted unchanged, defaults
// match Karpenter's, and invalid objects are refused with Karpenter's messages.
package crds

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	awsv1 "github.com/dovetail-sh/dovetail/controller/apis/aws/v1"
	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	ourcrds "github.com/dovetail-sh/dovetail/templates/crds"
	"github.com/dovetail-sh/dovetail/tests/compat"
	"github.com/dovetail-sh/dovetail/tests/testenv"
)

// Karpenter's docs' NodePool examples.
const gpuPool = `
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: gpu}
spec:
  template:
    spec:
      requirements:
        - key: node.kubernetes.io/instance-type
          operator: In
          values: ["p3.8xlarge", "p3.16xlarge"]
      taints:
        - key: nvidia.com/gpu
          value: "true"
          effect: NoSchedule
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
`

const billingPool = `
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: billing}
spec:
  template:
    metadata:
      labels:
        billing-team: my-team
    spec:
      requirements:
        - key: karpenter.k8s.aws/instance-category
          operator: In
          values: ["c", "m", "r"]
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
`

const mixedPool = `
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: mixed}
spec:
  template:
    spec:
      requirements:
        - key: karpenter.sh/capacity-type
          operator: In
          values: ["spot", "on-demand"]
        - key: kubernetes.io/arch
          operator: In
          values: ["arm64", "amd64"]
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
  limits:
    cpu: "1000"
    memory: 1000Gi
  disruption:
    consolidationPolicy: WhenEmptyOrUnderutilized
    consolidateAfter: 1m
    budgets:
      - nodes: "10%"
      - nodes: "0"
        schedule: "0 9 * * mon-fri"
        duration: 8h
        reasons: [Drifted, Underutilized]
  weight: 10
`

func decode(t *testing.T, doc string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
		t.Fatalf("test manifest is not YAML: %v", err)
	}
	return u
}

func create(ctx context.Context, c client.Client, u *unstructured.Unstructured) error {
	return c.Create(ctx, u, client.FieldValidation("Strict"))
}

func TestCRDs(t *testing.T) {
	server := testenv.StartAPIServer(t)
	c := server.Client
	ctx := context.Background()

	t.Run("Karpenter docs examples are accepted", func(t *testing.T) {
		for _, doc := range []string{gpuPool, billingPool, mixedPool} {
			u := decode(t, doc)
			if err := create(ctx, c, u); err != nil {
				t.Errorf("%s refused: %v", u.GetName(), err)
			}
		}
	})

	t.Run("defaults match Karpenter", func(t *testing.T) {
		np := &v1.NodePool{}
		if err := c.Get(ctx, client.ObjectKey{Name: "gpu"}, np); err != nil {
			t.Fatal(err)
		}
		if got := np.Spec.Template.Spec.ExpireAfter.String(); got != "720h0m0s" {
			t.Errorf("expireAfter = %s, want 720h", got)
		}
		if np.Spec.Disruption.ConsolidationPolicy != v1.ConsolidationPolicyWhenEmptyOrUnderutilized {
			t.Errorf("consolidationPolicy = %q", np.Spec.Disruption.ConsolidationPolicy)
		}
		if got := np.Spec.Disruption.ConsolidateAfter.String(); got != "0s" {
			t.Errorf("consolidateAfter = %s, want 0s", got)
		}
		if len(np.Spec.Disruption.Budgets) != 1 || np.Spec.Disruption.Budgets[0].Nodes != "10%" {
			t.Errorf("budgets = %+v, want one of 10%%", np.Spec.Disruption.Budgets)
		}
	})

	defaulter, err := ourcrds.NewDefaulter()
	if err != nil {
		t.Fatal(err)
	}
	t.Run("consolidateAfter is optional, as in Karpenter v1.15", func(t *testing.T) {
		u := decode(t, strings.Replace(mixedPool, "    consolidateAfter: 1m\n", "", 1))
		u.SetName("v115-no-consolidate-after")
		fromFile := u.DeepCopy()
		if err := create(ctx, c, u); err != nil {
			t.Fatalf("a NodePool with budgets and no consolidateAfter is refused: %v", err)
		}
		sameDefaultsAsTheServer(t, defaulter, fromFile, u)
		np := &v1.NodePool{}
		if err := c.Get(ctx, client.ObjectKey{Name: u.GetName()}, np); err != nil {
			t.Fatal(err)
		}
		if got := np.Spec.Disruption.ConsolidateAfter.String(); got != "0s" {
			t.Errorf("consolidateAfter = %s, want the default 0s", got)
		}
	})

	t.Run("compat corpus is accepted unchanged", func(t *testing.T) {
		compat.Each(t, func(t *testing.T, corpus compat.Corpus) {
			files, _ := corpus.Files(t)
			pools, classes := 0, 0
			for i, f := range files {
				raw, err := os.ReadFile(f)
				if err != nil {
					t.Fatal(err)
				}
				for _, doc := range strings.Split(string(raw), "\n---") {
					u := &unstructured.Unstructured{}
					if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
						t.Fatalf("%s: %v", f, err)
					}
					if len(u.Object) == 0 {
						continue
					}
					// Files reuse names such as "default"; suffix them to apply all.
					u.SetName(fmt.Sprintf("%s-%s-%d", u.GetName(), corpus.Name, i))
					fromFile := u.DeepCopy()
					if err := create(ctx, c, u); err != nil {
						t.Errorf("%s: %s %s refused: %v", filepath.Base(f), u.GetKind(), u.GetName(), err)
						continue
					}
					sameDefaultsAsTheServer(t, defaulter, fromFile, u)
					switch u.GetKind() {
					case "NodePool":
						pools++
					case "EC2NodeClass":
						classes++
					}
				}
			}
			if wantPools, wantClasses, ok := corpus.Expected(t); ok && (pools != wantPools || classes != wantClasses) {
				t.Errorf("applied %d NodePools and %d EC2NodeClasses, the corpus has %d and %d", pools, classes, wantPools, wantClasses)
			}
		})
	})

	refusals := []struct {
		name, doc, message string
	}{
		{"restricted nodepool requirement", nodePoolWithRequirement(`{key: karpenter.sh/nodepool, operator: In, values: [x]}`), `label "karpenter.sh/nodepool" is restricted`},
		{"restricted hostname requirement", nodePoolWithRequirement(`{key: kubernetes.io/hostname, operator: In, values: [x]}`), `label "kubernetes.io/hostname" is restricted`},
		{"kubernetes.io domain requirement", nodePoolWithRequirement(`{key: kubernetes.io/custom, operator: In, values: [x]}`), `label domain "kubernetes.io" is restricted`},
		{"karpenter.sh domain requirement", nodePoolWithRequirement(`{key: karpenter.sh/custom, operator: Exists}`), `label domain "karpenter.sh" is restricted`},
		{"unknown karpenter.k8s.aws label", nodePoolWithRequirement(`{key: karpenter.k8s.aws/instance-bogus, operator: Exists}`), `label domain "karpenter.k8s.aws" is restricted`},
		{"In without values", nodePoolWithRequirement(`{key: team, operator: In, values: []}`), "requirements with operator 'In' must have a value defined"},
		{"Gt with a word", nodePoolWithRequirement(`{key: karpenter.k8s.aws/instance-cpu, operator: Gt, values: [many]}`), "single positive integer value"},
		{"minValues above values", nodePoolWithRequirement(`{key: karpenter.k8s.aws/instance-family, operator: In, values: [m5], minValues: 2}`), "must have at least that many values"},
		{"unknown operator", nodePoolWithRequirement(`{key: team, operator: Within, values: [x]}`), `Unsupported value: "Within"`},
		{"misspelt taint effect", strings.Replace(gpuPool, "effect: NoSchedule", "effect: NoScheduel", 1), `spec.template.spec.taints[0].effect: Unsupported value: "NoScheduel"`},
		{"misspelt startup taint effect", strings.Replace(gpuPool, "nodeClassRef:", "startupTaints: [{key: agent-not-ready, effect: noschedule}]\n      nodeClassRef:", 1), `spec.template.spec.startupTaints[0].effect: Unsupported value: "noschedule"`},
		{"restricted template label", strings.Replace(billingPool, "billing-team: my-team", "karpenter.sh/nodepool: x", 1), `label "karpenter.sh/nodepool" is restricted`},
		{"kubernetes.io template label", strings.Replace(billingPool, "billing-team: my-team", "kubernetes.io/custom: x", 1), `label domain "kubernetes.io" is restricted`},
		{"weight out of range", strings.Replace(mixedPool, "weight: 10", "weight: 101", 1), "should be less than or equal to 100"},
		{"budget nodes not a count or percent", strings.Replace(mixedPool, `nodes: "10%"`, `nodes: "ten"`, 1), "spec.disruption.budgets[0].nodes"},
		{"schedule without duration", strings.Replace(mixedPool, "        duration: 8h\n", "", 1), "'schedule' must be set with 'duration'"},
		{"bad consolidationPolicy", strings.Replace(mixedPool, "consolidationPolicy: WhenEmptyOrUnderutilized", "consolidationPolicy: Sometimes", 1), `Unsupported value: "Sometimes"`},
		{"bad expireAfter", strings.Replace(gpuPool, "      nodeClassRef:", "      expireAfter: 30d\n      nodeClassRef:", 1), "spec.template.spec.expireAfter"},
		{"unknown field", strings.Replace(gpuPool, "nodeClassRef:", "nodeClassReff:", 1), `unknown field "spec.template.spec.nodeClassReff"`},
		{"nodeclass without role or profile", nodeClass(`amiSelectorTerms: [{alias: al2023@latest}]`), "must specify exactly one of ['role', 'instanceProfile']"},
		{"nodeclass with both", nodeClass("role: r\n  instanceProfile: p\n  amiSelectorTerms: [{alias: al2023@latest}]"), "must specify exactly one of ['role', 'instanceProfile']"},
		{"alias mixed with other terms", nodeClass("role: r\n  amiSelectorTerms: [{alias: al2023@latest}, {id: ami-123}]"), "'alias' is mutually exclusive"},
		{"unsupported alias family", nodeClass("role: r\n  amiSelectorTerms: [{alias: ubuntu@latest}]"), "family is not supported"},
		{"no amiFamily without alias", nodeClass("role: r\n  amiSelectorTerms: [{id: ami-123}]"), "must specify amiFamily if amiSelectorTerms does not contain an alias"},
		{"restricted nodeclass tag", nodeClass("role: r\n  amiSelectorTerms: [{alias: al2023@latest}]\n  tags: {karpenter.sh/nodepool: x}"), "tag contains a restricted tag matching karpenter.sh/nodepool"},
	}
	for i, tc := range refusals {
		t.Run("refuses "+tc.name, func(t *testing.T) {
			u := decode(t, tc.doc)
			u.SetName(fmt.Sprintf("refused-%d", i))
			err := create(ctx, c, u)
			if err == nil {
				t.Fatalf("accepted, want refusal mentioning %q", tc.message)
			}
			if !strings.Contains(err.Error(), tc.message) {
				t.Errorf("refusal %q does not mention %q", err, tc.message)
			}
		})
	}

	t.Run("nodeClassRef group is immutable", func(t *testing.T) {
		np := &v1.NodePool{}
		if err := c.Get(ctx, client.ObjectKey{Name: "billing"}, np); err != nil {
			t.Fatal(err)
		}
		np.Spec.Template.Spec.NodeClassRef.Group = "example.com"
		if err := c.Update(ctx, np); err == nil || !strings.Contains(err.Error(), "nodeClassRef.group is immutable") {
			t.Errorf("want nodeClassRef.group is immutable, got %v", err)
		}
	})

	t.Run("nodeclaim spec is immutable", func(t *testing.T) {
		nc := &v1.NodeClaim{}
		nc.Name = "claim"
		nc.Spec = v1.NodeClaimSpec{
			Requirements: []v1.NodeSelectorRequirementWithMinValues{{Key: v1.LabelInstanceType, RequirementBody: v1.RequirementBody{Operator: v1.OpIn, Values: []string{"m5.large"}}}},
			NodeClassRef: &v1.NodeClassReference{Group: awsv1.Group, Kind: "EC2NodeClass", Name: "default"},
		}
		if err := c.Create(ctx, nc); err != nil {
			t.Fatal(err)
		}
		nc.Spec.Requirements[0].Values = []string{"m5.xlarge"}
		if err := c.Update(ctx, nc); err == nil || !strings.Contains(err.Error(), "spec is immutable") {
			t.Errorf("want spec is immutable, got %v", err)
		}
	})
}

// sameDefaultsAsTheServer fails when the defaults `dovetail simulate` fills into an
// object read from a file (templates/crds.Defaulter) differ from what the API server
// stored for the same object: a file must mean what the cluster would make of it.
func sameDefaultsAsTheServer(t *testing.T, d *ourcrds.Defaulter, fromFile, created *unstructured.Unstructured) {
	t.Helper()
	if !d.Default(fromFile.GroupVersionKind(), fromFile.Object) {
		t.Errorf("%s: the defaulter does not know %s", fromFile.GetName(), fromFile.GroupVersionKind())
		return
	}
	if diff := cmp.Diff(asJSON(t, created.Object["spec"]), asJSON(t, fromFile.Object["spec"])); diff != "" {
		t.Errorf("%s %s: defaults from the file differ from the API server's (-server +file):\n%s", fromFile.GetKind(), fromFile.GetName(), diff)
	}
}

// asJSON is v as encoding/json decodes it, so integers the API server returns and
// numbers read from YAML compare as the same numbers.
func asJSON(t *testing.T, v any) any {
	t.Helper()
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func nodePoolWithRequirement(req string) string {
	return fmt.Sprintf(`
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: x}
spec:
  template:
    spec:
      requirements:
        - %s
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
`, req)
}

func nodeClass(body string) string {
	return fmt.Sprintf(`
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: x}
spec:
  %s
  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: demo}}]
  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: demo}}]
`, body)
}
