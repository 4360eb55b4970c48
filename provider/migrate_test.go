package provider_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"sigs.k8s.io/controller-runtime/pkg/client"

	awsv1 "github.com/dovetail-sh/dovetail/controller/apis/aws/v1"
	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/controller/migrate"
	"github.com/dovetail-sh/dovetail/tests/testenv"
)

// TestAccMigratedHCLApplies: what `dovetail migrate -o hcl` writes for the old
// walkthrough manifests is a configuration the provider validates, plans and
// applies, and the cluster then holds the pools and classes it describes.
func TestAccMigratedHCLApplies(t *testing.T) {
	acceptance(t)
	for _, file := range []string{"v1alpha5-getting-started.yaml", "v1alpha5-inline-provider.yaml", "v1alpha5-consolidation.yaml", "v1beta1-getting-started.yaml", "v1beta1-bash-userdata.yaml"} {
		t.Run(file, func(t *testing.T) {
			api := testenv.StartAPIServer(t)
			f, err := os.Open(filepath.Join("..", "controller", "migrate", "testdata", file))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			docs, err := migrate.Decode(f)
			if err != nil {
				t.Fatal(err)
			}
			res, err := migrate.Convert(docs, migrate.Options{Role: "KarpenterNodeRole-demo"})
			if err != nil {
				t.Fatal(err)
			}
			var hcl bytes.Buffer
			if err := migrate.WriteHCL(&hcl, res); err != nil {
				t.Fatal(err)
			}
			resource.Test(t, resource.TestCase{
				ProtoV6ProviderFactories: factories,
				Steps: []resource.TestStep{{
					Config: kubeProvider(api.Kubeconfig) + hcl.String(),
					Check: func(*terraform.State) error {
						for _, o := range res.Objects {
							var obj client.Object = &v1.NodePool{}
							if o.Kind == "EC2NodeClass" {
								obj = &awsv1.EC2NodeClass{}
							}
							if err := api.Client.Get(context.Background(), client.ObjectKey{Name: o.Name}, obj); err != nil {
								return fmt.Errorf("%s %s is not in the cluster after apply: %v\n%s", o.Kind, o.Name, err, hcl.String())
							}
							// Strings reach the cluster byte for byte: HCL reads
							// "${" and "%{" as templates unless they are escaped.
							if class, ok := obj.(*awsv1.EC2NodeClass); ok {
								spec, _ := o.Body["spec"].(map[string]any)
								if want, _ := spec["userData"].(string); want != "" && (class.Spec.UserData == nil || *class.Spec.UserData != want) {
									return fmt.Errorf("EC2NodeClass %s userData in the cluster:\n%v\nwant:\n%s\nfrom HCL:\n%s", o.Name, class.Spec.UserData, want, hcl.String())
								}
								tags, _ := spec["tags"].(map[string]any)
								for k, v := range tags {
									if class.Spec.Tags[k] != v {
										return fmt.Errorf("EC2NodeClass %s tag %s is %q in the cluster, want %q", o.Name, k, class.Spec.Tags[k], v)
									}
								}
							}
						}
						return nil
					},
				}},
			})
		})
	}
}
