package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/dovetail-sh/dovetail/tests/testenv"
)

// The demo is the README's main command: it must run to the end, which includes its
// own checks (the second plan is empty, every pod runs after the scale-up and after
// the interruption, consolidation removes every empty node, and destroy leaves no instance,
// NodeClaim, CRD, IAM role or queue). It runs on fresh builds of the controller and
// the provider, next to the control-plane binaries of `make tools`.
func TestDemoRunsToTheEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the whole demo on the local stack and moto_server")
	}
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	tools := testenv.BinDir(t)
	bin := t.TempDir()
	for _, name := range []string{"etcd", "kube-apiserver", "kube-scheduler", "kube-controller-manager", "kwok"} {
		if err := os.Symlink(filepath.Join(tools, name), filepath.Join(bin, name)); err != nil {
			t.Fatal(err)
		}
	}
	for name, pkg := range map[string]string{"dovetail-controller": "./controller/cmd/controller", "terraform-provider-dovetail": "./provider/cmd/terraform-provider-dovetail"} {
		cmd := exec.Command("go", "build", "-o", filepath.Join(bin, name), pkg)
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("building %s: %v\n%s", name, err, out)
		}
	}
	if err := run(context.Background(), root, bin, 16, false); err != nil {
		t.Fatal(err)
	}
}
