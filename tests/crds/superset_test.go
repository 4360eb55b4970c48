package crds

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"sigs.k8s.io/yaml"

	ourcrds "github.com/dovetail-sh/dovetail/templates/crds"
	"github.com/dovetail-sh/dovetail/tests/karpenterrelease"
)

// TestCRDsAreASupersetOfKarpenters reads the CRDs of Karpenter (sigs.k8s.io/karpenter)
// and of its AWS provider at karpenterrelease.Version from the module cache, and fails on
// any kind or served version, any property path, or any enum value of theirs that
// ours lack. An enum value counts only where our schema restricts the field to an
// enum: a field we leave free accepts every value.
func TestCRDsAreASupersetOfKarpenters(t *testing.T) {
	ours, err := ourcrds.CRDs()
	if err != nil {
		t.Fatal(err)
	}
	byKind := map[string]*apiextensionsv1.CustomResourceDefinition{}
	for _, crd := range ours {
		byKind[crd.Spec.Group+"/"+crd.Spec.Names.Kind] = crd
	}
	for _, module := range karpenterrelease.Modules {
		root, err := karpenterrelease.ModuleDir(module, karpenterrelease.Version)
		if err != nil {
			t.Fatal(err)
		}
		dir := filepath.Join(root, "pkg", "apis", "crds")
		files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
		if err != nil || len(files) == 0 {
			t.Fatalf("no CRDs in %s", dir)
		}
		for _, f := range files {
			raw, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			theirs := &apiextensionsv1.CustomResourceDefinition{}
			if err := yaml.Unmarshal(raw, theirs); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			key := theirs.Spec.Group + "/" + theirs.Spec.Names.Kind
			t.Run(module+"/"+theirs.Spec.Names.Kind, func(t *testing.T) {
				crd, ok := byKind[key]
				if !ok {
					t.Fatalf("no CRD for %s (%s) in charts/dovetail/crds", key, filepath.Base(f))
				}
				if missing := missingFrom(theirs, crd); len(missing) > 0 {
					t.Errorf("%s of Karpenter %s is not in ours:\n  %s", key, karpenterrelease.Version, strings.Join(missing, "\n  "))
				}
			})
		}
	}
}

// missingFrom lists what theirs has and ours lacks: served versions, property
// paths, and enum values where ours has an enum.
func missingFrom(theirs, ours *apiextensionsv1.CustomResourceDefinition) []string {
	var missing []string
	versions := map[string]*apiextensionsv1.CustomResourceDefinitionVersion{}
	for i := range ours.Spec.Versions {
		if ours.Spec.Versions[i].Served {
			versions[ours.Spec.Versions[i].Name] = &ours.Spec.Versions[i]
		}
	}
	for _, v := range theirs.Spec.Versions {
		if !v.Served {
			continue
		}
		mine, ok := versions[v.Name]
		if !ok {
			missing = append(missing, "version "+v.Name)
			continue
		}
		if v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
			continue
		}
		if mine.Schema == nil || mine.Schema.OpenAPIV3Schema == nil {
			missing = append(missing, v.Name+": a schema")
			continue
		}
		missing = append(missing, missingProps(v.Name, v.Schema.OpenAPIV3Schema, mine.Schema.OpenAPIV3Schema)...)
	}
	sort.Strings(missing)
	return missing
}

func missingProps(path string, theirs, ours *apiextensionsv1.JSONSchemaProps) []string {
	var missing []string
	if len(ours.Enum) > 0 {
		have := sets.New[string]()
		for _, e := range ours.Enum {
			have.Insert(string(e.Raw))
		}
		for _, e := range theirs.Enum {
			if !have.Has(string(e.Raw)) {
				missing = append(missing, path+" enum value "+string(e.Raw))
			}
		}
	}
	for name, prop := range theirs.Properties {
		mine, ok := ours.Properties[name]
		if !ok {
			if ours.XPreserveUnknownFields == nil || !*ours.XPreserveUnknownFields {
				missing = append(missing, path+"."+name)
			}
			continue
		}
		missing = append(missing, missingProps(path+"."+name, &prop, &mine)...)
	}
	if theirs.Items != nil && theirs.Items.Schema != nil {
		if ours.Items == nil || ours.Items.Schema == nil {
			missing = append(missing, path+"[] (items)")
		} else {
			missing = append(missing, missingProps(path+"[]", theirs.Items.Schema, ours.Items.Schema)...)
		}
	}
	if theirs.AdditionalProperties != nil && theirs.AdditionalProperties.Schema != nil && ours.AdditionalProperties != nil && ours.AdditionalProperties.Schema != nil {
		missing = append(missing, missingProps(path+"{}", theirs.AdditionalProperties.Schema, ours.AdditionalProperties.Schema)...)
	}
	return missing
}
