package crdschema

import (
	"strconv"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/path"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
)

// jsonName finds the Kubernetes field behind a Terraform attribute name.
func jsonName(s *structuralschema.Structural, snake string) (string, bool) {
	for name := range s.Properties {
		if Snake(name) == snake {
			return name, true
		}
	}
	return "", false
}

// AttributePath turns an API server field path (spec.template.spec.requirements[0].key,
// spec.limits[cpu]) into the Terraform path of the same value, below root, and
// returns the schema of the deepest field it could follow.
func AttributePath(root path.Path, s *structuralschema.Structural, fieldPath string) (path.Path, *structuralschema.Structural) {
	p := root
	for _, seg := range splitFieldPath(fieldPath) {
		switch {
		case seg.index != nil && s.Items != nil:
			p, s = p.AtListIndex(*seg.index), s.Items
		case seg.key != "" && s.AdditionalProperties != nil && s.AdditionalProperties.Structural != nil:
			p, s = p.AtMapKey(seg.key), s.AdditionalProperties.Structural
		case seg.name != "":
			prop, ok := s.Properties[seg.name]
			if !ok {
				return p, s
			}
			p, s = p.AtName(Snake(seg.name)), &prop
		default:
			return p, s
		}
	}
	return p, s
}

type pathSegment struct {
	name  string
	index *int
	key   string
}

// splitFieldPath parses the field.Path string form; map keys in brackets may hold dots.
func splitFieldPath(s string) []pathSegment {
	var out []pathSegment
	for len(s) > 0 {
		switch s[0] {
		case '.':
			s = s[1:]
		case '[':
			end := strings.IndexByte(s, ']')
			if end < 0 {
				return out
			}
			inner := s[1:end]
			if i, err := strconv.Atoi(inner); err == nil {
				out = append(out, pathSegment{index: &i})
			} else {
				out = append(out, pathSegment{key: inner})
			}
			s = s[end+1:]
		default:
			end := strings.IndexAny(s, ".[")
			if end < 0 {
				end = len(s)
			}
			out = append(out, pathSegment{name: s[:end]})
			s = s[end:]
		}
	}
	return out
}
