package testenv

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/dovetail-sh/dovetail/controller/operator"
	"github.com/dovetail-sh/dovetail/controller/scheduling"
)

// DefaultOptions are the controller's settings for tests: the kwok provider on the
// test catalog, no leader election, no listening ports.
func DefaultOptions(t testing.TB) operator.Options {
	return operator.Options{
		ClusterName: "e2e", CloudProvider: "kwok", KwokCatalog: WriteCatalog(t),
		BatchIdleDuration: time.Second, BatchMaxDuration: 10 * time.Second,
		LogLevel: "info", VMMemoryOverheadPercent: 0.075, RegistrationTTL: 15 * time.Minute,
		DisruptionPeriod: time.Second, ConsolidationValidationDelay: time.Second,
		KubeClientQPS: 200, KubeClientBurst: 300, AllowRepeatedControllers: true, NodeCosts: scheduling.DefaultNodeCosts(),
	}
}

// RunController runs the controller in this process against the stack until the
// test ends. Its JSON log goes to a file, printed if the test fails.
func (s *Stack) RunController(t testing.TB, opts operator.Options) {
	t.Helper()
	RunController(t, s.Config, s.Dir, opts, nil)
}

// RunController runs the controller against any API server; a nil factory means the
// provider the options name.
func RunController(t testing.TB, cfg *rest.Config, dir string, opts operator.Options, newCloud operator.CloudProviderFactory) {
	t.Helper()
	logPath := filepath.Join(dir, "controller.log")
	// DEBUG_CONTROLLER_LOG keeps the whole log after the test, for diagnosis.
	if p := os.Getenv("DEBUG_CONTROLLER_LOG"); p != "" {
		logPath = p
	}
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	ctrl.SetLogger(zap.New(zap.WriteTo(logFile), zap.JSONEncoder()))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		if newCloud == nil {
			done <- operator.Run(ctx, opts, cfg)
			return
		}
		done <- operator.RunWith(ctx, opts, cfg, newCloud)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil && !errors.Is(err, context.Canceled) {
				t.Errorf("controller exited: %v", err)
			}
		case <-time.After(15 * time.Second):
			t.Errorf("controller did not stop within 15s")
		}
		_ = logFile.Close()
		if t.Failed() {
			raw, _ := os.ReadFile(logPath)
			if len(raw) > 6000 {
				raw = raw[len(raw)-6000:]
			}
			t.Logf("last controller output:\n%s", raw)
		}
	})
	select {
	case err := <-done:
		t.Fatalf("controller exited at start: %v", err)
	case <-time.After(500 * time.Millisecond):
	}
}
