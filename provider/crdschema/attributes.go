package crdschema

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/booldefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/float64default"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/int64default"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/listdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/mapdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/objectdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringdefault"
	"github.com/hashicorp/terraform-plugin-framework/types"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
)

// Mode says whether attributes are set by the user (spec) or only reported (status).
type Mode int

const (
	// Configurable attributes are Required, Optional, or Optional+Computed with the
	// CRD's default, so a plan shows every value the API server will store.
	Configurable Mode = iota
	// Reported attributes are Computed: what the controller writes.
	Reported
)

// Attribute builds the Terraform attribute for a field; required is whether its parent
// lists it as required.
func Attribute(s *structuralschema.Structural, mode Mode, required bool) (schema.Attribute, error) {
	desc := description(s)
	flags := attrFlags{Computed: mode == Reported}
	if mode == Configurable {
		hasDefault := s.Default.Object != nil
		flags = attrFlags{Required: required && !hasDefault, Optional: !required || hasDefault, Computed: hasDefault}
	}
	var dflt attr.Value
	if mode == Configurable && s.Default.Object != nil {
		v, err := defaultValue(s)
		if err != nil {
			return nil, err
		}
		dflt = v
	}
	switch {
	case s.XIntOrString || s.Type == "string":
		a := schema.StringAttribute{Required: flags.Required, Optional: flags.Optional, Computed: flags.Computed, Description: desc, MarkdownDescription: desc}
		if dflt != nil {
			a.Default = stringdefault.StaticString(dflt.(types.String).ValueString())
		}
		return a, nil
	case s.Type == "integer":
		a := schema.Int64Attribute{Required: flags.Required, Optional: flags.Optional, Computed: flags.Computed, Description: desc, MarkdownDescription: desc}
		if dflt != nil {
			a.Default = int64default.StaticInt64(dflt.(types.Int64).ValueInt64())
		}
		return a, nil
	case s.Type == "number":
		a := schema.Float64Attribute{Required: flags.Required, Optional: flags.Optional, Computed: flags.Computed, Description: desc, MarkdownDescription: desc}
		if dflt != nil {
			a.Default = float64default.StaticFloat64(dflt.(types.Float64).ValueFloat64())
		}
		return a, nil
	case s.Type == "boolean":
		a := schema.BoolAttribute{Required: flags.Required, Optional: flags.Optional, Computed: flags.Computed, Description: desc, MarkdownDescription: desc}
		if dflt != nil {
			a.Default = booldefault.StaticBool(dflt.(types.Bool).ValueBool())
		}
		return a, nil
	case s.Type == "array" && s.Items != nil && isObject(s.Items):
		nested, err := Attributes(s.Items, mode)
		if err != nil {
			return nil, err
		}
		a := schema.ListNestedAttribute{Required: flags.Required, Optional: flags.Optional, Computed: flags.Computed, Description: desc, MarkdownDescription: desc,
			NestedObject: schema.NestedAttributeObject{Attributes: nested}}
		if dflt != nil {
			a.Default = listdefault.StaticValue(dflt.(types.List))
		}
		return a, nil
	case s.Type == "array" && s.Items != nil:
		elem, err := elementType(s.Items)
		if err != nil {
			return nil, err
		}
		a := schema.ListAttribute{Required: flags.Required, Optional: flags.Optional, Computed: flags.Computed, Description: desc, MarkdownDescription: desc, ElementType: elem}
		if dflt != nil {
			a.Default = listdefault.StaticValue(dflt.(types.List))
		}
		return a, nil
	case s.Type == "object" && s.AdditionalProperties != nil && s.AdditionalProperties.Structural != nil:
		values := s.AdditionalProperties.Structural
		if isObject(values) {
			nested, err := Attributes(values, mode)
			if err != nil {
				return nil, err
			}
			return schema.MapNestedAttribute{Required: flags.Required, Optional: flags.Optional, Computed: flags.Computed, Description: desc, MarkdownDescription: desc,
				NestedObject: schema.NestedAttributeObject{Attributes: nested}}, nil
		}
		elem, err := elementType(values)
		if err != nil {
			return nil, err
		}
		a := schema.MapAttribute{Required: flags.Required, Optional: flags.Optional, Computed: flags.Computed, Description: desc, MarkdownDescription: desc, ElementType: elem}
		if dflt != nil {
			a.Default = mapdefault.StaticValue(dflt.(types.Map))
		}
		return a, nil
	case isObject(s):
		nested, err := Attributes(s, mode)
		if err != nil {
			return nil, err
		}
		a := schema.SingleNestedAttribute{Required: flags.Required, Optional: flags.Optional, Computed: flags.Computed, Description: desc, MarkdownDescription: desc, Attributes: nested}
		if dflt != nil {
			a.Default = objectdefault.StaticValue(dflt.(types.Object))
		}
		return a, nil
	}
	return nil, fmt.Errorf("field of type %q has no Terraform equivalent", s.Type)
}

