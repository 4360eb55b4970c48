package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestCLILinksNoProvider: the dovetail CLI (render, simulate, explain, migrate) is
// shipped on its own, so it must not carry the Terraform provider or its
// framework (migrate writes HCL through controller/crdschema for that reason), nor
// a controller: predictions build the engine's input with controller/engineinput
// and read the controller's settings with controller/operator/settings, as the
// controller does, without standing one up.
func TestCLILinksNoProvider(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	forbidden := []string{
		"github.com/dovetail-sh/dovetail/provider",
		"github.com/hashicorp/terraform-plugin-framework",
		"github.com/hashicorp/terraform-plugin-go",
		"github.com/dovetail-sh/dovetail/controller/controllers",
		"github.com/dovetail-sh/dovetail/controller/operator",
	}
	for _, pkg := range strings.Fields(string(out)) {
		for _, f := range forbidden {
			if (pkg == f || strings.HasPrefix(pkg, f+"/")) && !strings.HasPrefix(pkg, "github.com/dovetail-sh/dovetail/controller/operator/settings") {
				t.Errorf("the CLI links %s", pkg)
			}
		}
	}
}
