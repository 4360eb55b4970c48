package main

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// cli writes the dovetail CLI (simulate, explain, render, migrate) for each
// platform as dovetail_<version>_<os>_<arch>.tar.gz: the binary, stamped with the
// version, and the LICENSE. Its render deploys the image of this release.
func cli(ctx context.Context, o options) error {
	for _, platform := range o.cliPlatforms {
		dir := filepath.Join(o.dist, ".build", "cli", strings.ReplaceAll(platform, "/", "_"))
		binary := filepath.Join(dir, "dovetail")
		if err := goBuild(ctx, o, "./controller/cmd/dovetail", platform, binary, "-X "+versionVar+"=v"+o.version); err != nil {
			return err
		}
		name := fmt.Sprintf("dovetail_%s_%s.tar.gz", o.version, strings.ReplaceAll(platform, "/", "_"))
		if err := tarGz(filepath.Join(o.dist, name), map[string]string{"dovetail": binary, "LICENSE": filepath.Join(o.root, "LICENSE")}); err != nil {
			return err
		}
	}
	return os.RemoveAll(filepath.Join(o.dist, ".build"))
}

// tarGz writes the files (name in the archive to path) into a gzipped tar, the
// binary executable.
func tarGz(dst string, files map[string]string) error {
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	defer out.Close()
	gz := gzip.NewWriter(out)
	tw := tar.NewWriter(gz)
	for _, name := range []string{"dovetail", "LICENSE"} {
		path, ok := files[name]
		if !ok {
			continue
		}
		info, err := os.Stat(path)
		if err != nil {
			return err
		}
		mode := int64(0o644)
		if name == "dovetail" {
			mode = 0o755
		}
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: mode, Size: info.Size(), ModTime: info.ModTime(), Typeflag: tar.TypeReg}); err != nil {
			return err
		}
		in, err := os.Open(path)
		if err != nil {
			return err
		}
		_, err = io.Copy(tw, in)
		in.Close()
		if err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	if err := gz.Close(); err != nil {
		return err
	}
	return out.Close()
}
