package testenv

import (
	"bytes"
	"cmp"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/dovetail-sh/dovetail/controller/operator"
)

var built struct {
	once sync.Once
	path string
	err  error
}

// Main runs a package's tests and then removes the controller binary ControllerBinary
// built for them, 120 MB a run that would otherwise pile up in the temporary
// directory. A package that starts the controller calls it from TestMain.
func Main(m *testing.M) int {
	code := m.Run()
	if built.path != "" {
		if err := os.RemoveAll(filepath.Dir(built.path)); err != nil {
			fmt.Fprintf(os.Stderr, "removing the test-built controller: %v\n", err)
		}
	}
	return code
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
	// logStart is where the running process's output begins in the log, which
	// every start appends to.
	logStart int64
	// peakRSSKiB is the highest resident memory of the processes already ended.
	peakRSSKiB int64
	// endedCPU is the CPU time of the processes that have exited.
	endedCPU time.Duration
}

var processLogs struct {
	mu sync.Mutex
	n  int
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
	return startControllerProcess(t, raw, dir, opts)
}

// StartControllerProcessVia is StartControllerProcess with the controller talking
// to the API server through proxy, as the installed ServiceAccount.
func StartControllerProcessVia(t testing.TB, cfg *rest.Config, proxy *KubeProxy, dir string, opts operator.Options) *ControllerProcess {
	t.Helper()
	sa := AsInstalledServiceAccount(t, cfg, opts.CloudProvider == "kwok")
	raw := clientcmdapi.NewConfig()
	raw.Clusters["proxy"] = &clientcmdapi.Cluster{Server: proxy.URL}
	raw.AuthInfos["controller"] = &clientcmdapi.AuthInfo{Impersonate: sa.Impersonate.UserName, ImpersonateGroups: sa.Impersonate.Groups}
	raw.Contexts["proxy"] = &clientcmdapi.Context{Cluster: "proxy", AuthInfo: "controller"}
	raw.CurrentContext = "proxy"
	return startControllerProcess(t, raw, dir, opts)
}

func startControllerProcess(t testing.TB, raw *clientcmdapi.Config, dir string, opts operator.Options) *ControllerProcess {
	t.Helper()
	// Replicas of one test each log to their own file.
	processLogs.mu.Lock()
	processLogs.n++
	logPath := filepath.Join(dir, fmt.Sprintf("controller-process-%d.log", processLogs.n))
	saKubeconfig := filepath.Join(dir, fmt.Sprintf("controller-%d.kubeconfig", processLogs.n))
	processLogs.mu.Unlock()
	if err := clientcmd.WriteToFile(*raw, saKubeconfig); err != nil {
		t.Fatal(err)
	}
	// DEBUG_CONTROLLER_LOG_LEVEL raises the log level of every controller a test starts, for diagnosis.
	if level := os.Getenv("DEBUG_CONTROLLER_LOG_LEVEL"); level != "" {
		opts.LogLevel = level
	}
	p := &ControllerProcess{t: t, binary: ControllerBinary(t), args: OptionArgs(opts), kubeconfig: saKubeconfig,
		env:     append(os.Environ(), "AWS_ACCESS_KEY_ID=testing", "AWS_SECRET_ACCESS_KEY=testing", "AWS_EC2_METADATA_DISABLED=true"),
		logPath: logPath}
	p.Start()
	t.Cleanup(func() {
		p.Kill()
		reportLog(t, p.logPath, "controller process", 8000)
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
	if info, err := logFile.Stat(); err == nil {
		p.logStart = info.Size()
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
		p.mu.Lock()
		defer p.mu.Unlock()
		// Closed with the CPU counted, under the lock CPUSeconds reads both under.
		p.endedCPU += cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
		close(exited)
	}()
	p.cmd, p.exited = cmd, exited
}

// Kill ends the process with SIGKILL: no deferred cleanup, no graceful shutdown.
func (p *ControllerProcess) Kill() { p.signal(syscall.SIGKILL, 10*time.Second) }

// Terminate asks the process to stop, as the kubelet does in a rollout, and waits
// for it to exit.
func (p *ControllerProcess) Terminate() { p.signal(syscall.SIGTERM, 45*time.Second) }

func (p *ControllerProcess) signal(sig syscall.Signal, wait time.Duration) {
	p.mu.Lock()
	cmd, exited := p.cmd, p.exited
	p.mu.Unlock()
	if cmd == nil {
		return
	}
	p.recordPeakRSS()
	_ = cmd.Process.Signal(sig)
	select {
	case <-exited:
	case <-time.After(wait):
		p.t.Errorf("the controller process did not exit %s after %s", wait, sig)
	}
}

// Pid is the running process's id.
func (p *ControllerProcess) Pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cmd.Process.Pid
}

// PeakRSSMiB is the highest resident memory of any process started so far: the
// running one's high-water mark, or an ended one's read just before it was
// signalled.
func (p *ControllerProcess) PeakRSSMiB() float64 {
	p.recordPeakRSS()
	p.mu.Lock()
	defer p.mu.Unlock()
	return float64(p.peakRSSKiB) / 1024
}

func (p *ControllerProcess) recordPeakRSS() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return
	}
	if kib, err := PeakRSSKiB(p.cmd.Process.Pid); err == nil && kib > p.peakRSSKiB {
		p.peakRSSKiB = kib
	}
}

