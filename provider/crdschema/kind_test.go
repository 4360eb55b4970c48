package crdschema_test

import (
	"context"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/defaults"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/dovetail-sh/dovetail/provider/crdschema"
	"github.com/dovetail-sh/dovetail/templates/crds"
)

func loadKinds(t *testing.T) map[string]*crdschema.Kind {
	t.Helper()
	crds, err := crds.CRDs()
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]*crdschema.Kind{}
	for _, crd := range crds {
		k, err := crdschema.Load(crd)
		if err != nil {
			t.Fatal(err)
		}
		kinds[k.GVK.Kind] = k
	}
	return kinds
}

func TestSnake(t *testing.T) {
	for in, want := range map[string]string{
		"consolidateAfter":            "consolidate_after",
		"associatePublicIPAddress":    "associate_public_ip_address",
		"httpProtocolIPv6":            "http_protocol_ipv6",
		"kmsKeyID":                    "kms_key_id",
		"cpuCFSQuota":                 "cpu_cfs_quota",
		"imageGCHighThresholdPercent": "image_gc_high_threshold_percent",
		"clusterDNS":                  "cluster_dns",
		"nodes":                       "nodes",
	} {
		if got := crdschema.Snake(in); got != want {
			t.Errorf("Snake(%q) = %q, want %q", in, got, want)
		}
	}
}

// The whole spec becomes typed attributes, and a default that is an object carries the
// defaults of its own fields, as the API server would store them.
func TestNodePoolAttributes(t *testing.T) {
	k := loadKinds(t)["NodePool"]
	attrs, err := crdschema.Attributes(k.Property("spec"), crdschema.Configurable)
	if err != nil {
		t.Fatal(err)
	}
	disruption, ok := attrs["disruption"].(schema.SingleNestedAttribute)
	if !ok {
		t.Fatalf("disruption is %T", attrs["disruption"])
	}
	if !disruption.Optional || !disruption.Computed || disruption.Default == nil {
		t.Fatalf("disruption should be optional with a default: %+v", disruption)
	}
	resp := defaultOf(t, disruption)
	want := `{"budgets":[{"duration":<null>,"nodes":"10%","reasons":<null>,"schedule":<null>}],"consolidate_after":"0s","consolidation_policy":"WhenEmptyOrUnderutilized"}`
	if got := resp.String(); got != want {
		t.Errorf("disruption default\n got %s\nwant %s", got, want)
	}
	template := attrs["template"].(schema.SingleNestedAttribute)
	if !template.Required {
		t.Error("template is required by the CRD")
	}
	inner := template.Attributes["spec"].(schema.SingleNestedAttribute).Attributes
	if _, ok := inner["node_class_ref"].(schema.SingleNestedAttribute); !ok {
		t.Errorf("node_class_ref is %T", inner["node_class_ref"])
	}
	if _, ok := inner["requirements"].(schema.ListNestedAttribute); !ok {
		t.Errorf("requirements is %T", inner["requirements"])
	}
	if _, ok := attrs["limits"].(schema.MapAttribute); !ok {
		t.Errorf("limits is %T", attrs["limits"])
	}
}

func defaultOf(t *testing.T, a schema.SingleNestedAttribute) types.Object {
	t.Helper()
	out := &defaults.ObjectResponse{}
	a.Default.DefaultObject(context.Background(), defaults.ObjectRequest{}, out)
	if out.Diagnostics.HasError() {
		t.Fatal(out.Diagnostics)
	}
	return out.PlanValue
}

// Validation is the CRD's: OpenAPI patterns and CEL rules, with paths that point at
// the Terraform attribute.
func TestValidate(t *testing.T) {
	k := loadKinds(t)["NodePool"]
	spec := map[string]any{
		"disruption": map[string]any{"consolidateAfter": "5x", "budgets": []any{map[string]any{"nodes": "10%", "schedule": "@daily"}}},
		"template": map[string]any{"spec": map[string]any{
			"nodeClassRef": map[string]any{"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
			"requirements": []any{map[string]any{"key": "karpenter.sh/nodepool", "operator": "In", "values": []any{"a"}}},
		}},
	}
	obj := k.Object("default", spec)
	k.Default(obj)
	errs := k.Validate(context.Background(), obj, nil)
	var got []string
	for _, e := range errs {
		p, _ := crdschema.AttributePath(path.Empty(), k.Root, e.Field)
		got = append(got, p.String()+": "+e.ErrorBody())
	}
	joined := strings.Join(got, "\n")
	for _, want := range []string{
		`spec.disruption.consolidate_after: Invalid value: "5x"`,
		`spec.disruption.budgets: Invalid value: "array": 'schedule' must be set with 'duration'`,
		`spec.template.spec.requirements`,
		`karpenter.sh/nodepool`,
	} {
		if !strings.Contains(joined, want) {
			t.Errorf("errors lack %q:\n%s", want, joined)
		}
	}
}
