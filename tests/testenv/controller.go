package testenv

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"go.uber.org/zap/zapcore"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apiserver/pkg/authentication/serviceaccount"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/dovetail-sh/dovetail/controller/operator"
	"github.com/dovetail-sh/dovetail/controller/scheduling"
	"github.com/dovetail-sh/dovetail/templates"
	"github.com/dovetail-sh/dovetail/tests/localstack"
)

// DefaultOptions are the controller's settings for tests: the kwok provider on the
// test catalog, no leader election, no listening ports.
func DefaultOptions(t testing.TB) operator.Options {
	return operator.Options{
		ClusterName: "e2e", CloudProvider: "kwok", KwokCatalog: WriteCatalog(t),
		BatchIdleDuration: time.Second, BatchMaxDuration: 10 * time.Second,
		LogLevel: "info", VMMemoryOverheadPercent: 0.075, RegistrationTTL: 15 * time.Minute,
		DisruptionPeriod: time.Second, ConsolidationValidationDelay: time.Second,
		ProvisioningRequestInitialBackoff: 2 * time.Second, ProvisioningRequestMaxBackoff: 10 * time.Second,
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
// provider the options name. It runs as the ServiceAccount a default install makes,
// with nothing but the RBAC that install ships (see AsInstalledServiceAccount), unless
// cfg already impersonates someone.
func RunController(t testing.TB, cfg *rest.Config, dir string, opts operator.Options, newCloud operator.CloudProviderFactory) {
	t.Helper()
	if cfg.Impersonate.UserName == "" {
		// A custom factory is the kwok provider wrapped by a test.
		cfg = AsInstalledServiceAccount(t, cfg, opts.CloudProvider == "kwok" || newCloud != nil)
	}
	if opts.LeaderElect && opts.LeaderElectionNamespace != InstallNamespace {
		t.Fatalf("leader election in %q: the installed Role grants leases only in %q, where the Deployment's POD_NAMESPACE puts them", opts.LeaderElectionNamespace, InstallNamespace)
	}
	logPath := ControllerLog(dir)
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	// DEBUG_CONTROLLER_LOG_LEVEL and DEBUG_CONTROLLER_LOG_DIR do for this controller
	// what they do for a controller process: see ControllerProcess.
	levelName := opts.LogLevel
	if l := os.Getenv("DEBUG_CONTROLLER_LOG_LEVEL"); l != "" {
		levelName = l
	}
	level, err := zapcore.ParseLevel(levelName)
	if err != nil {
		t.Fatalf("controller log level: %v", err)
	}
	// Each controller gets a logger of its own: controller-runtime's global logger
	// takes only the first SetLogger, so every later test in the package would
	// otherwise log into the first test's file and fail with no controller output.
	opts.Logger = zap.New(zap.WriteTo(logFile), zap.JSONEncoder(), zap.Level(level))
	silenceGlobalLogger.Do(func() { ctrl.SetLogger(logr.Discard()) })
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
		reportLog(t, logPath, "controller", 6000)
	})
	select {
	case err := <-done:
		t.Fatalf("controller exited at start: %v", err)
	case <-time.After(500 * time.Millisecond):
	}
}

// reportLog keeps a controller's whole log in DEBUG_CONTROLLER_LOG_DIR when set,
// for diagnosis (one file per run: -count=N runs a test N times), and prints its
// last tail bytes when the test failed.
func reportLog(t testing.TB, path, what string, tail int) {
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Logf("reading the %s log: %v", what, err)
		return
	}
	if keep := os.Getenv("DEBUG_CONTROLLER_LOG_DIR"); keep != "" {
		name := strings.NewReplacer("/", "_", " ", "_").Replace(t.Name())
		if f, err := os.CreateTemp(keep, name+"-*-"+filepath.Base(path)); err == nil {
			_, _ = f.Write(raw)
			_ = f.Close()
		}
	}
	if t.Failed() {
		if len(raw) > tail {
			raw = raw[len(raw)-tail:]
		}
		t.Logf("last %s output:\n%s", what, raw)
	}
}

// ControllerLog is the log of the controller RunController runs with dir.
func ControllerLog(dir string) string { return filepath.Join(dir, "controller.log") }

// silenceGlobalLogger settles controller-runtime's global logger, which only code
// outside the manager uses, so it does not warn that it was never set.
var silenceGlobalLogger sync.Once

// InstallNamespace is where a default install puts the controller and its ServiceAccount.
var InstallNamespace = templates.DefaultValues().Namespace

// ControllerImage is the image tests install.
const ControllerImage = localstack.ControllerImage

// AsInstalledServiceAccount applies the RBAC objects a default install renders (and,
// for the kwok provider, the rule only that provider needs) with cfg's own rights,
// and returns cfg impersonating the installed ServiceAccount: what the controller may
// do in a test is what it may do in a user's cluster.
func AsInstalledServiceAccount(t testing.TB, cfg *rest.Config, kwokProvider bool) *rest.Config {
	t.Helper()
	values := templates.DefaultValues()
	values.Image = ControllerImage
	values.Settings.ClusterName = "e2e"
	objs, err := templates.RBACManifests(values)
	if err != nil {
		t.Fatal(err)
	}
	if kwokProvider {
		extra, err := templates.KwokProviderManifests(values)
		if err != nil {
			t.Fatal(err)
		}
		objs = append(objs, extra...)
	}
	admin, err := client.New(cfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, obj := range objs {
		if err := admin.Create(context.Background(), obj); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("installing %s %s: %v", obj.GetKind(), obj.GetName(), err)
		}
	}
	sa := rest.CopyConfig(cfg)
	sa.Impersonate = rest.ImpersonationConfig{
		UserName: serviceaccount.MakeUsername(values.Namespace, values.ServiceAccount),
		Groups:   serviceaccount.MakeGroupNames(values.Namespace),
	}
	return sa
}
