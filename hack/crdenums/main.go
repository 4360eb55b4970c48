// Command crdenums adds what controller-gen cannot express to the generated CRDs: the
// NodePool's and NodeClaim's taints reuse corev1.Taint, whose effect is a plain
// string there, while Karpenter's CRDs (and the kubelet) accept only the three
// effects. Without the enum `NoScheduel` passes plan, apply and the controller.
package main

import (
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strings"
)

var effects = []string{"NoSchedule", "PreferNoSchedule", "NoExecute"}

func main() {
	files, err := filepath.Glob(filepath.Join("charts", "dovetail", "crds", "*.yaml"))
	if err != nil || len(files) == 0 {
		log.Fatalf("crdenums: no CRDs under charts/dovetail/crds (run from the repository root): %v", err)
	}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			log.Fatal(err)
		}
		out, n := addEffectEnums(string(raw))
		if n == 0 {
			continue
		}
		if err := os.WriteFile(f, []byte(out), 0o644); err != nil {
			log.Fatal(err)
		}
		fmt.Fprintf(os.Stderr, "crdenums: %s: %d taint effects\n", f, n)
	}
}

// addEffectEnums puts the enum before the `type: string` of every taint's `effect:`
// property (controller-gen sorts keys: description, enum, type), once.
func addEffectEnums(doc string) (string, int) {
	lines := strings.Split(doc, "\n")
	var out []string
	n := 0
	for i := 0; i < len(lines); i++ {
		out = append(out, lines[i])
		indent, ok := strings.CutSuffix(lines[i], "effect:")
		if !ok || strings.TrimSpace(indent) != "" {
			continue
		}
		inner := indent + "  "
		for i+1 < len(lines) && strings.HasPrefix(lines[i+1], inner) && lines[i+1] != inner+"type: string" && lines[i+1] != inner+"enum:" {
			i++
			out = append(out, lines[i])
		}
		if i+1 < len(lines) && lines[i+1] == inner+"type: string" {
			out = append(out, inner+"enum:")
			for _, e := range effects {
				out = append(out, inner+"- "+e)
			}
			n++
		}
	}
	return strings.Join(out, "\n"), n
}
