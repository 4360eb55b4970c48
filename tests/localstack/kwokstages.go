package localstack

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
)

// stockKwokStages are the stages kwokctl runs kwok with, and which Karpenter's kwok
// provider users run: node-fast's initialize, the node heartbeat, and pod-fast's
// ready, complete and delete. They are read from the kwok module the tools were built
// from (`go mod download`), not copied here, so the tests face what users run.
func stockKwokStages(ctx context.Context, binDir string) ([]byte, error) {
	version, err := kwokVersion(filepath.Join(filepath.Dir(binDir), "hack", "build-tools.sh"))
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, "go", "mod", "download", "-json", "sigs.k8s.io/kwok@"+version)
	cmd.Dir = os.TempDir()
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go mod download sigs.k8s.io/kwok@%s, %w: %s", version, err, out)
	}
	var mod struct{ Dir, Error string }
	if err := json.Unmarshal(out, &mod); err != nil || mod.Dir == "" {
		return nil, fmt.Errorf("go mod download sigs.k8s.io/kwok@%s: %s %v", version, mod.Error, err)
	}
	var stages bytes.Buffer
	for _, f := range []string{"node/fast/node-initialize.yaml", "node/heartbeat/node-heartbeat.yaml",
		"pod/fast/pod-ready.yaml", "pod/fast/pod-complete.yaml", "pod/fast/pod-delete.yaml"} {
		raw, err := os.ReadFile(filepath.Join(mod.Dir, "kustomize", "stage", f))
		if err != nil {
			return nil, fmt.Errorf("reading kwok's stock stage %s, %w", f, err)
		}
		stages.WriteString("---\n")
		stages.Write(raw)
		stages.WriteString("\n")
	}
	return stages.Bytes(), nil
}

// kwokVersion is the kwok version hack/build-tools.sh builds.
func kwokVersion(buildTools string) (string, error) {
	raw, err := os.ReadFile(buildTools)
	if err != nil {
		return "", err
	}
	m := regexp.MustCompile(`KWOK_VERSION=\$\{KWOK_VERSION:-([^}]+)\}`).FindSubmatch(raw)
	if m == nil {
		return "", fmt.Errorf("no KWOK_VERSION in %s", buildTools)
	}
	return string(m[1]), nil
}
