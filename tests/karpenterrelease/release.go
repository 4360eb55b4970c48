// Package karpenterrelease names the Karpenter release Dovetail is compatible with
// and reads that release's published files (CRDs, chart values) from the Go module
// cache, so tests compare against Karpenter's own files rather than copies of them.
package karpenterrelease

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
)

// Target is the Karpenter release Dovetail claims to be compatible with; every page
// that names it says this one (tests/repo checks).
const Target = "v1.15.1"

// Version is the Karpenter release our CRDs, chart values and behaviour are compared
// with. v1.15.1 changed no API field or values key, so v1.15.0's modules stand for it.
const Version = "v1.15.0"

// Toolchain is the Go toolchain the go command needs to download Version's modules:
// their go.mod asks for a newer Go than the project's. The go command fetches it from
// the module proxy once per machine; only the download runs under it.
const Toolchain = "go1.27.3"

// Modules are the two modules a Karpenter release on AWS is made of.
var Modules = []string{"sigs.k8s.io/karpenter", "github.com/aws/karpenter-provider-aws"}

// ModuleDir downloads module@version into the module cache (a no-op when it is
// there) and returns its directory.
func ModuleDir(module, version string) (string, error) {
	scratch, err := os.MkdirTemp("", "karpenterrelease")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(scratch)
	cmd := exec.Command("go", "mod", "download", "-json", module+"@"+version)
	cmd.Dir = scratch
	cmd.Env = append(os.Environ(), "GOTOOLCHAIN="+Toolchain)
	out, runErr := cmd.Output()
	var mod struct{ Dir, Error string }
	if err := json.Unmarshal(out, &mod); err != nil || mod.Dir == "" || mod.Error != "" {
		return "", fmt.Errorf("GOTOOLCHAIN=%s go mod download %s@%s: %s %v %v", Toolchain, module, version, mod.Error, runErr, err)
	}
	return mod.Dir, nil
}
