package migrate

import (
	"errors"
	"fmt"
	"io"
	"strings"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// Decode reads YAML or JSON documents; a `kind: List` gives its items.
func Decode(r io.Reader) ([]map[string]any, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(r, 4096)
	var out []map[string]any
	for i := 1; ; i++ {
		var doc map[string]any
		if err := dec.Decode(&doc); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, fmt.Errorf("reading document %d, %w", i, err)
		}
		if len(doc) == 0 {
			continue
		}
		if doc["kind"] == "List" {
			items, _ := doc["items"].([]any)
			for _, it := range items {
				if m, ok := it.(map[string]any); ok {
					out = append(out, m)
				}
			}
			continue
		}
		out = append(out, doc)
	}
}

// WriteYAML writes the objects as YAML documents, each after its notes as comments.
func WriteYAML(w io.Writer, res *Result) error {
	for i, o := range res.Objects {
		if i > 0 {
			if _, err := io.WriteString(w, "---\n"); err != nil {
				return err
			}
		}
		for _, n := range o.Notes {
			if _, err := fmt.Fprintf(w, "# dovetail migrate: %s\n", n); err != nil {
				return err
			}
		}
		b, err := yaml.Marshal(o.Body)
		if err != nil {
			return fmt.Errorf("writing %s %s, %w", o.Kind, o.Name, err)
		}
		if _, err := w.Write(b); err != nil {
			return err
		}
	}
	return nil
}

// hclName makes a Terraform resource name of an object name.
func hclName(name string) string {
	return strings.NewReplacer("-", "_", ".", "_").Replace(name)
}
