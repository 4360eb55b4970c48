package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/dovetail-sh/dovetail/controller/version"
)

// cli writes the dovetail CLI (simulate, explain, render, migrate) for each
// platform as dovetail_<version>_<os>_<arch>.tar.gz: the binary, stamped with the
// version, and the LICENSE. Its render deploys the image of this release.
func cli(ctx context.Context, o options) error {
	for _, platform := range o.cliPlatforms {
		dir := filepath.Join(o.dist, ".build", "cli", strings.ReplaceAll(platform, "/", "_"))
		binary := filepath.Join(dir, "dovetail")
		if err := goBuild(ctx, o, "./controller/cmd/dovetail", platform, binary, "-X "+version.Symbol+"=v"+o.version); err != nil {
			return err
		}
		name := fmt.Sprintf("dovetail_%s_%s.tar.gz", o.version, strings.ReplaceAll(platform, "/", "_"))
		if err := tarGz(filepath.Join(o.dist, name), binary, filepath.Join(o.root, "LICENSE")); err != nil {
			return err
		}
	}
	return os.RemoveAll(filepath.Join(o.dist, ".build"))
}

// tarGz writes the CLI's archive: the binary, executable, and the LICENSE, in a
// gzipped tar as writeTar makes the image's layers.
func tarGz(dst, binary, license string) error {
	var entries []tarEntry
	for _, f := range []struct {
		name, path string
		mode       int64
	}{{"dovetail", binary, 0o755}, {"LICENSE", license, 0o644}} {
		data, err := os.ReadFile(f.path)
		if err != nil {
			return err
		}
		entries = append(entries, tarEntry{name: f.name, mode: f.mode, data: data})
	}
	var raw bytes.Buffer
	if err := writeTar(&raw, entries); err != nil {
		return err
	}
	var out bytes.Buffer
	gz := gzip.NewWriter(&out)
	if _, err := gz.Write(raw.Bytes()); err != nil {
		return err
	}
	if err := gz.Close(); err != nil {
		return err
	}
	return os.WriteFile(dst, out.Bytes(), 0o644)
}
