package localstack

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/dovetail-sh/dovetail/controller/version"
)

// Terraform runs the terraform CLI in one configuration directory with a locally
// built provider, the way a provider developer does: a CLI configuration whose
// dev_overrides point dovetail-sh/dovetail at the binary, so no registry is asked.
type Terraform struct {
	Dir string
	Env []string
}

// ProviderSource is the provider's registry address in required_providers.
const ProviderSource = "dovetail-sh/dovetail"

// NewTerraform prepares dir for terraform: it writes a CLI configuration next to it
// that overrides the provider with the binary in providerDir. env adds to the
// process environment (AWS endpoints and credentials, for instance).
func NewTerraform(dir, providerDir string, env ...string) (*Terraform, error) {
	if _, err := exec.LookPath("terraform"); err != nil {
		return nil, fmt.Errorf("terraform is not on PATH: %w", err)
	}
	cliConfig := filepath.Join(dir, ".terraformrc")
	config := fmt.Sprintf("provider_installation {\n  dev_overrides {\n    %q = %q\n  }\n  direct {}\n}\n", ProviderSource, providerDir)
	if err := os.WriteFile(cliConfig, []byte(config), 0o644); err != nil {
		return nil, err
	}
	base := []string{"TF_CLI_CONFIG_FILE=" + cliConfig, "CHECKPOINT_DISABLE=1", "TF_IN_AUTOMATION=1", "TF_INPUT=0"}
	return &Terraform{Dir: dir, Env: append(base, env...)}, nil
}

// WriteVars sets the configuration's input variables (terraform.tfvars.json).
func (tf *Terraform) WriteVars(vars map[string]any) error {
	data, err := json.MarshalIndent(vars, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(tf.Dir, "terraform.tfvars.json"), data, 0o644)
}

// Run runs terraform with args and returns its output; the error carries it too.
func (tf *Terraform) Run(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "terraform", args...)
	// Cancelled, terraform is interrupted as Ctrl-C would: it lets its provider finish
	// and writes the state of what it applied, which a kill would lose.
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 30 * time.Second
	cmd.Dir = tf.Dir
	cmd.Env = append(os.Environ(), tf.Env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if err != nil {
		return out.String(), fmt.Errorf("terraform %s in %s: %w\n%s", strings.Join(args, " "), tf.Dir, err, out.String())
	}
	return out.String(), nil
}

// Init installs the configuration's modules. Providers need no installing: the
// override supplies the only one, and `terraform init` would ask the registry for it.
func (tf *Terraform) Init(ctx context.Context) error {
	_, err := tf.Run(ctx, "get", "-no-color")
	return err
}

// Apply applies the configuration without asking.
func (tf *Terraform) Apply(ctx context.Context) error {
	_, err := tf.Run(ctx, "apply", "-auto-approve", "-no-color")
	return err
}

// Destroy destroys everything the configuration manages.
func (tf *Terraform) Destroy(ctx context.Context) error {
	_, err := tf.Run(ctx, "destroy", "-auto-approve", "-no-color")
	return err
}

// PlannedChanges runs a plan and returns "" when it has no changes, or the plan.
func (tf *Terraform) PlannedChanges(ctx context.Context) (string, error) {
	out, err := tf.Run(ctx, "plan", "-detailed-exitcode", "-no-color")
	var exit *exec.ExitError
	switch {
	case err == nil:
		return "", nil
	case errors.As(err, &exit) && exit.ExitCode() == 2:
		return out, nil
	default:
		return "", err
	}
}

// StateResources lists the resource addresses in the state.
func (tf *Terraform) StateResources(ctx context.Context) ([]string, error) {
	out, err := tf.Run(ctx, "state", "list", "-no-color")
	if err != nil {
		return nil, err
	}
	return strings.Fields(out), nil
}

// CopyConfigurations copies the repository's examples/ and modules/ into dst,
// keeping their relative layout (examples call ../../modules/...) and leaving out
// any .terraform directory or state, so each run starts clean.
func CopyConfigurations(repoRoot, dst string) error {
	for _, top := range []string{"examples", "modules"} {
		src := filepath.Join(repoRoot, top)
		err := filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(repoRoot, path)
			name := d.Name()
			if d.IsDir() && name == ".terraform" {
				return filepath.SkipDir
			}
			if strings.HasPrefix(name, "terraform.tfstate") || name == ".terraform.lock.hcl" {
				return nil
			}
			target := filepath.Join(dst, rel)
			if d.IsDir() {
				return os.MkdirAll(target, 0o755)
			}
			data, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			return os.WriteFile(target, data, 0o644)
		})
		if err != nil {
			return fmt.Errorf("copying %s, %w", top, err)
		}
	}
	return nil
}

// ControllerImage is the controller image a provider or CLI built from source here
// is given: it is no release, so it has no image of its own (and kwok runs no image).
const ControllerImage = "dovetail-controller:dev"

// BuildProvider compiles terraform-provider-dovetail from the repository into dir.
func BuildProvider(ctx context.Context, repoRoot, dir string) error {
	return buildProvider(ctx, repoRoot, dir)
}

// BuildReleasedProvider is BuildProvider stamped as make release stamps release v
// (such as "0.0.0-e2e"), for a test of what a user of a release applies: it defaults
// to its release's image.
func BuildReleasedProvider(ctx context.Context, repoRoot, dir, v string) error {
	return buildProvider(ctx, repoRoot, dir, "-ldflags", "-X "+version.Symbol+"=v"+v)
}

func buildProvider(ctx context.Context, repoRoot, dir string, flags ...string) error {
	args := append(append([]string{"build"}, flags...), "-o", filepath.Join(dir, "terraform-provider-dovetail"), "./provider/cmd/terraform-provider-dovetail")
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = repoRoot
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("building the provider, %w\n%s", err, out)
	}
	return nil
}
