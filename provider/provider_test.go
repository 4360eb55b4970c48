package provider_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"sync"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/providerserver"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-testing/terraform"

	"github.com/dovetail-sh/dovetail/provider"
)

// factories serve the provider in-process to the real terraform binary.
var factories = map[string]func() (tfprotov6.ProviderServer, error){
	"dovetail": providerserver.NewProtocol6WithError(provider.New("test")()),
}

// planWarnings records the warnings the provider's plans return: what `terraform
// plan` prints, which a test's state cannot show.
type planWarnings struct {
	mu  sync.Mutex
	got []string
}

// factories serve the provider as factories do, recording its plans' warnings.
func (w *planWarnings) factories() map[string]func() (tfprotov6.ProviderServer, error) {
	return map[string]func() (tfprotov6.ProviderServer, error){
		"dovetail": func() (tfprotov6.ProviderServer, error) {
			s, err := providerserver.NewProtocol6WithError(provider.New("test")())()
			if err != nil {
				return nil, err
			}
			return warningRecorder{ProviderServer: s, w: w}, nil
		},
	}
}

// reset forgets the warnings seen so far (a step's PreConfig).
func (w *planWarnings) reset() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.got = nil
}

// saw checks that some warning since the last reset matches re.
func (w *planWarnings) saw(re string) func(*terraform.State) error {
	return func(*terraform.State) error {
		w.mu.Lock()
		defer w.mu.Unlock()
		for _, g := range w.got {
			if regexp.MustCompile(re).MatchString(g) {
				return nil
			}
		}
		return fmt.Errorf("no plan warning matches %q; the plans warned %q", re, w.got)
	}
}

type warningRecorder struct {
	tfprotov6.ProviderServer
	w *planWarnings
}

func (r warningRecorder) PlanResourceChange(ctx context.Context, req *tfprotov6.PlanResourceChangeRequest) (*tfprotov6.PlanResourceChangeResponse, error) {
	resp, err := r.ProviderServer.PlanResourceChange(ctx, req)
	if resp != nil {
		r.w.mu.Lock()
		for _, d := range resp.Diagnostics {
			if d.Severity == tfprotov6.DiagnosticSeverityWarning {
				r.w.got = append(r.w.got, d.Summary+": "+d.Detail)
			}
		}
		r.w.mu.Unlock()
	}
	return resp, err
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
