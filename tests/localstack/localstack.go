// Package localstack starts a whole Kubernetes control plane on loopback from the
// binaries `make tools` builds: etcd and kube-apiserver (through controller-runtime's
// envtest), kube-scheduler, kube-controller-manager (Deployments, ReplicaSets,
// garbage collection, PDB status) and kwok, which keeps Nodes annotated
// kwok.x-k8s.io/node=fake Ready and runs the pods bound to them. Tests, the demo and
// the end-to-end benchmark all use it.
package localstack

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/dovetail-sh/dovetail/controller/operator"
	"github.com/dovetail-sh/dovetail/templates/crds"
)

//go:embed kwok-stages.yaml
var kwokStages []byte

// Scheme knows core Kubernetes types and Dovetail's APIs: the controller's own.
func Scheme() *runtime.Scheme { return operator.Scheme() }

// Options say where the binaries are and where state and logs go.
type Options struct {
	BinDir string
	Dir    string
	// ControlPlaneOnly starts just etcd and kube-apiserver.
	ControlPlaneOnly bool
	// WithoutCRDs leaves Dovetail's CRDs out, as in a cluster it was never installed in.
	WithoutCRDs bool
	// StockKwokStages runs kwok with the stages kwokctl ships instead of the tests'
	// trimmed ones.
	StockKwokStages bool
	// DaemonSets runs the DaemonSet controller too. Most tests leave it out: a
	// DaemonSet there only reserves room on every node, which the controller plans
	// for without its pods.
	DaemonSets bool
	// DefaultSpread configures kube-scheduler with these default topology spread
	// constraints on a second profile, DefaultSpreadScheduler, that pods opt into
	// with spec.schedulerName, as Karpenter's regression suite does.
	DefaultSpread []corev1.TopologySpreadConstraint
}

// DefaultSpreadScheduler is the kube-scheduler profile that applies
// Options.DefaultSpread.
const DefaultSpreadScheduler = "topology-spread-defaults"

// Stack is a running local cluster.
type Stack struct {
	Config *rest.Config
	Client client.Client
	// Kubeconfig is a cluster-admin kubeconfig file.
	Kubeconfig string
	Dir        string
	env        *envtest.Environment
	procs      []*Process
}

// Process is a child process with its output in a log file.
type Process struct {
	Name    string
	LogPath string
	cmd     *exec.Cmd
	exited  chan struct{}
}

// Start brings the stack up; on error everything started is stopped again.
func Start(ctx context.Context, opts Options) (s *Stack, err error) {
	for _, name := range requiredBinaries(opts.ControlPlaneOnly) {
		if _, err := os.Stat(filepath.Join(opts.BinDir, name)); err != nil {
			return nil, fmt.Errorf("%s not found in %s: run `make tools` (it builds the pinned control plane into bin/)", name, opts.BinDir)
		}
	}
	crds, err := crds.CRDs()
	if err != nil {
		return nil, err
	}
	if opts.WithoutCRDs {
		crds = nil
	}
	env := &envtest.Environment{BinaryAssetsDirectory: opts.BinDir, CRDs: crds, ErrorIfCRDPathMissing: true, Scheme: Scheme()}
	// Without a node-lifecycle controller nothing would clear the not-ready taint
	// this admission plugin puts on new Nodes; kwok reports readiness instead.
	env.ControlPlane.GetAPIServer().Configure().Set("disable-admission-plugins", "TaintNodesByCondition,ServiceAccount")
	cfg, err := env.Start()
	if err != nil {
		return nil, fmt.Errorf("starting kube-apiserver and etcd, %w", err)
	}
	s = &Stack{Config: cfg, Dir: opts.Dir, env: env}
	defer func() {
		if err != nil {
			_ = s.Stop()
			s = nil
		}
	}()
	if s.Client, err = client.New(cfg, client.Options{Scheme: env.Scheme}); err != nil {
		return s, err
	}
	admin, err := env.AddUser(envtest.User{Name: "stack-admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return s, err
	}
	kubeconfig, err := admin.KubeConfig()
	if err != nil {
		return s, err
	}
	s.Kubeconfig = filepath.Join(opts.Dir, "kubeconfig")
	if err := os.WriteFile(s.Kubeconfig, kubeconfig, 0o600); err != nil {
		return s, err
	}
	if opts.ControlPlaneOnly {
		return s, nil
	}
	stages := filepath.Join(opts.Dir, "kwok-stages.yaml")
	stageConfig := kwokStages
	if opts.StockKwokStages {
		if stageConfig, err = stockKwokStages(ctx, opts.BinDir); err != nil {
			return s, err
		}
	}
	if err := os.WriteFile(stages, stageConfig, 0o600); err != nil {
		return s, err
	}
	// kube-scheduler's default client rate (50 qps) would bind only ~50 pods a second.
	schedulerConfig := filepath.Join(opts.Dir, "kube-scheduler.yaml")
	if err := os.WriteFile(schedulerConfig, []byte(fmt.Sprintf(`apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: %q
  qps: 1000
  burst: 2000
leaderElection:
  leaderElect: false
%s`, s.Kubeconfig, schedulerProfiles(opts.DefaultSpread))), 0o600); err != nil {
		return s, err
	}
	bin := func(n string) string { return filepath.Join(opts.BinDir, n) }
	controllers := "deployment-controller,replicaset-controller,garbage-collector-controller,disruption-controller,namespace-controller,persistentvolume-binder-controller,clusterrole-aggregation-controller"
	if opts.DaemonSets {
		controllers += ",daemonset-controller"
	}
	for _, p := range []struct {
		path string
		args []string
	}{
		{bin("kube-scheduler"), []string{"--config=" + schedulerConfig, "--authentication-kubeconfig=" + s.Kubeconfig,
			"--authorization-kubeconfig=" + s.Kubeconfig, "--secure-port=0", "--bind-address=127.0.0.1"}},
		{bin("kube-controller-manager"), []string{"--kubeconfig=" + s.Kubeconfig, "--controllers=" + controllers,
			"--leader-elect=false", "--secure-port=0", "--bind-address=127.0.0.1", "--use-service-account-credentials=false",
			"--concurrent-deployment-syncs=10", "--concurrent-replicaset-syncs=10", "--kube-api-qps=500", "--kube-api-burst=1000"}},
		{bin("kwok"), []string{"--kubeconfig=" + s.Kubeconfig, "--config=" + stages,
			"--manage-all-nodes=false", "--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
			"--cidr=10.0.0.0/16", "--node-ip=127.0.0.1", "--server-address=127.0.0.1:0"}},
	} {
		if _, err := s.Run(p.path, p.args...); err != nil {
			return s, err
		}
	}
	return s, s.waitForScheduler(ctx)
}

func requiredBinaries(controlPlaneOnly bool) []string {
	if controlPlaneOnly {
		return []string{"etcd", "kube-apiserver"}
	}
	return []string{"etcd", "kube-apiserver", "kube-scheduler", "kube-controller-manager", "kwok"}
}

// Run starts a process that the stack stops with the rest.
func (s *Stack) Run(path string, args ...string) (*Process, error) {
	return s.runCmd(filepath.Base(path), exec.Command(path, args...))
}

func (s *Stack) runCmd(name string, cmd *exec.Cmd) (*Process, error) {
	p := &Process{Name: name, LogPath: filepath.Join(s.Dir, name+".log"), exited: make(chan struct{}), cmd: cmd}
	logFile, err := os.Create(p.LogPath)
	if err != nil {
		return nil, err
	}
	p.cmd.Stdout, p.cmd.Stderr = logFile, logFile
	if err := p.cmd.Start(); err != nil {
		_ = logFile.Close()
		return nil, fmt.Errorf("starting %s, %w", name, err)
	}
	go func() { _ = p.cmd.Wait(); _ = logFile.Close(); close(p.exited) }()
	s.procs = append(s.procs, p)
	return p, nil
}

// Pid is the process id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Pause stops the process (SIGSTOP) until the returned resume is called (SIGCONT;
// safe to call more than once): a control-plane component that falls behind, for a
// test to see what the controller does meanwhile.
func (p *Process) Pause() (resume func(), err error) {
	if err := p.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		return nil, fmt.Errorf("pausing %s, %w", p.Name, err)
	}
	var once sync.Once
	return func() { once.Do(func() { _ = p.cmd.Process.Signal(syscall.SIGCONT) }) }, nil
}

