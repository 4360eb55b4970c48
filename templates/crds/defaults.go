package crds

import (
	"fmt"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Defaulter fills in the defaults our CRDs declare, as the API server does when an
// object is created. Objects read from files (`dovetail simulate` of a repository's
// manifests) never went through an API server, and a field Karpenter made optional
// with a default (consolidateAfter: 0s since v1.15) must mean the same there.
type Defaulter struct {
	schemas map[schema.GroupVersionKind]*structuralschema.Structural
}

// NewDefaulter reads the embedded CRDs' schemas.
func NewDefaulter() (*Defaulter, error) {
	crds, err := CRDs()
	if err != nil {
		return nil, err
	}
	d := &Defaulter{schemas: map[schema.GroupVersionKind]*structuralschema.Structural{}}
	for _, crd := range crds {
		for _, v := range crd.Spec.Versions {
			if v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
				continue
			}
			internal := &apiextensions.JSONSchemaProps{}
			if err := apiextensionsv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(v.Schema.OpenAPIV3Schema, internal, nil); err != nil {
				return nil, fmt.Errorf("CRD %s %s: %w", crd.Name, v.Name, err)
			}
			s, err := structuralschema.NewStructural(internal)
			if err != nil {
				return nil, fmt.Errorf("CRD %s %s is not structural: %w", crd.Name, v.Name, err)
			}
			d.schemas[schema.GroupVersionKind{Group: crd.Spec.Group, Version: v.Name, Kind: crd.Spec.Names.Kind}] = s
		}
	}
	return d, nil
}

// Default applies the defaults of gvk's schema to obj in place. It reports false for
// a kind our CRDs do not define.
func (d *Defaulter) Default(gvk schema.GroupVersionKind, obj map[string]any) bool {
	s, ok := d.schemas[gvk]
	if !ok {
		return false
	}
	structuraldefaulting.Default(obj, s)
	return true
}
