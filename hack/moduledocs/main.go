// Command moduledocs writes the inputs and outputs tables of each module's README
// from its variables.tf and outputs.tf, between the BEGIN/END markers, so the tables
// cannot drift from the code (`make generate`; CI fails on a diff).
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/hashicorp/terraform-config-inspect/tfconfig"
)

const (
	begin = "<!-- BEGIN GENERATED INPUTS AND OUTPUTS: make generate -->"
	end   = "<!-- END GENERATED INPUTS AND OUTPUTS -->"
)

func main() {
	dirs, err := filepath.Glob("modules/*")
	if err != nil {
		fail(err)
	}
	for _, dir := range dirs {
		if err := write(dir); err != nil {
			fail(err)
		}
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "moduledocs:", err)
	os.Exit(1)
}

func write(dir string) error {
	mod, diags := tfconfig.LoadModule(dir)
	if diags.HasErrors() {
		return fmt.Errorf("%s: %w", dir, diags.Err())
	}
	readme := filepath.Join(dir, "README.md")
	raw, err := os.ReadFile(readme)
	if err != nil {
		return fmt.Errorf("%s needs a README.md with the markers %q and %q, %w", dir, begin, end, err)
	}
	text := string(raw)
	i, j := strings.Index(text, begin), strings.Index(text, end)
	if i < 0 || j < i {
		return fmt.Errorf("%s lacks the markers %q and %q", readme, begin, end)
	}
	out := text[:i+len(begin)] + "\n" + tables(mod) + text[j:]
	return os.WriteFile(readme, []byte(out), 0o644)
}

func tables(mod *tfconfig.Module) string {
	var b strings.Builder
	b.WriteString("## Inputs\n\n| Name | Description | Type | Default | Required |\n|------|-------------|------|---------|:--------:|\n")
	for _, v := range sortedVariables(mod) {
		def, required := "n/a", "yes"
		if !v.Required {
			def, required = "`"+defaultText(v.Default)+"`", "no"
		}
		fmt.Fprintf(&b, "| %s | %s | `%s` | %s | %s |\n", v.Name, cell(v.Description), cell(oneLine(v.Type)), cell(def), required)
	}
	b.WriteString("\n## Outputs\n\n| Name | Description |\n|------|-------------|\n")
	names := make([]string, 0, len(mod.Outputs))
	for n := range mod.Outputs {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(&b, "| %s | %s |\n", n, cell(mod.Outputs[n].Description))
	}
	return b.String()
}

// sortedVariables puts required inputs first, then by name.
func sortedVariables(mod *tfconfig.Module) []*tfconfig.Variable {
	vars := make([]*tfconfig.Variable, 0, len(mod.Variables))
	for _, v := range mod.Variables {
		vars = append(vars, v)
	}
	sort.Slice(vars, func(i, j int) bool {
		if vars[i].Required != vars[j].Required {
			return vars[i].Required
		}
		return vars[i].Name < vars[j].Name
	})
	return vars
}

func defaultText(v any) string {
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(data)
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// cell keeps a value inside one Markdown table cell.
func cell(s string) string {
	return strings.ReplaceAll(oneLine(s), "|", "\\|")
}
