package main

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/dovetail-sh/dovetail/controller/version"
)

// nonroot is distroless's unprivileged user, which the Deployment's runAsNonRoot and
// the chart's securityContext expect.
const nonroot = 65532

// caBundle is the build machine's CA certificates, which the controller needs to call
// AWS over TLS (distroless/static carries Debian's; these machines run Debian).
const caBundle = "/etc/ssl/certs/ca-certificates.crt"

// image writes the controller image for each platform into one OCI image index, as an
// OCI image layout in a tar (an "OCI archive"), tagged with the version.
func image(ctx context.Context, o options) error {
	certs, err := os.ReadFile(caBundle)
	if err != nil {
		return fmt.Errorf("reading the CA certificates the image carries, %w", err)
	}
	tag := "v" + o.version
	var index v1.ImageIndex = empty.Index
	index = mutate.IndexMediaType(index, types.OCIImageIndex)
	for _, platform := range o.imagePlatforms {
		goos, goarch, _ := strings.Cut(platform, "/")
		binary := filepath.Join(o.dist, ".build", "controller_"+goos+"_"+goarch)
		if err := goBuild(ctx, o, "./controller/cmd/controller", platform, binary, "-X "+version.Symbol+"="+tag); err != nil {
			return err
		}
		img, err := controllerImage(binary, certs, o, goos, goarch, tag)
		if err != nil {
			return err
		}
		index = mutate.AppendManifests(index, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{
			Platform: &v1.Platform{OS: goos, Architecture: goarch}}})
	}
	layoutDir := filepath.Join(o.dist, ".build", "oci")
	p, err := layout.Write(layoutDir, empty.Index)
	if err != nil {
		return err
	}
	// The tag, as skopeo and containerd read it from an OCI layout.
	if err := p.AppendIndex(index, layout.WithAnnotations(map[string]string{
		"org.opencontainers.image.ref.name": tag, "io.containerd.image.name": o.imageRepository + ":" + tag})); err != nil {
		return err
	}
	archive := filepath.Join(o.dist, fmt.Sprintf("dovetail-controller_%s_oci.tar", o.version))
	if err := tarDir(layoutDir, archive); err != nil {
		return err
	}
	return os.RemoveAll(filepath.Join(o.dist, ".build"))
}

// controllerImage is one platform's image: the binary, the nonroot user, the CA
// certificates, on an empty base.
func controllerImage(binary string, certs []byte, o options, goos, goarch, tag string) (v1.Image, error) {
	bin, err := os.ReadFile(binary)
	if err != nil {
		return nil, err
	}
	files := []tarEntry{
		{name: "etc/", dir: true, mode: 0o755},
		{name: "etc/passwd", mode: 0o644, data: []byte(fmt.Sprintf("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:%d:%d:nonroot:/home/nonroot:/sbin/nologin\n", nonroot, nonroot))},
		{name: "etc/group", mode: 0o644, data: []byte(fmt.Sprintf("root:x:0:\nnonroot:x:%d:\n", nonroot))},
		{name: "etc/ssl/", dir: true, mode: 0o755},
		{name: "etc/ssl/certs/", dir: true, mode: 0o755},
		{name: "etc/ssl/certs/ca-certificates.crt", mode: 0o644, data: certs},
		{name: "home/", dir: true, mode: 0o755},
		{name: "home/nonroot/", dir: true, mode: 0o700, uid: nonroot},
		{name: "tmp/", dir: true, mode: 0o1777},
		{name: "dovetail-controller", mode: 0o755, data: bin},
	}
	var buf bytes.Buffer
	if err := writeTar(&buf, files); err != nil {
		return nil, err
	}
	// An opener over the bytes in memory: LayerFromReader would copy them to a
	// temporary file it never removes, 90 MB left behind by every release.
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(buf.Bytes())), nil },
		tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, err
	}
	img, err := mutate.AppendLayers(mutate.MediaType(empty.Image, types.OCIManifestSchema1), layer)
	if err != nil {
		return nil, err
	}
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture = goos, goarch
	// Reproducible: the same checkout gives the same image.
	cfg.Created = v1.Time{Time: time.Unix(0, 0).UTC()}
	cfg.Config.User = fmt.Sprintf("%d:%d", nonroot, nonroot)
	cfg.Config.Entrypoint = []string{"/dovetail-controller"}
	cfg.Config.Env = []string{"PATH=/", "SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt"}
	cfg.Config.WorkingDir = "/home/nonroot"
	cfg.Config.Labels = map[string]string{
		"org.opencontainers.image.title":    "dovetail-controller",
		"org.opencontainers.image.version":  tag,
		"org.opencontainers.image.source":   "https://github.com/dovetail-sh/dovetail",
		"org.opencontainers.image.licenses": "Apache-2.0",
	}
	return mutate.ConfigFile(img, cfg)
}

type tarEntry struct {
	name string
	dir  bool
	mode int64
	uid  int
	data []byte
}

func writeTar(w *bytes.Buffer, entries []tarEntry) error {
	tw := tar.NewWriter(w)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Mode: e.mode, Uid: e.uid, Gid: e.uid, ModTime: time.Unix(0, 0), Format: tar.FormatPAX}
		if e.dir {
			h.Typeflag = tar.TypeDir
		} else {
			h.Typeflag, h.Size = tar.TypeReg, int64(len(e.data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if !e.dir {
			if _, err := tw.Write(e.data); err != nil {
				return err
			}
		}
	}
	return tw.Close()
}

// tarDir writes dir's files into a tar at out, paths relative to dir.
func tarDir(dir, out string) error {
	var entries []tarEntry
	err := filepath.Walk(dir, func(path string, info os.FileInfo, err error) error {
		if err != nil || path == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		rel = filepath.ToSlash(rel)
		if info.IsDir() {
			entries = append(entries, tarEntry{name: rel + "/", dir: true, mode: 0o755})
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		entries = append(entries, tarEntry{name: rel, mode: 0o644, data: data})
		return nil
	})
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	if err := writeTar(&buf, entries); err != nil {
		return err
	}
	return os.WriteFile(out, buf.Bytes(), 0o644)
}
