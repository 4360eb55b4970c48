package crdschema

import (
	"errors"
	"fmt"
	"math/big"
	"strconv"

	"github.com/hashicorp/terraform-plugin-go/tftypes"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
)

// ErrUnknown says a value is not known yet (it depends on another resource).
var ErrUnknown = errors.New("value not known until apply")

// ToUnstructured turns a Terraform value into the JSON-shaped value the API server
// takes, with Kubernetes field names. Null becomes nil, which callers omit.
func ToUnstructured(v tftypes.Value, s *structuralschema.Structural) (any, error) {
	if !v.IsFullyKnown() {
		return nil, ErrUnknown
	}
	if v.IsNull() {
		return nil, nil
	}
	switch {
	case v.Type().Is(tftypes.String):
		var str string
		if err := v.As(&str); err != nil {
			return nil, err
		}
		return str, nil
	case v.Type().Is(tftypes.Bool):
		var b bool
		if err := v.As(&b); err != nil {
			return nil, err
		}
		return b, nil
	case v.Type().Is(tftypes.Number):
		var f big.Float
		if err := v.As(&f); err != nil {
			return nil, err
		}
		if s.Type == "integer" {
			i, _ := f.Int64()
			return i, nil
		}
		x, _ := f.Float64()
		return x, nil
	case v.Type().Is(tftypes.List{}):
		var elems []tftypes.Value
		if err := v.As(&elems); err != nil {
			return nil, err
		}
		out := make([]any, 0, len(elems))
		for i, e := range elems {
			x, err := ToUnstructured(e, s.Items)
			if err != nil {
				return nil, fmt.Errorf("[%d]: %w", i, err)
			}
			out = append(out, x)
		}
		return out, nil
	case v.Type().Is(tftypes.Map{}):
		var elems map[string]tftypes.Value
		if err := v.As(&elems); err != nil {
			return nil, err
		}
		out := make(map[string]any, len(elems))
		for k, e := range elems {
			x, err := ToUnstructured(e, s.AdditionalProperties.Structural)
			if err != nil {
				return nil, fmt.Errorf("[%s]: %w", k, err)
			}
			out[k] = x
		}
		return out, nil
	case v.Type().Is(tftypes.Object{}):
		var attrs map[string]tftypes.Value
		if err := v.As(&attrs); err != nil {
			return nil, err
		}
		out := map[string]any{}
		for name, prop := range s.Properties {
			a, ok := attrs[Snake(name)]
			if !ok {
				continue
			}
			x, err := ToUnstructured(a, &prop)
			if err != nil {
				return nil, fmt.Errorf(".%s%w", name, err)
			}
			if x != nil {
				out[name] = x
			}
		}
		return out, nil
	}
	return nil, fmt.Errorf("unsupported Terraform type %s", v.Type())
}

// FromUnstructured turns a value read from the API server into a Terraform value of
// type t. Fields the schema does not know are dropped, as the API server prunes them.
func FromUnstructured(x any, s *structuralschema.Structural, t tftypes.Type) (tftypes.Value, error) {
	if x == nil {
		return tftypes.NewValue(t, nil), nil
	}
	switch {
	case t.Is(tftypes.String):
		switch v := x.(type) {
		case string:
			return tftypes.NewValue(t, v), nil
		case int64:
			return tftypes.NewValue(t, strconv.FormatInt(v, 10)), nil
		case float64:
			return tftypes.NewValue(t, strconv.FormatFloat(v, 'f', -1, 64)), nil
		case bool:
			return tftypes.NewValue(t, strconv.FormatBool(v)), nil
		}
	case t.Is(tftypes.Bool):
		if v, ok := x.(bool); ok {
			return tftypes.NewValue(t, v), nil
		}
	case t.Is(tftypes.Number):
		switch v := x.(type) {
		case int64:
			return tftypes.NewValue(t, new(big.Float).SetInt64(v)), nil
		case int:
			return tftypes.NewValue(t, new(big.Float).SetInt64(int64(v))), nil
		case float64:
			return tftypes.NewValue(t, big.NewFloat(v)), nil
		}
	case t.Is(tftypes.List{}):
		items, ok := x.([]any)
		if !ok {
			break
		}
		elemType := t.(tftypes.List).ElementType
		out := make([]tftypes.Value, 0, len(items))
		for i, item := range items {
			v, err := FromUnstructured(item, s.Items, elemType)
			if err != nil {
				return tftypes.Value{}, fmt.Errorf("[%d]: %w", i, err)
			}
			out = append(out, v)
		}
		return tftypes.NewValue(t, out), nil
	case t.Is(tftypes.Map{}):
		m, ok := x.(map[string]any)
		if !ok {
			break
		}
		elemType := t.(tftypes.Map).ElementType
		out := make(map[string]tftypes.Value, len(m))
		for k, item := range m {
			v, err := FromUnstructured(item, s.AdditionalProperties.Structural, elemType)
			if err != nil {
				return tftypes.Value{}, fmt.Errorf("[%s]: %w", k, err)
			}
			out[k] = v
		}
		return tftypes.NewValue(t, out), nil
	case t.Is(tftypes.Object{}):
		m, ok := x.(map[string]any)
		if !ok {
			break
		}
		attrTypes := t.(tftypes.Object).AttributeTypes
		out := make(map[string]tftypes.Value, len(attrTypes))
		for snake, at := range attrTypes {
			name, ok := jsonName(s, snake)
			if !ok {
				out[snake] = tftypes.NewValue(at, nil)
				continue
			}
			prop := s.Properties[name]
			v, err := FromUnstructured(m[name], &prop, at)
			if err != nil {
				return tftypes.Value{}, fmt.Errorf(".%s%w", name, err)
			}
			out[snake] = v
		}
		return tftypes.NewValue(t, out), nil
	}
	return tftypes.Value{}, fmt.Errorf(": the API server returned %T where the schema has %s", x, t)
}
