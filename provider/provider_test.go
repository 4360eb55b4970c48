package provider_test

import (
	"os"
	"os/exec"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/providerserver"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6"

	"github.com/dovetail-sh/dovetail/provider"
)

// factories serve the provider in-process to the real terraform binary.
var factories = map[string]func() (tfprotov6.ProviderServer, error){
	"dovetail": providerserver.NewProtocol6WithError(provider.New("test")()),
}

// acceptance prepares the real terraform binary for a test; the tests run in
// `make test`, so TF_ACC is set here rather than by the caller.
func acceptance(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("runs terraform against servers on loopback")
	}
	tf, err := exec.LookPath("terraform")
	if err != nil {
		t.Fatalf("terraform is not on PATH: %v (the machines ship terraform 1.11)", err)
	}
	t.Setenv("TF_ACC", "1")
	t.Setenv("TF_ACC_TERRAFORM_PATH", tf)
	t.Setenv("CHECKPOINT_DISABLE", "1")
	t.Setenv("TF_IN_AUTOMATION", "1")
	_ = os.Unsetenv("TF_CLI_CONFIG_FILE")
}