type attrFlags struct{ Required, Optional, Computed bool }

// Attributes builds the attributes of an object's properties.
func Attributes(s *structuralschema.Structural, mode Mode) (map[string]schema.Attribute, error) {
	required := map[string]bool{}
	if s.ValueValidation != nil {
		for _, r := range s.ValueValidation.Required {
			required[r] = true
		}
	}
	out := map[string]schema.Attribute{}
	for name, prop := range s.Properties {
		a, err := Attribute(&prop, mode, required[name])
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		out[Snake(name)] = a
	}
	return out, nil
}

func isObject(s *structuralschema.Structural) bool {
	return s.Type == "object" && len(s.Properties) > 0
}

// elementType is the Terraform type of a scalar list or map element.
func elementType(s *structuralschema.Structural) (attr.Type, error) {
	switch {
	case s.XIntOrString || s.Type == "string":
		return types.StringType, nil
	case s.Type == "integer":
		return types.Int64Type, nil
	case s.Type == "number":
		return types.Float64Type, nil
	case s.Type == "boolean":
		return types.BoolType, nil
	}
	return nil, fmt.Errorf("collection of %q has no Terraform equivalent", s.Type)
}

func description(s *structuralschema.Structural) string {
	desc := strings.TrimSpace(s.Generic.Description)
	if s.ValueValidation != nil && len(s.ValueValidation.Enum) > 0 {
		var values []string
		for _, e := range s.ValueValidation.Enum {
			values = append(values, fmt.Sprintf("%v", e.Object))
		}
		sort.Strings(values)
		desc = strings.TrimSuffix(desc, ".") + ". One of: " + strings.Join(values, ", ") + "."
	}
	if s.Default.Object != nil {
		raw, _ := json.Marshal(s.Default.Object)
		desc = strings.TrimSuffix(desc, ".") + ". Defaults to " + string(raw) + "."
	}
	return desc
}

// defaultValue is a field's CRD default as a Terraform value, with the defaults of its
// own fields filled in the way the API server fills them.
func defaultValue(s *structuralschema.Structural) (attr.Value, error) {
	holder := map[string]any{"v": deepCopyValue(s.Default.Object)}
	defaulting.Default(holder, &structuralschema.Structural{Generic: structuralschema.Generic{Type: "object"},
		Properties: map[string]structuralschema.Structural{"v": *s}})
	a, err := attributeWithoutDefault(s)
	if err != nil {
		return nil, err
	}
	typ := a.GetType()
	tv, err := FromUnstructured(holder["v"], s, typ.TerraformType(context.Background()))
	if err != nil {
		return nil, fmt.Errorf("converting the default %v, %w", s.Default.Object, err)
	}
	return typ.ValueFromTerraform(context.Background(), tv)
}

// attributeWithoutDefault gives the type of a defaulted field without recursing into
// its own default.
func attributeWithoutDefault(s *structuralschema.Structural) (schema.Attribute, error) {
	c := *s
	c.Default.Object = nil
	return Attribute(&c, Configurable, false)
}

func deepCopyValue(v any) any {
	raw, _ := json.Marshal(v)
	var out any
	_ = json.Unmarshal(raw, &out)
	return normalizeNumbers(out)
}

// normalizeNumbers turns JSON float64 whole numbers into int64 the way unstructured
// objects hold them.
func normalizeNumbers(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = normalizeNumbers(e)
		}
	case []any:
		for i, e := range x {
			x[i] = normalizeNumbers(e)
		}
	case float64:
		if x == float64(int64(x)) {
			return int64(x)
		}
	}
	return v
}
