// Package crdschema reads a CustomResourceDefinition the way the kube-apiserver
// does: its structural schema, defaulting, OpenAPI and CEL validation, offline;
// and writes a value as the HCL a Terraform attribute of that schema takes. The
// provider builds its typed NodePool and EC2NodeClass resources on it, and
// `dovetail migrate` writes HCL with it, without the Terraform framework.
package crdschema

import (
	"context"
	"fmt"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/listtype"
	apiservervalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
)

// Kind is one served version of a custom resource kind.
type Kind struct {
	GVK  schema.GroupVersionKind
	Root *structuralschema.Structural

	openapi apiservervalidation.SchemaValidator
	cel     *cel.Validator
}

// Load prepares the storage version of a CRD.
func Load(crd *apiextensionsv1.CustomResourceDefinition) (*Kind, error) {
	for _, v := range crd.Spec.Versions {
		if !v.Storage {
			continue
		}
		if v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
			return nil, fmt.Errorf("CRD %s version %s has no schema", crd.Name, v.Name)
		}
		internal := &apiextensions.CustomResourceValidation{}
		if err := apiextensionsv1.Convert_v1_CustomResourceValidation_To_apiextensions_CustomResourceValidation(v.Schema, internal, nil); err != nil {
			return nil, fmt.Errorf("converting the schema of %s, %w", crd.Name, err)
		}
		root, err := structuralschema.NewStructural(internal.OpenAPIV3Schema)
		if err != nil {
			return nil, fmt.Errorf("reading the schema of %s, %w", crd.Name, err)
		}
		openapi, _, err := apiservervalidation.NewSchemaValidator(internal.OpenAPIV3Schema)
		if err != nil {
			return nil, fmt.Errorf("compiling the OpenAPI validation of %s, %w", crd.Name, err)
		}
		k := &Kind{
			GVK:     schema.GroupVersionKind{Group: crd.Spec.Group, Version: v.Name, Kind: crd.Spec.Names.Kind},
			Root:    root,
			openapi: openapi,
			cel:     cel.NewValidator(root, true, celconfig.PerCallLimit),
		}
		if err := checkNames(root, field.NewPath("")); err != nil {
			return nil, err
		}
		return k, nil
	}
	return nil, fmt.Errorf("CRD %s has no storage version", crd.Name)
}

// Property is the schema of a top-level field such as spec or status.
func (k *Kind) Property(name string) *structuralschema.Structural {
	if p, ok := k.Root.Properties[name]; ok {
		return &p
	}
	return nil
}

// Object wraps a spec into a whole object of this kind.
func (k *Kind) Object(name string, spec map[string]any) map[string]any {
	obj := map[string]any{
		"apiVersion": k.GVK.GroupVersion().String(),
		"kind":       k.GVK.Kind,
		"metadata":   map[string]any{"name": name},
	}
	if spec != nil {
		obj["spec"] = spec
	}
	return obj
}

// Default fills in the CRD's defaults, as the API server does before it stores an object.
func (k *Kind) Default(obj map[string]any) {
	defaulting.Default(obj, k.Root)
}

// Validate runs the API server's checks on a defaulted object: OpenAPI (types, enums,
// patterns, bounds), list types, and the CEL rules, with transition rules when old is
// given.
func (k *Kind) Validate(ctx context.Context, obj, old map[string]any) field.ErrorList {
	var errs field.ErrorList
	if old == nil {
		errs = append(errs, apiservervalidation.ValidateCustomResource(nil, obj, k.openapi)...)
	} else {
		errs = append(errs, apiservervalidation.ValidateCustomResourceUpdate(nil, obj, old, k.openapi)...)
	}
	errs = append(errs, listtype.ValidateListSetsAndMaps(nil, k.Root, obj)...)
	var oldObj any
	if old != nil {
		oldObj = old
	}
	celErrs, _ := k.cel.Validate(ctx, nil, k.Root, obj, oldObj, celconfig.RuntimeCELCostBudget)
	return append(errs, celErrs...)
}

// checkNames refuses a schema whose field names would collide once snake-cased.
func checkNames(s *structuralschema.Structural, p *field.Path) error {
	seen := map[string]string{}
	for name, prop := range s.Properties {
		snake := Snake(name)
		if other, ok := seen[snake]; ok {
			return fmt.Errorf("fields %s and %s of %s have the same Terraform name %s", other, name, p, snake)
		}
		seen[snake] = name
		if err := checkNames(&prop, p.Child(name)); err != nil {
			return err
		}
	}
	if s.Items != nil {
		return checkNames(s.Items, p.Index(0))
	}
	if s.AdditionalProperties != nil && s.AdditionalProperties.Structural != nil {
		return checkNames(s.AdditionalProperties.Structural, p.Key("*"))
	}
	return nil
}