// CPUSeconds is the CPU time, user and system, of every process started so far.
func (p *ControllerProcess) CPUSeconds() float64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	total := p.endedCPU
	if p.cmd != nil {
		select {
		case <-p.exited:
		default:
			total += runningCPU(p.cmd.Process.Pid)
		}
	}
	return total.Seconds()
}

// runningCPU is a running process's user and system time from /proc, 0 if unread.
func runningCPU(pid int) time.Duration {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The fields after the command name, which is in parentheses and may hold
	// spaces: utime and stime are the 12th and 13th of them, in clock ticks.
	fields := strings.Fields(string(raw[bytes.LastIndexByte(raw, ')')+1:]))
	if len(fields) < 13 {
		return 0
	}
	var ticks int64
	for _, f := range fields[11:13] {
		n, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return 0
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / clockTicksPerSecond
}

// clockTicksPerSecond is Linux's USER_HZ, which /proc reports times in.
const clockTicksPerSecond = 100

// PeakRSSKiB is a running process's high-water mark of resident memory (VmHWM).
func PeakRSSKiB(pid int) (int64, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			var kib int64
			if _, err := fmt.Sscanf(strings.TrimSpace(rest), "%d kB", &kib); err != nil {
				return 0, fmt.Errorf("reading VmHWM %q: %w", rest, err)
			}
			return kib, nil
		}
	}
	return 0, fmt.Errorf("no VmHWM in /proc/%d/status", pid)
}

// Log is what the running process has written so far.
func (p *ControllerProcess) Log() string {
	p.mu.Lock()
	start := p.logStart
	p.mu.Unlock()
	raw, err := os.ReadFile(p.logPath)
	if err != nil || int64(len(raw)) < start {
		return ""
	}
	return string(raw[start:])
}

// IsLeader reports whether the running process has acquired the leader lease
// (client-go's leader election logs it).
func (p *ControllerProcess) IsLeader() bool {
	return strings.Contains(p.Log(), "successfully acquired lease")
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
		"--provisioning-request-initial-backoff-time=" + cmp.Or(opts.ProvisioningRequestInitialBackoff, time.Minute).String(),
		"--provisioning-request-max-backoff-time=" + cmp.Or(opts.ProvisioningRequestMaxBackoff, 10*time.Minute).String(),
		fmt.Sprintf("--leader-elect=%t", opts.LeaderElect), "--leader-election-namespace=" + InstallNamespace,
		fmt.Sprintf("--metrics-port=%d", opts.MetricsPort), "--health-probe-port=0",
	}
	if opts.EnableProfiling {
		args = append(args, "--enable-profiling")
	}
	if opts.MetricsPort > 0 {
		args = append(args, "--bind-address=127.0.0.1")
	}
	for flag, d := range map[string]time.Duration{"--leader-election-lease-duration": opts.LeaderElectionLeaseDuration,
		"--leader-election-renew-deadline": opts.LeaderElectionRenewDeadline, "--leader-election-retry-period": opts.LeaderElectionRetryPeriod} {
		if d > 0 {
			args = append(args, flag+"="+d.String())
		}
	}
	if opts.MemoryLimit > 0 {
		args = append(args, fmt.Sprintf("--memory-limit=%d", opts.MemoryLimit))
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
