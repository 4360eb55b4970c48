// Package testenv starts the real servers tests run against, on loopback: etcd and
// kube-apiserver (through controller-runtime's envtest), and for end-to-end tests
// kube-scheduler and kwok as well. Binaries come from bin/, built by `make tools`.
package testenv

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	awsv1 "github.com/dovetail-sh/dovetail/controller/apis/aws/v1"
	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/templates"
)

// RepoRoot finds the module root from the test's working directory.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod above the working directory")
		}
		dir = parent
	}
}

// BinDir is where `make tools` puts etcd, kube-apiserver, kube-scheduler and kwok.
func BinDir(t testing.TB) string {
	t.Helper()
	if dir := os.Getenv("KUBEBUILDER_ASSETS"); dir != "" {
		return dir
	}
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(root, "bin")
}

func requireBinaries(t testing.TB, dir string, names ...string) {
	t.Helper()
	for _, n := range names {
		if _, err := os.Stat(filepath.Join(dir, n)); err != nil {
			t.Fatalf("%s not found in %s: run `make tools` (it builds the pinned control plane into bin/)", n, dir)
		}
	}
}

// Scheme knows core Kubernetes types and Dovetail's APIs.
func Scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, apiextensionsv1.AddToScheme, v1.AddToScheme, awsv1.AddToScheme} {
		if err := add(s); err != nil {
			panic(err)
		}
	}
	return s
}

// APIServer is a running etcd + kube-apiserver with Dovetail's CRDs installed.
type APIServer struct {
	Config *rest.Config
	Client client.Client
	env    *envtest.Environment
}

// StartAPIServer starts etcd and kube-apiserver on loopback and installs the CRDs
// from templates/. It stops them when the test ends.
func StartAPIServer(t testing.TB) *APIServer {
	t.Helper()
	dir := BinDir(t)
	requireBinaries(t, dir, "etcd", "kube-apiserver")
	crds, err := templates.CRDs()
	if err != nil {
		t.Fatal(err)
	}
	env := &envtest.Environment{
		BinaryAssetsDirectory: dir,
		CRDs:                  crds,
		ErrorIfCRDPathMissing: true,
		Scheme:                Scheme(),
	}
	cfg, err := env.Start()
	if err != nil {
		t.Fatalf("starting kube-apiserver and etcd: %v", err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Logf("stopping the control plane: %v", err)
		}
	})
	c, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	return &APIServer{Config: cfg, Client: c, env: env}
}
