package main

import (
	"archive/zip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"golang.org/x/mod/sumdb/dirhash"

	"github.com/dovetail-sh/dovetail/controller/version"
)

type options struct {
	version, dist, root, imageRepository string
	providerPlatforms, imagePlatforms    []string
	cliPlatforms                         []string
}

// semver is what the Terraform registry and Helm accept as a version.
var semver = regexp.MustCompile(`^[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$`)

const (
	providerType      = "dovetail"
	providerNamespace = "dovetail-sh"
)

func run(ctx context.Context, o options) error {
	if !semver.MatchString(o.version) {
		return fmt.Errorf("-version %q: want a semantic version without a v, such as 0.2.0", o.version)
	}
	if err := os.RemoveAll(o.dist); err != nil {
		return err
	}
	if err := os.MkdirAll(o.dist, 0o755); err != nil {
		return err
	}
	if err := provider(ctx, o); err != nil {
		return fmt.Errorf("building the provider, %w", err)
	}
	if err := image(ctx, o); err != nil {
		return fmt.Errorf("building the controller image, %w", err)
	}
	if err := chart(o); err != nil {
		return fmt.Errorf("packaging the chart, %w", err)
	}
	if err := cli(ctx, o); err != nil {
		return fmt.Errorf("building the CLI, %w", err)
	}
	return sums(o.dist, "SHA256SUMS", nil)
}

// goBuild builds a static binary of pkg for platform, stamped with the version.
func goBuild(ctx context.Context, o options, pkg, platform, out string, ldflags string) error {
	goos, goarch, ok := strings.Cut(platform, "/")
	if !ok {
		return fmt.Errorf("platform %q: want os/arch", platform)
	}
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags", "-s -w "+ldflags, "-o", out, pkg)
	cmd.Dir = o.root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+goos, "GOARCH="+goarch)
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s for %s, %w: %s", pkg, platform, err, b)
	}
	return nil
}

// provider writes the provider zips in the filesystem-mirror layout, and the
// registry's sums and manifest beside them.
func provider(ctx context.Context, o options) error {
	mirror := filepath.Join(o.dist, "terraform-mirror", "registry.terraform.io", providerNamespace, providerType)
	if err := os.MkdirAll(mirror, 0o755); err != nil {
		return err
	}
	binary := fmt.Sprintf("terraform-provider-%s_v%s", providerType, o.version)
	var zips []string
	for _, platform := range o.providerPlatforms {
		build := filepath.Join(o.dist, ".build", strings.ReplaceAll(platform, "/", "_"), binary)
		// The provider deploys the controller image of its own release by default.
		ldflags := "-X main.version=" + o.version + " -X " + version.Symbol + "=v" + o.version
		if err := goBuild(ctx, o, "./provider/cmd/terraform-provider-dovetail", platform, build, ldflags); err != nil {
			return err
		}
		name := fmt.Sprintf("terraform-provider-%s_%s_%s.zip", providerType, o.version, strings.ReplaceAll(platform, "/", "_"))
		if err := zipFile(build, binary, filepath.Join(mirror, name)); err != nil {
			return err
		}
		if err := copyFile(filepath.Join(mirror, name), filepath.Join(o.dist, name)); err != nil {
			return err
		}
		zips = append(zips, name)
	}
	if err := os.RemoveAll(filepath.Join(o.dist, ".build")); err != nil {
		return err
	}
	if err := mirrorIndex(mirror, o.version, zips); err != nil {
		return err
	}
	prefix := fmt.Sprintf("terraform-provider-%s_%s", providerType, o.version)
	if err := copyFile(filepath.Join(o.root, "terraform-registry-manifest.json"), filepath.Join(o.dist, prefix+"_manifest.json")); err != nil {
		return err
	}
	return sums(o.dist, prefix+"_SHA256SUMS", append(zips, prefix+"_manifest.json"))
}

// zipFile writes a zip holding src as name, executable.
func zipFile(src, name, dst string) error {
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	defer out.Close()
	w := zip.NewWriter(out)
	h := &zip.FileHeader{Name: name, Method: zip.Deflate}
	h.SetMode(0o755)
	f, err := w.CreateHeader(h)
	if err != nil {
		return err
	}
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	if _, err := io.Copy(f, in); err != nil {
		return err
	}
	if err := w.Close(); err != nil {
		return err
	}
	return out.Close()
}

func copyFile(src, dst string) error {
	raw, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return os.WriteFile(dst, raw, 0o644)
}

// sums writes a sha256sum-format file of the named files of dir, or of every file
// under it when names is nil.
func sums(dir, file string, names []string) error {
	if names == nil {
		err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			rel, _ := filepath.Rel(dir, path)
			names = append(names, filepath.ToSlash(rel))
			return nil
		})
		if err != nil {
			return err
		}
	}
	sort.Strings(names)
	var b strings.Builder
	for _, name := range names {
		raw, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return err
		}
		sum := sha256.Sum256(raw)
		fmt.Fprintf(&b, "%s  %s\n", hex.EncodeToString(sum[:]), name)
	}
	return os.WriteFile(filepath.Join(dir, file), []byte(b.String()), 0o644)
}

// mirrorIndex writes index.json and <version>.json beside the zips, as `terraform
// providers mirror` does, so the folder also serves as a network mirror (any static
// HTTP server) and the lock file gets each platform's h1: hash.
func mirrorIndex(mirror, version string, zips []string) error {
	archives := map[string]any{}
	for _, name := range zips {
		hash, err := dirhash.HashZip(filepath.Join(mirror, name), dirhash.Hash1)
		if err != nil {
			return err
		}
		platform := strings.TrimSuffix(strings.TrimPrefix(name, fmt.Sprintf("terraform-provider-%s_%s_", providerType, version)), ".zip")
		archives[platform] = map[string]any{"url": name, "hashes": []string{hash}}
	}
	for file, doc := range map[string]any{
		"index.json":      map[string]any{"versions": map[string]any{version: map[string]any{}}},
		version + ".json": map[string]any{"archives": archives},
	} {
		raw, err := json.MarshalIndent(doc, "", "  ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(mirror, file), append(raw, '\n'), 0o644); err != nil {
			return err
		}
	}
	return nil
}
