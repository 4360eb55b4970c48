package main

import (
	"archive/tar"
	"bufio"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/layout"
	"helm.sh/helm/v3/pkg/chart/loader"
)

// A release built for this machine's platform: the provider installs with
// `terraform init` from the filesystem mirror (no dev_overrides), every sum matches,
// the image archive is an OCI layout whose image runs as nonroot and reports the
// version, and the chart is at the version with the image built as its default.
func TestReleaseInstalls(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the provider and the controller")
	}
	const version = "0.2.0"
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	dist := filepath.Join(t.TempDir(), "dist")
	host := runtime.GOOS + "/" + runtime.GOARCH
	o := options{version: version, dist: dist, root: root, imageRepository: "ghcr.io/dovetail-sh/dovetail-controller",
		providerPlatforms: []string{host}, imagePlatforms: []string{"linux/" + runtime.GOARCH}, cliPlatforms: []string{host}}
	// Whatever the build leaves in the temporary directory is left on the
	// releaser's machine.
	scratch := t.TempDir()
	t.Setenv("TMPDIR", scratch)
	if err := run(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	if left, err := os.ReadDir(scratch); err != nil {
		t.Fatal(err)
	} else if len(left) > 0 {
		t.Errorf("the release left %d files in the temporary directory, the first %s", len(left), left[0].Name())
	}

	t.Run("sums", func(t *testing.T) {
		for _, file := range []string{"SHA256SUMS", "terraform-provider-dovetail_" + version + "_SHA256SUMS"} {
			checkSums(t, dist, file)
		}
	})

	t.Run("terraform init installs the provider from the mirror", func(t *testing.T) {
		work := t.TempDir()
		cli := filepath.Join(work, "cli.tfrc")
		must(t, os.WriteFile(cli, []byte(fmt.Sprintf(`provider_installation {
  filesystem_mirror {
    path    = %q
    include = ["registry.terraform.io/dovetail-sh/dovetail"]
  }
}
`, filepath.Join(dist, "terraform-mirror"))), 0o644))
		must(t, os.WriteFile(filepath.Join(work, "main.tf"), []byte(`terraform {
  required_providers {
    dovetail = {
      source  = "dovetail-sh/dovetail"
      version = "`+version+`"
    }
  }
}

provider "dovetail" {
  kubernetes {
    host = "https://127.0.0.1:1"
  }
}

# No image: a release deploys its own.
resource "dovetail_controller" "this" {
  cluster_name = "demo"
  aws_region   = "us-west-2"
}
`), 0o644))
		env := append(os.Environ(), "TF_CLI_CONFIG_FILE="+cli, "CHECKPOINT_DISABLE=1", "TF_IN_AUTOMATION=1")
		for _, args := range [][]string{{"init", "-no-color", "-input=false"}, {"providers", "schema", "-json"}, {"plan", "-no-color", "-input=false", "-refresh=false"}} {
			cmd := exec.Command("terraform", args...)
			cmd.Dir, cmd.Env = work, env
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("terraform %s: %v\n%s", strings.Join(args, " "), err, out)
			}
			if args[0] == "providers" && !strings.Contains(string(out), `"dovetail_node_pool"`) {
				t.Errorf("the installed provider serves no dovetail_node_pool schema")
			}
			if args[0] == "plan" && !strings.Contains(string(out), `image                           = "ghcr.io/dovetail-sh/dovetail-controller:v`+version+`"`) {
				t.Errorf("the installed provider does not deploy the controller image of its release by default")
			}
		}
		lock, err := os.ReadFile(filepath.Join(work, ".terraform.lock.hcl"))
		must(t, err)
		if !strings.Contains(string(lock), `version     = "`+version+`"`) {
			t.Errorf("lock file does not pin %s:\n%s", version, lock)
		}
		// The mirror's <version>.json lists the h1: hash Terraform computed of the
		// installed package, as `terraform providers mirror` writes it.
		index, err := os.ReadFile(filepath.Join(dist, "terraform-mirror", "registry.terraform.io", "dovetail-sh", "dovetail", version+".json"))
		must(t, err)
		for _, h := range regexp.MustCompile(`"(h1:[^"]+)"`).FindAllStringSubmatch(string(index), -1) {
			if !strings.Contains(string(lock), h[1]) {
				t.Errorf("the mirror lists hash %s, which terraform init did not record:\n%s", h[1], lock)
			}
		}
		if !strings.Contains(string(index), "h1:") {
			t.Errorf("%s.json lists no h1: hash:\n%s", version, index)
		}
	})

	t.Run("the image is an OCI archive that runs as nonroot and knows its version", func(t *testing.T) {
		oci := t.TempDir()
		untar(t, filepath.Join(dist, "dovetail-controller_"+version+"_oci.tar"), oci)
		p, err := layout.FromPath(oci)
		must(t, err)
		outer, err := p.ImageIndex()
		must(t, err)
		outerManifest, err := outer.IndexManifest()
		must(t, err)
		if len(outerManifest.Manifests) != 1 || outerManifest.Manifests[0].Annotations["org.opencontainers.image.ref.name"] != "v"+version {
			t.Fatalf("the layout's index does not tag the image v%s: %+v", version, outerManifest.Manifests)
		}
		index, err := outer.ImageIndex(outerManifest.Manifests[0].Digest)
		must(t, err)
		manifest, err := index.IndexManifest()
		must(t, err)
		if len(manifest.Manifests) != 1 || manifest.Manifests[0].Platform.Architecture != runtime.GOARCH {
			t.Fatalf("image index %+v, want one linux/%s image", manifest.Manifests, runtime.GOARCH)
		}
		img, err := index.Image(manifest.Manifests[0].Digest)
		must(t, err)
		cfg, err := img.ConfigFile()
		must(t, err)
		if cfg.Config.User != "65532:65532" || strings.Join(cfg.Config.Entrypoint, " ") != "/dovetail-controller" || cfg.Config.Labels["org.opencontainers.image.version"] != "v"+version {
			t.Errorf("image config %+v", cfg.Config)
		}
		layers, err := img.Layers()
		must(t, err)
		if len(layers) != 1 {
			t.Fatalf("%d layers, want 1", len(layers))
		}
		rc, err := layers[0].Uncompressed()
		must(t, err)
		defer rc.Close()
		bin := filepath.Join(t.TempDir(), "dovetail-controller")
		files := map[string]bool{}
		tr := tar.NewReader(rc)
		for {
			h, err := tr.Next()
			if err == io.EOF {
				break
			}
			must(t, err)
			files[h.Name] = true
			if h.Name == "dovetail-controller" {
				f, err := os.OpenFile(bin, os.O_CREATE|os.O_WRONLY, 0o755)
				must(t, err)
				_, err = io.Copy(f, tr)
				must(t, err)
				must(t, f.Close())
			}
		}
		for _, want := range []string{"etc/passwd", "etc/ssl/certs/ca-certificates.crt", "dovetail-controller"} {
			if !files[want] {
				t.Errorf("the image has no /%s", want)
			}
		}
		if runtime.GOOS == "linux" {
			out, err := exec.Command(bin, "--version").Output()
			must(t, err)
			if got := strings.TrimSpace(string(out)); got != "v"+version {
				t.Errorf("dovetail-controller --version printed %q, want v%s", got, version)
			}
		}
	})

	t.Run("the CLI runs from its archive and renders the release's image", func(t *testing.T) {
		dir := t.TempDir()
		untarGz(t, filepath.Join(dist, fmt.Sprintf("dovetail_%s_%s_%s.tar.gz", version, runtime.GOOS, runtime.GOARCH)), dir)
		bin := filepath.Join(dir, "dovetail")
		if _, err := os.Stat(filepath.Join(dir, "LICENSE")); err != nil {
			t.Errorf("the archive has no LICENSE: %v", err)
		}
		out, err := exec.Command(bin, "version").Output()
		must(t, err)
		if got := strings.TrimSpace(string(out)); got != "v"+version {
			t.Errorf("dovetail version printed %q, want v%s", got, version)
		}
		out, err = exec.Command(bin, "render", "--cluster-name", "demo").Output()
		must(t, err)
		if !strings.Contains(string(out), "image: ghcr.io/dovetail-sh/dovetail-controller:v"+version+"\n") {
			t.Errorf("dovetail render does not deploy the release's image v%s", version)
		}
	})

	t.Run("the chart is at the version and deploys the image built", func(t *testing.T) {
		c, err := loader.Load(filepath.Join(dist, "dovetail-"+version+".tgz"))
		must(t, err)
		image, _ := c.Values["controller"].(map[string]any)["image"].(map[string]any)
		if c.Metadata.Version != version || c.Metadata.AppVersion != "v"+version || image["repository"] != o.imageRepository || image["tag"] != "" {
			t.Errorf("chart %s appVersion %s, image %v", c.Metadata.Version, c.Metadata.AppVersion, image)
		}
	})
}

