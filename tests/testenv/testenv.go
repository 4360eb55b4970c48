// Package testenv gives tests the real servers they run against, on loopback: the
// control plane alone (etcd + kube-apiserver with Dovetail's CRDs) or the whole local
// stack (see localstack), stopped when the test ends. Binaries come from bin/, built
// by `make tools`.
package testenv

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dovetail-sh/dovetail/controller/cloudprovider/aws"
	"github.com/dovetail-sh/dovetail/tests/localstack"
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

// BinDir is where `make tools` puts the control-plane binaries.
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

// APIServer is a running etcd + kube-apiserver with Dovetail's CRDs installed.
type APIServer struct {
	Config *rest.Config
	Client client.Client
	// Kubeconfig is a cluster-admin kubeconfig file for the server.
	Kubeconfig string
}

// StartAPIServer starts etcd and kube-apiserver and stops them when the test ends.
func StartAPIServer(t testing.TB) *APIServer {
	return startAPIServer(t, false)
}

// StartBareAPIServer is StartAPIServer without Dovetail's CRDs.
func StartBareAPIServer(t testing.TB) *APIServer {
	return startAPIServer(t, true)
}

func startAPIServer(t testing.TB, withoutCRDs bool) *APIServer {
	t.Helper()
	s, err := localstack.Start(context.Background(), localstack.Options{BinDir: BinDir(t), Dir: t.TempDir(), ControlPlaneOnly: true, WithoutCRDs: withoutCRDs})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Stop() })
	return &APIServer{Config: s.Config, Client: s.Client, Kubeconfig: s.Kubeconfig}
}

// StartMoto starts moto_server for the test and stops it when the test ends.
func StartMoto(t testing.TB) *localstack.Moto {
	t.Helper()
	m, err := localstack.StartMoto(context.Background(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("last output of moto_server:\n%s", m.Tail(3000))
		}
		m.Stop()
	})
	return m
}

// AWSClients points every AWS client at moto with throwaway credentials, for a
// region, and keeps the machine's own AWS configuration out of the test.
func AWSClients(t testing.TB, moto *localstack.Moto, region string) *aws.Clients {
	t.Helper()
	t.Setenv("AWS_ACCESS_KEY_ID", "testing")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "testing")
	t.Setenv("AWS_CONFIG_FILE", os.DevNull)
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", os.DevNull)
	clients, err := aws.NewClients(context.Background(), aws.Settings{Region: region,
		Endpoints: map[string]string{"ec2": moto.Endpoint, "ssm": moto.Endpoint, "iam": moto.Endpoint, "eks": moto.Endpoint, "pricing": moto.Endpoint, "sqs": moto.Endpoint}})
	if err != nil {
		t.Fatal(err)
	}
	return clients
}
