package crdschema

import (
	"strconv"
	"strings"
	"unicode"

	"github.com/hashicorp/terraform-plugin-framework/path"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
)

// Snake is the Terraform name of a Kubernetes field: consolidateAfter →
// consolidate_after, associatePublicIPAddress → associate_public_ip_address.
func Snake(name string) string {
	// "IPv6" would otherwise split as I_pv6.
	name = strings.NewReplacer("IPv6", "Ipv6", "IPv4", "Ipv4").Replace(name)
	runes := []rune(name)
	var b strings.Builder
	for i, r := range runes {
		if unicode.IsUpper(r) {
			prevLower := i > 0 && (unicode.IsLower(runes[i-1]) || unicode.IsDigit(runes[i-1]))
			endOfAcronym := i > 0 && unicode.IsUpper(runes[i-1]) && i+1 < len(runes) && unicode.IsLower(runes[i+1])
			if prevLower || endOfAcronym {
				b.WriteByte('_')
			}
			r = unicode.ToLower(r)
		}
		b.WriteRune(r)
	}
	return b.String()
}

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