func checkSums(t *testing.T, dir, file string) {
	t.Helper()
	f, err := os.Open(filepath.Join(dir, file))
	must(t, err)
	defer f.Close()
	n := 0
	scanner := bufio.NewScanner(f)
	for scanner.Scan() {
		sum, name, ok := strings.Cut(scanner.Text(), "  ")
		if !ok {
			t.Fatalf("%s: line %q", file, scanner.Text())
		}
		raw, err := os.ReadFile(filepath.Join(dir, name))
		must(t, err)
		got := sha256.Sum256(raw)
		if hex.EncodeToString(got[:]) != sum {
			t.Errorf("%s: %s does not match", file, name)
		}
		n++
	}
	if n < 2 {
		t.Errorf("%s lists %d files", file, n)
	}
}

func untar(t *testing.T, archive, dir string) {
	t.Helper()
	f, err := os.Open(archive)
	must(t, err)
	defer f.Close()
	extract(t, tar.NewReader(f), dir)
}

// extract writes a tar's files and folders under dir.
func extract(t *testing.T, tr *tar.Reader, dir string) {
	t.Helper()
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return
		}
		must(t, err)
		path := filepath.Join(dir, filepath.FromSlash(h.Name))
		if h.Typeflag == tar.TypeDir {
			must(t, os.MkdirAll(path, 0o755))
			continue
		}
		must(t, os.MkdirAll(filepath.Dir(path), 0o755))
		data, err := io.ReadAll(tr)
		must(t, err)
		must(t, os.WriteFile(path, data, os.FileMode(h.Mode)|0o600))
	}
}

func untarGz(t *testing.T, archive, dir string) {
	t.Helper()
	f, err := os.Open(archive)
	must(t, err)
	defer f.Close()
	gz, err := gzip.NewReader(f)
	must(t, err)
	extract(t, tar.NewReader(gz), dir)
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
