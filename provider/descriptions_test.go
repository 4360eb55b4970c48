package provider_test

import (
	"context"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
)

// Every attribute of the provider, its resources and data sources says what it is:
// `terraform providers schema -json` and the registry docs show the description.
func TestEveryAttributeIsDescribed(t *testing.T) {
	server, err := factories["dovetail"]()
	if err != nil {
		t.Fatal(err)
	}
	resp, err := server.GetProviderSchema(context.Background(), &tfprotov6.GetProviderSchemaRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var missing []string
	var walk func(prefix string, attrs []*tfprotov6.SchemaAttribute, blocks []*tfprotov6.SchemaNestedBlock)
	walk = func(prefix string, attrs []*tfprotov6.SchemaAttribute, blocks []*tfprotov6.SchemaNestedBlock) {
		for _, a := range attrs {
			if strings.TrimSpace(a.Description) == "" {
				missing = append(missing, prefix+a.Name)
			}
			if a.NestedType != nil {
				walk(prefix+a.Name+".", a.NestedType.Attributes, nil)
			}
		}
		for _, b := range blocks {
			walk(prefix+b.TypeName+".", b.Block.Attributes, b.Block.BlockTypes)
		}
	}
	walk("provider.", resp.Provider.Block.Attributes, resp.Provider.Block.BlockTypes)
	for name, s := range resp.ResourceSchemas {
		walk(name+".", s.Block.Attributes, s.Block.BlockTypes)
	}
	for name, s := range resp.DataSourceSchemas {
		walk(name+".", s.Block.Attributes, s.Block.BlockTypes)
	}
	if len(missing) > 0 {
		t.Errorf("%d attributes have no description:\n%s", len(missing), strings.Join(missing, "\n"))
	}
}
