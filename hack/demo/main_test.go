package main

import (
	"bufio"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/dovetail-sh/dovetail/tests/testenv"
)

// The demo is the README's main command: it must run to the end, which includes its
// own checks (the second plan is empty, every pod runs after the scale-up and after
// the interruption, consolidation removes every empty node, and destroy leaves no instance,
// NodeClaim, CRD, IAM role or queue). It runs on fresh builds of the controller and
// the provider, next to the control-plane binaries of `make tools`.
func TestDemoRunsToTheEnd(t *testing.T) {
	root, bin := demoBinaries(t)
	if err := run(context.Background(), root, bin, 16, false); err != nil {
		t.Fatal(err)
	}
}

// Ctrl-C in the middle of `terraform apply` must leave no process of the demo's
// running and no working directory behind. Only the demo gets the signal here (a
// terminal would signal its children too), so its own clean-up is what is tested.
func TestDemoStopsEverythingOnInterrupt(t *testing.T) {
	root, bin := demoBinaries(t)
	demo := filepath.Join(bin, "demo")
	build := exec.Command("go", "build", "-o", demo, "./hack/demo")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the demo: %v\n%s", err, out)
	}
	cmd := exec.Command(demo, "--bin", bin)
	cmd.Dir = root
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })

	// The first note names the working directory (the kubeconfig is in it) and moto's port.
	upLine := regexp.MustCompile(`kubeconfig: (\S+)/kubeconfig, AWS: http://127\.0\.0\.1:(\d+)`)
	var workDir, motoPort string
	var output strings.Builder
	lines := bufio.NewScanner(stdout)
	for lines.Scan() {
		output.WriteString(lines.Text() + "\n")
		if m := upLine.FindStringSubmatch(lines.Text()); m != nil {
			workDir, motoPort = m[1], m[2]
		}
		if strings.Contains(lines.Text(), "terraform apply of examples/quickstart") {
			break
		}
	}
	if workDir == "" {
		t.Fatalf("the demo never reached terraform apply or did not name its directory:\n%s\n%s", output.String(), stderr.String())
	}
	// Into terraform's run (the whole apply takes about 3 s).
	time.Sleep(1500 * time.Millisecond)
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		for lines.Scan() {
			output.WriteString(lines.Text() + "\n")
		}
		done <- cmd.Wait()
	}()
	select {
	case err := <-done:
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 130 || !strings.Contains(stderr.String(), "demo: interrupted") {
			t.Errorf("the interrupted demo ended with %v, want exit code 130 and a note that it was interrupted:\n%s\n%s", err, output.String(), stderr.String())
		}
	case <-time.After(2 * time.Minute):
		_ = cmd.Process.Kill()
		<-done // the reader is done with output
		t.Fatalf("the demo did not stop within 2 minutes of the interrupt:\n%s\n%s", output.String(), stderr.String())
	}
	if !strings.Contains(output.String(), "Stopping everything the demo started") {
		t.Errorf("the demo did not say it was stopping what it started:\n%s", output.String())
	}
	if left := processesOf(t, workDir, bin, "-p "+motoPort); len(left) > 0 {
		t.Errorf("still running after the demo exited:\n%s", strings.Join(left, "\n"))
	}
	if _, err := os.Stat(workDir); !os.IsNotExist(err) {
		t.Errorf("the working directory %s is still there (%v)", workDir, err)
	}
}

// demoBinaries builds the controller and the provider into a fresh directory beside
// links to the control-plane binaries of `make tools`.
func demoBinaries(t *testing.T) (root, bin string) {
	t.Helper()
	if testing.Short() {
		t.Skip("runs the demo on the local stack and moto_server")
	}
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	tools := testenv.BinDir(t)
	bin = t.TempDir()
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
	return root, bin
}

// processesOf lists the live processes whose command line or executable mentions
// any of marks (the demo's directories, moto's port).
func processesOf(t *testing.T, marks ...string) []string {
	t.Helper()
	pids, err := filepath.Glob("/proc/[0-9]*")
	if err != nil {
		t.Fatal(err)
	}
	var found []string
	for _, dir := range pids {
		raw, err := os.ReadFile(filepath.Join(dir, "cmdline"))
		if err != nil || len(raw) == 0 {
			continue // gone meanwhile, or a kernel thread
		}
		cmdline := strings.Join(strings.Split(strings.TrimRight(string(raw), "\x00"), "\x00"), " ")
		exe, _ := os.Readlink(filepath.Join(dir, "exe"))
		if stat, err := os.ReadFile(filepath.Join(dir, "stat")); err == nil && strings.Contains(string(stat), ") Z ") {
			continue // a zombie has released everything; only its parent's wait is missing
		}
		for _, mark := range marks {
			if strings.Contains(cmdline, mark) || strings.Contains(exe, mark) {
				found = append(found, filepath.Base(dir)+": "+cmdline)
				break
			}
		}
	}
	return found
}
