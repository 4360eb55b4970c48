// Command release writes a release of Dovetail into dist/, built from this checkout
// with nothing but the Go toolchain (no Docker daemon, no network):
//
//   - the Terraform provider for linux and darwin on amd64 and arm64, as the zips
//     `terraform providers mirror` writes, under dist/terraform-mirror/ (a
//     filesystem_mirror), and beside them in dist/ with the registry's
//     terraform-provider-dovetail_<version>_SHA256SUMS (the file to sign with
//     gpg --detach-sign) and _manifest.json (the protocol declaration);
//   - the controller image for linux/amd64 and linux/arm64 as an OCI image archive
//     (an OCI image layout in a tar, as `skopeo copy oci-archive:` reads it): a static
//     binary stamped with the version, the nonroot user, CA certificates;
//   - the Helm chart packaged at the release version, whose default image is the one
//     built here;
//   - the dovetail CLI (simulate, explain, render, migrate) for linux and darwin on
//     amd64 and arm64, as dovetail_<version>_<os>_<arch>.tar.gz;
//   - dist/SHA256SUMS of everything.
//
// goreleaser would need the network for the image (a base image to pull, a registry
// to push to) and does not write the filesystem-mirror layout; this does both offline.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"strings"
)

func main() {
	var o options
	flag.StringVar(&o.version, "version", "", "release version, such as 0.2.0 (required)")
	flag.StringVar(&o.dist, "dist", "dist", "output folder, replaced")
	flag.StringVar(&o.root, "root", ".", "the repository")
	providers := flag.String("provider-platforms", "linux/amd64,linux/arm64,darwin/amd64,darwin/arm64", "os/arch of the provider builds")
	images := flag.String("image-platforms", "linux/amd64,linux/arm64", "os/arch of the controller image")
	clis := flag.String("cli-platforms", "linux/amd64,linux/arm64,darwin/amd64,darwin/arm64", "os/arch of the CLI builds")
	flag.StringVar(&o.imageRepository, "image-repository", "ghcr.io/dovetail-sh/dovetail-controller", "repository the image is tagged for")
	flag.Parse()
	o.providerPlatforms, o.imagePlatforms, o.cliPlatforms = strings.Split(*providers, ","), strings.Split(*images, ","), strings.Split(*clis, ",")
	if err := run(context.Background(), o); err != nil {
		log.Fatalf("release: %v", err)
	}
	fmt.Printf("release %s written to %s\n", o.version, o.dist)
}
