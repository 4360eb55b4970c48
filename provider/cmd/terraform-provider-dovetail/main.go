// Command terraform-provider-dovetail serves the Terraform provider.
package main

import (
	"context"
	"flag"
	"log"

	"github.com/hashicorp/terraform-plugin-framework/providerserver"

	"github.com/dovetail-sh/dovetail/provider"
)

// version is set at build time.
var version = "dev"

func main() {
	debug := flag.Bool("debug", false, "run with support for debuggers such as delve")
	flag.Parse()
	err := providerserver.Serve(context.Background(), provider.New(version), providerserver.ServeOpts{
		Address: "registry.terraform.io/dovetail-sh/dovetail",
		Debug:   *debug,
	})
	if err != nil {
		log.Fatal(err)
	}
}
