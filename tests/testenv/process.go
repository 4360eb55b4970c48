package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/dovetail-sh/dovetail/controller/operator"
)

var built struct {
	once sync.Once
	path string
	err  error
}

// ControllerBinary builds the controller from this tree once per test binary: a
// process the test can kill -9, as a node failure or an OOM kill would.
func ControllerBinary(t testing.TB) string {
	t.Helper()
	built.once.Do(func() {
		root, err := RepoRoot()
		if err != nil {
			built.err = err
			return
		}
		dir, err := os.MkdirTemp("", "dovetail-controller-")
		if err != nil {
			built.err = err
			return
		}
		built.path = filepath.Join(dir, "dovetail-controller")
		cmd := exec.Command("go", "build", "-o", built.path, "./controller/cmd/controller")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			built.err = fmt.Errorf("building the controller: %v\n%s", err, out)
		}
	})
	if built.err != nil {
		t.Fatal(built.err)
	}
	return built.path
}

// ControllerProcess is the controller running as its own process, as the installed
// ServiceAccount.
type ControllerProcess struct {
	t          testing.TB
	binary     string
	args       []string
	env        []string
	logPath    string
	mu         sync.Mutex
	cmd        *exec.Cmd
	exited     chan struct{}
	Starts     int
	kubeconfig string
}

// StartControllerProcess runs the built controller against cfg's cluster with opts,
// impersonating the installed ServiceAccount, and stops it when the test ends.
func StartControllerProcess(t testing.TB, cfg *rest.Config, kubeconfig, dir string, opts operator.Options) *ControllerProcess {
	t.Helper()
	sa := AsInstalledServiceAccount(t, cfg, opts.CloudProvider == "kwok")
	raw, err := clientcmd.LoadFromFile(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	for _, user := range raw.AuthInfos {
		user.Impersonate = sa.Impersonate.UserName
		user.ImpersonateGroups = sa.Impersonate.Groups
	}
	saKubeconfig := filepath.Join(dir, "controller.kubeconfig")
	if err := clientcmd.WriteToFile(*raw, saKubeconfig); err != nil {
		t.Fatal(err)
	}
	p := &ControllerProcess{t: t, binary: ControllerBinary(t), args: OptionArgs(opts), kubeconfig: saKubeconfig,
		env:     append(os.Environ(), "AWS_ACCESS_KEY_ID=testing", "AWS_SECRET_ACCESS_KEY=testing", "AWS_EC2_METADATA_DISABLED=true"),
		logPath: filepath.Join(dir, "controller-process.log")}
	p.Start()
	t.Cleanup(func() {
		p.Kill()
		if t.Failed() {
			raw, _ := os.ReadFile(p.logPath)
			if len(raw) > 8000 {
				raw = raw[len(raw)-8000:]
			}
			t.Logf("last controller process output:\n%s", raw)
		}
	})
	return p
}

// Start starts the process (again).
func (p *ControllerProcess) Start() {
	p.t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	logFile, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		p.t.Fatal(err)
	}
	cmd := exec.Command(p.binary, append([]string{"--kubeconfig", p.kubeconfig}, p.args...)...)
	cmd.Env = p.env
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		p.t.Fatal(err)
	}
	p.Starts++
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		_ = logFile.Close()
		close(exited)
	}()
	p.cmd, p.exited = cmd, exited
}

// Kill ends the process with SIGKILL: no deferred cleanup, no graceful shutdown.
func (p *ControllerProcess) Kill() {
	p.mu.Lock()
	cmd, exited := p.cmd, p.exited
	p.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		p.t.Errorf("the controller process did not exit after SIGKILL")
	}
}

// Exited reports whether the running process has ended by itself.
func (p *ControllerProcess) Exited() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.exited:
		return true
	default:
		return false
	}
}

// OptionArgs are the controller's flags for opts (those tests set), without ports.
func OptionArgs(opts operator.Options) []string {
	args := []string{
		"--cluster-name=" + opts.ClusterName, "--cloud-provider=" + opts.CloudProvider,
		"--batch-idle-duration=" + opts.BatchIdleDuration.String(), "--batch-max-duration=" + opts.BatchMaxDuration.String(),
		"--log-level=" + opts.LogLevel, "--registration-ttl=" + opts.RegistrationTTL.String(),
		"--disruption-period=" + opts.DisruptionPeriod.String(), "--consolidation-validation-delay=" + opts.ConsolidationValidationDelay.String(),
		fmt.Sprintf("--leader-elect=%t", opts.LeaderElect), "--leader-election-namespace=" + InstallNamespace,
		"--metrics-port=0", "--health-probe-port=0",
	}
	add := func(flag, value string) {
		if value != "" {
			args = append(args, flag+"="+value)
		}
	}
	add("--aws-region", opts.AWSRegion)
	add("--kwok-catalog", opts.KwokCatalog)
	add("--interruption-queue", opts.InterruptionQueue)
	add("--ssm-parameter-prefix", opts.SSMParameterPrefix)
	add("--cluster-endpoint", opts.ClusterEndpoint)
	add("--feature-gates", opts.FeatureGates.String())
	if opts.IsolatedVPC {
		args = append(args, "--isolated-vpc=true")
	}
	if len(opts.AWSEndpoints) > 0 {
		var parts []string
		for k, v := range opts.AWSEndpoints {
			parts = append(parts, k+"="+v)
		}
		sort.Strings(parts)
		args = append(args, "--aws-endpoints="+strings.Join(parts, ","))
	}
	return args
}
