package crdschema

import (
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
)

// Quote writes strings Terraform reads back unchanged, whatever they hold: a bash
// script's ${HOSTNAME}, a %{ directive, what would be a valid reference
// (${var.x}), quotes and backslashes, with and without a final newline.
func TestQuoteReadsBackUnchanged(t *testing.T) {
	for _, s := range []string{
		"plain",
		"",
		"#!/bin/bash\necho \"node ${HOSTNAME}\" > /etc/motd\nexport X=%{x}\necho ${var.cluster_name}\n",
		"no newline at the end ${HOSTNAME}\nsecond line",
		"EOT\nEOT\n",
		"a \"quoted\" \\ backslash\tand tab",
		"$${already} %%{escaped}",
		"MIME-Version: 1.0\r\nContent-Type: multipart/mixed\r\n",
		"${",
		"%{",
		"trailing $",
	} {
		src := "v = " + Quote(s) + "\n"
		f, diags := hclsyntax.ParseConfig([]byte(src), "test.tf", hcl.InitialPos)
		if diags.HasErrors() {
			t.Fatalf("%q written as\n%s\ndoes not parse: %s", s, src, diags)
		}
		attrs, _ := f.Body.JustAttributes()
		// No variables: a reference that survived escaping fails here.
		v, diags := attrs["v"].Expr.Value(&hcl.EvalContext{})
		if diags.HasErrors() {
			t.Fatalf("%q written as\n%s\ndoes not evaluate: %s", s, src, diags)
		}
		if !v.Type().Equals(cty.String) || v.AsString() != s {
			t.Errorf("%q written as\n%s\nreads back as %#v", s, src, v)
		}
	}
}
