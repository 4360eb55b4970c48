package crdschema

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/hashicorp/hcl/v2/hclwrite"
	"github.com/zclconf/go-cty/cty"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
)

// Reference is a Terraform expression written in place of a string value.
type Reference string

// HCL writes a Kubernetes value as the HCL the provider's attribute for schema s
// takes: object fields by their Terraform names, map keys quoted as they are, and
// scalars by the schema's type (an int-or-string quantity as a string). indent is
// the current depth in two-space steps.
func HCL(v any, s *structuralschema.Structural, indent int) (string, error) {
	var b strings.Builder
	if err := writeHCL(&b, v, s, indent); err != nil {
		return "", err
	}
	return b.String(), nil
}

func writeHCL(b *strings.Builder, v any, s *structuralschema.Structural, indent int) error {
	pad := strings.Repeat("  ", indent+1)
	end := strings.Repeat("  ", indent)
	switch {
	case s == nil:
		return fmt.Errorf("no schema for value %v", v)
	case s.Type == "array":
		items, ok := v.([]any)
		if !ok {
			return fmt.Errorf("%v is not a list", v)
		}
		if len(items) == 0 {
			b.WriteString("[]")
			return nil
		}
		b.WriteString("[\n")
		for _, it := range items {
			b.WriteString(pad)
			if err := writeHCL(b, it, s.Items, indent+1); err != nil {
				return err
			}
			b.WriteString(",\n")
		}
		b.WriteString(end + "]")
	case s.Type == "object" && s.AdditionalProperties != nil && s.AdditionalProperties.Structural != nil:
		m, ok := v.(map[string]any)
		if !ok {
			return fmt.Errorf("%v is not a map", v)
		}
		b.WriteString("{\n")
		for _, k := range sortedKeys(m) {
			b.WriteString(pad + Quote(k) + " = ")
			if err := writeHCL(b, m[k], s.AdditionalProperties.Structural, indent+1); err != nil {
				return fmt.Errorf("%s: %w", k, err)
			}
			b.WriteString("\n")
		}
		b.WriteString(end + "}")
	case s.Type == "object":
		m, ok := v.(map[string]any)
		if !ok {
			return fmt.Errorf("%v is not an object", v)
		}
		b.WriteString("{\n")
		for _, k := range sortedKeys(m) {
			prop, ok := s.Properties[k]
			if !ok {
				return fmt.Errorf("field %s is not in the schema", k)
			}
			b.WriteString(pad + Snake(k) + " = ")
			if err := writeHCL(b, m[k], &prop, indent+1); err != nil {
				return fmt.Errorf("%s: %w", k, err)
			}
			b.WriteString("\n")
		}
		b.WriteString(end + "}")
	default:
		return writeScalar(b, v, s)
	}
	return nil
}

func writeScalar(b *strings.Builder, v any, s *structuralschema.Structural) error {
	if ref, ok := v.(Reference); ok {
		b.WriteString(string(ref))
		return nil
	}
	switch {
	case s.XIntOrString || s.Type == "string":
		b.WriteString(Quote(scalarString(v)))
	case s.Type == "integer" || s.Type == "number":
		b.WriteString(scalarString(v))
	case s.Type == "boolean":
		bv, ok := v.(bool)
		if !ok {
			return fmt.Errorf("%v is not true or false", v)
		}
		b.WriteString(strconv.FormatBool(bv))
	default:
		return fmt.Errorf("no HCL for a %q value %v", s.Type, v)
	}
	return nil
}

// Quote writes s as an HCL string that Terraform reads back as s, byte for byte.
// HCL strings are templates: "${" and "%{" begin an interpolation or a directive,
// so a bash script's ${HOSTNAME} would be refused ("Invalid reference") and a
// ${var.x} silently interpolated; both are escaped ($${, %%{). Multi-line text that
// ends in a newline is written as a heredoc, which reads as the text it holds; the
// rest as a quoted string with Go-like escapes, as hclwrite writes it.
func Quote(s string) string {
	if strings.Count(s, "\n") > 1 && strings.HasSuffix(s, "\n") && !strings.ContainsAny(s, "\r\x00") {
		delim := "EOT"
		for strings.HasPrefix(s, delim+"\n") || strings.Contains(s, "\n"+delim+"\n") {
			delim += "_"
		}
		return "<<" + delim + "\n" + escapeTemplate(s) + delim
	}
	return string(hclwrite.TokensForValue(cty.StringVal(s)).Bytes())
}

// escapeTemplate escapes what would begin an interpolation or a directive.
func escapeTemplate(s string) string {
	return strings.NewReplacer("${", "$${", "%{", "%%{").Replace(s)
}

// scalarString writes numbers without a decimal point when they are whole, as
// YAML and JSON readers give them as floats.
func scalarString(v any) string {
	if f, ok := v.(float64); ok && f == float64(int64(f)) {
		return strconv.FormatInt(int64(f), 10)
	}
	return fmt.Sprint(v)
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
