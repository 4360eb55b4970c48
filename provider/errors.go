package provider

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/resource"

	"github.com/dovetail-sh/dovetail/controller/cloudprovider/aws/awserr"
)

var (
	isCode     = awserr.IsCode
	isNotFound = awserr.IsNotFound
)

// requireAWS fails a plan that needs AWS when the provider has no aws block.
func requireAWS(c *Clients, resourceType string, diags *diag.Diagnostics) {
	if c != nil && c.AWS == nil {
		diags.AddError("The dovetail provider has no aws block",
			resourceType+" calls AWS: add aws { region = \"...\" } to the provider \"dovetail\" block.")
	}
}

// withClients gives a resource the provider's clients (AWS, the cluster, or both).
type withClients struct{ clients *Clients }

func (b *withClients) Configure(_ context.Context, req resource.ConfigureRequest, _ *resource.ConfigureResponse) {
	if c, ok := req.ProviderData.(*Clients); ok {
		b.clients = c
	}
}
