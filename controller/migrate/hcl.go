package migrate

import (
	"bytes"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/hashicorp/hcl/v2/hclwrite"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"

	"github.com/dovetail-sh/dovetail/controller/crdschema"
	"github.com/dovetail-sh/dovetail/templates/crds"
)

// resourceTypes are the Terraform resources of the kinds migrate writes.
var resourceTypes = map[string]string{"NodePool": "dovetail_node_pool", "EC2NodeClass": "dovetail_ec2_node_class"}

// WriteHCL writes the objects as dovetail_node_pool and dovetail_ec2_node_class
// resources, typed by the same CRD schemas the provider's attributes come from; a
// pool's class reference is a Terraform reference when the class is written too.
func WriteHCL(out io.Writer, res *Result) error {
	var w bytes.Buffer
	if err := writeHCL(&w, res); err != nil {
		return err
	}
	// Formatted as terraform fmt formats, so a GitOps repository's fmt check passes.
	_, err := out.Write(hclwrite.Format(w.Bytes()))
	return err
}

func writeHCL(w io.Writer, res *Result) error {
	specs, err := specSchemas()
	if err != nil {
		return err
	}
	classes := map[string]bool{}
	for _, o := range res.Objects {
		if o.Kind == "EC2NodeClass" {
			classes[o.Name] = true
		}
	}
	for i, o := range res.Objects {
		if i > 0 {
			if _, err := io.WriteString(w, "\n"); err != nil {
				return err
			}
		}
		spec := o.spec()
		if o.Kind == "NodePool" {
			if ref := mapOf(dig(spec, "template", "spec", "nodeClassRef")); ref != nil && classes[str(ref, "name")] {
				ref["name"] = crdschema.Reference(fmt.Sprintf("%s.%s.name", resourceTypes["EC2NodeClass"], hclName(str(ref, "name"))))
			}
		}
		for _, n := range o.Notes {
			if _, err := fmt.Fprintf(w, "# dovetail migrate: %s\n", n); err != nil {
				return err
			}
		}
		body, err := crdschema.HCL(spec, specs[o.Kind], 1)
		if err != nil {
			return fmt.Errorf("writing %s %s as HCL, %w", o.Kind, o.Name, err)
		}
		if _, err := fmt.Fprintf(w, "resource %q %q {\n  name = %q\n", resourceTypes[o.Kind], hclName(o.Name), o.Name); err != nil {
			return err
		}
		meta := mapOf(o.Body["metadata"])
		for _, k := range []string{"labels", "annotations"} {
			if m := mapOf(meta[k]); len(m) > 0 {
				if _, err := fmt.Fprintf(w, "  %s = %s\n", k, stringMap(m)); err != nil {
					return err
				}
			}
		}
		if _, err := fmt.Fprintf(w, "  spec = %s\n}\n", body); err != nil {
			return err
		}
	}
	return nil
}

func specSchemas() (map[string]*structuralschema.Structural, error) {
	crds, err := crds.CRDs()
	if err != nil {
		return nil, err
	}
	out := map[string]*structuralschema.Structural{}
	for _, crd := range crds {
		if _, ok := resourceTypes[crd.Spec.Names.Kind]; !ok {
			continue
		}
		k, err := crdschema.Load(crd)
		if err != nil {
			return nil, err
		}
		out[crd.Spec.Names.Kind] = k.Property("spec")
	}
	return out, nil
}

// stringMap writes a map of strings as an HCL object with quoted keys.
func stringMap(m map[string]any) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	b.WriteString("{\n")
	for _, k := range keys {
		fmt.Fprintf(&b, "    %s = %s\n", crdschema.Quote(k), crdschema.Quote(fmt.Sprint(m[k])))
	}
	b.WriteString("  }")
	return b.String()
}
