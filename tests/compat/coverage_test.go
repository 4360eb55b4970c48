package compat_test

import (
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/dovetail-sh/dovetail/tests/compat"
)

// TestOwnCorpusCoversEveryField fails when a field of the NodePool or EC2NodeClass
// spec, as Dovetail's CRDs define it, appears in no object of the repository's corpus:
// a field nobody applies is a field nobody tests.
func TestOwnCorpusCoversEveryField(t *testing.T) {
	_, file, _, _ := runtime.Caller(0)
	crds := filepath.Join(filepath.Dir(file), "..", "..", "charts", "dovetail", "crds")
	kinds := map[string]string{"NodePool": "karpenter.sh_nodepools.yaml", "EC2NodeClass": "karpenter.k8s.aws_ec2nodeclasses.yaml"}
	used := map[string]map[string]bool{}
	karpenter, _ := compat.Own().Files(t)
	for _, path := range karpenter {
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, doc := range strings.Split(string(raw), "\n---") {
			var obj map[string]any
			if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
				t.Fatalf("%s: %v", path, err)
			}
			kind, _ := obj["kind"].(string)
			if kind == "" {
				continue
			}
			if used[kind] == nil {
				used[kind] = map[string]bool{}
			}
			valuePaths("spec", obj["spec"], used[kind])
		}
	}
	for kind, crdFile := range kinds {
		raw, err := os.ReadFile(filepath.Join(crds, crdFile))
		if err != nil {
			t.Fatal(err)
		}
		var crd struct {
			Spec struct {
				Versions []struct {
					Schema struct {
						OpenAPIV3Schema schema `json:"openAPIV3Schema"`
					}
				}
			}
		}
		if err := yaml.Unmarshal(raw, &crd); err != nil {
			t.Fatal(err)
		}
		var fields []string
		schemaPaths("spec", crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"], &fields)
		var missing []string
		for _, f := range fields {
			if !used[kind][f] {
				missing = append(missing, f)
			}
		}
		sort.Strings(missing)
		if len(missing) > 0 {
			t.Errorf("%s fields no object of tests/compat sets (%d of %d): %s", kind, len(missing), len(fields), strings.Join(missing, ", "))
		}
		if len(fields) < 20 {
			t.Errorf("%s: only %d fields read from the CRD; the schema walk is broken", kind, len(fields))
		}
	}
}

type schema struct {
	Type                 string            `json:"type"`
	Properties           map[string]schema `json:"properties"`
	Items                *schema           `json:"items"`
	AdditionalProperties any               `json:"additionalProperties"`
}

// schemaPaths lists the schema's leaves: a[] for list items, m{} for map values.
func schemaPaths(path string, s schema, out *[]string) {
	switch {
	case len(s.Properties) > 0:
		for name, p := range s.Properties {
			schemaPaths(path+"."+name, p, out)
		}
	case s.Type == "array" && s.Items != nil:
		schemaPaths(path+"[]", *s.Items, out)
	case s.Type == "object" && s.AdditionalProperties != nil:
		*out = append(*out, path+"{}")
	default:
		*out = append(*out, path)
	}
}

// valuePaths records the paths a value sets, in schemaPaths' notation: maps whose keys
// are data (labels, limits, tags) are recorded both ways, since only the schema knows.
func valuePaths(path string, v any, out map[string]bool) {
	switch x := v.(type) {
	case map[string]any:
		out[path+"{}"] = true
		for k, item := range x {
			valuePaths(path+"."+k, item, out)
		}
	case []any:
		for _, item := range x {
			valuePaths(path+"[]", item, out)
		}
	default:
		out[path] = true
	}
}