// Process returns the stack's process of that name (the binary's), or nil.
func (s *Stack) Process(name string) *Process {
	for _, p := range s.procs {
		if p.Name == name {
			return p
		}
	}
	return nil
}

// Exited is closed when the process ends.
func (p *Process) Exited() <-chan struct{} { return p.exited }

// Stop interrupts the process and waits for it.
func (p *Process) Stop() {
	select {
	case <-p.exited:
		return
	default:
	}
	_ = p.cmd.Process.Signal(os.Interrupt)
	select {
	case <-p.exited:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
}

// Tail returns the last n bytes of the process's output.
func (p *Process) Tail(n int) string {
	raw, _ := os.ReadFile(p.LogPath)
	if len(raw) > n {
		raw = raw[len(raw)-n:]
	}
	return string(bytes.TrimSpace(raw))
}

// Processes are the stack's child processes, in start order.
func (s *Stack) Processes() []*Process { return s.procs }

// Stop stops every process, newest first, then the control plane.
func (s *Stack) Stop() error {
	for i := len(s.procs) - 1; i >= 0; i-- {
		s.procs[i].Stop()
	}
	return s.env.Stop()
}

// waitForScheduler waits until kube-scheduler has marked a probe pod unschedulable,
// which proves it is running and watching.
func (s *Stack) waitForScheduler(ctx context.Context) error {
	probe := &corev1.Pod{}
	probe.Name, probe.Namespace = "stack-probe", "default"
	probe.Spec.Containers = []corev1.Container{{Name: "c", Image: "pause"}}
	probe.Spec.NodeSelector = map[string]string{"stack-probe": "never"}
	if err := s.Client.Create(ctx, probe); err != nil {
		return err
	}
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if err := s.Client.Get(ctx, client.ObjectKeyFromObject(probe), probe); err == nil {
			for _, c := range probe.Status.Conditions {
				if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
					return s.Client.Delete(ctx, probe, client.GracePeriodSeconds(0))
				}
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	return fmt.Errorf("kube-scheduler did not mark a probe pod unschedulable within 60s")
}

// schedulerProfiles is the profiles section of kube-scheduler's configuration:
// with default constraints, a second profile that applies them. Only List
// defaulting applies the configured ones (System applies kube-scheduler's own).
func schedulerProfiles(defaults []corev1.TopologySpreadConstraint) string {
	if len(defaults) == 0 {
		return ""
	}
	constraints, err := json.Marshal(defaults)
	if err != nil {
		panic(err)
	}
	return fmt.Sprintf(`profiles:
  - schedulerName: default-scheduler
  - schedulerName: %s
    pluginConfig:
      - name: PodTopologySpread
        args: {defaultingType: List, defaultConstraints: %s}
`, DefaultSpreadScheduler, constraints)
}
