package testenv

import (
	"bytes"
	"context"
	_ "embed"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/dovetail-sh/dovetail/templates"
)

//go:embed kwok-stages.yaml
var kwokStages []byte

// Stack is the whole local cluster: etcd, kube-apiserver, kube-scheduler,
// kube-controller-manager (Deployments, ReplicaSets, garbage collection, PDB status)
// and kwok,
// which keeps Nodes annotated kwok.x-k8s.io/node=fake Ready and runs their pods.
type Stack struct {
	*APIServer
	// Kubeconfig is a cluster-admin kubeconfig file for the stack.
	Kubeconfig string
	dir        string
}

// StartStack starts the stack on loopback and stops it when the test ends.
func StartStack(t testing.TB) *Stack {
	t.Helper()
	bin := BinDir(t)
	requireBinaries(t, bin, "etcd", "kube-apiserver", "kube-scheduler", "kube-controller-manager", "kwok")
	crds, err := templates.CRDs()
	if err != nil {
		t.Fatal(err)
	}
	env := &envtest.Environment{BinaryAssetsDirectory: bin, CRDs: crds, ErrorIfCRDPathMissing: true, Scheme: Scheme()}
	// Without a node-lifecycle controller nothing would clear the not-ready taint
	// this admission plugin puts on new Nodes; kwok reports readiness instead.
	env.ControlPlane.GetAPIServer().Configure().Set("disable-admission-plugins", "TaintNodesByCondition,ServiceAccount")
	cfg, err := env.Start()
	if err != nil {
		t.Fatalf("starting kube-apiserver and etcd: %v", err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	admin, err := env.AddUser(envtest.User{Name: "stack-admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig, err := admin.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	s := &Stack{dir: dir, Kubeconfig: filepath.Join(dir, "kubeconfig")}
	if err := os.WriteFile(s.Kubeconfig, kubeconfig, 0o600); err != nil {
		t.Fatal(err)
	}
	stages := filepath.Join(dir, "kwok-stages.yaml")
	if err := os.WriteFile(stages, kwokStages, 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	s.APIServer = &APIServer{Config: cfg, Client: c, env: env}
	s.start(t, filepath.Join(bin, "kube-scheduler"), "--kubeconfig="+s.Kubeconfig, "--authentication-kubeconfig="+s.Kubeconfig,
		"--authorization-kubeconfig="+s.Kubeconfig, "--leader-elect=false", "--secure-port=0", "--bind-address=127.0.0.1")
	s.start(t, filepath.Join(bin, "kube-controller-manager"), "--kubeconfig="+s.Kubeconfig,
		"--controllers=deployment-controller,replicaset-controller,garbage-collector-controller,disruption-controller",
		"--leader-elect=false", "--secure-port=0", "--bind-address=127.0.0.1", "--use-service-account-credentials=false",
		"--concurrent-deployment-syncs=10", "--concurrent-replicaset-syncs=10", "--kube-api-qps=500", "--kube-api-burst=1000")
	s.start(t, filepath.Join(bin, "kwok"), "--kubeconfig="+s.Kubeconfig, "--config="+stages,
		"--manage-all-nodes=false", "--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
		"--cidr=10.0.0.0/16", "--node-ip=127.0.0.1", "--server-address=127.0.0.1:0")
	s.waitForScheduler(t)
	return s
}

// start runs a stack process with its output in a log file, printed if the test fails.
func (s *Stack) start(t testing.TB, path string, args ...string) {
	t.Helper()
	name := filepath.Base(path)
	logPath := filepath.Join(s.dir, name+".log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(path, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", name, err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-exited:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		_ = logFile.Close()
		if t.Failed() {
			raw, _ := os.ReadFile(logPath)
			if len(raw) > 4000 {
				raw = raw[len(raw)-4000:]
			}
			t.Logf("last output of %s:\n%s", name, bytes.TrimSpace(raw))
		}
	})
}

// waitForScheduler waits until kube-scheduler has marked a probe pod unschedulable,
// which proves it is running and watching.
func (s *Stack) waitForScheduler(t testing.TB) {
	t.Helper()
	ctx := context.Background()
	probe := &corev1.Pod{}
	probe.Name, probe.Namespace = "stack-probe", "default"
	probe.Spec.Containers = []corev1.Container{{Name: "c", Image: "pause"}}
	probe.Spec.NodeSelector = map[string]string{"stack-probe": "never"}
	if err := s.Client.Create(ctx, probe); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if err := s.Client.Get(ctx, client.ObjectKeyFromObject(probe), probe); err == nil {
			for _, c := range probe.Status.Conditions {
				if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
					_ = s.Client.Delete(ctx, probe, client.GracePeriodSeconds(0))
					return
				}
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatal(fmt.Errorf("kube-scheduler did not schedule a probe pod within 60s"))
}
