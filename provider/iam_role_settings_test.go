package provider_test

import (
	"context"
	"fmt"
	"regexp"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"

	"github.com/dovetail-sh/dovetail/provider"
	"github.com/dovetail-sh/dovetail/tests/testenv"
)

// Both roles take tags, a permissions boundary and a path, as the roles of
// terraform-aws-eks//modules/karpenter do: created with them, tags and boundary
// changed in place, imported back the same.
func TestAccRoleTagsBoundaryAndPath(t *testing.T) {
	acceptance(t)
	ctx := context.Background()
	moto := testenv.StartMoto(t)
	api := testenv.AWSClients(t, moto, "us-west-2").IAM
	var boundaries []string
	for _, name := range []string{"boundary-a", "boundary-b"} {
		out, err := api.CreatePolicy(ctx, &iam.CreatePolicyInput{PolicyName: aws.String(name),
			PolicyDocument: aws.String(`{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":"*","Resource":"*"}]}`)})
		if err != nil {
			t.Fatal(err)
		}
		boundaries = append(boundaries, aws.ToString(out.Policy.Arn))
	}
	config := func(tags, boundary string) string {
		return awsProvider(moto.Endpoint, "iam") + fmt.Sprintf(`
resource "dovetail_node_role" "this" {
  name                    = "KarpenterNodeRole-demo"
  path                    = "/dovetail/"
  permissions_boundary    = %q
  tags                    = %s
  create_instance_profile = true
}
resource "dovetail_controller_role" "this" {
  name                 = "DovetailController-demo"
  cluster_name         = "demo"
  region               = "us-west-2"
  account_id           = "123456789012"
  node_role_arn        = dovetail_node_role.this.arn
  path                 = "/dovetail/"
  permissions_boundary = %q
  tags                 = %s
}
`, boundary, tags, boundary, tags)
	}
	roleIs := func(name, boundary string, tags map[string]string) resource.TestCheckFunc {
		return func(*terraform.State) error {
			out, err := api.GetRole(ctx, &iam.GetRoleInput{RoleName: aws.String(name)})
			if err != nil {
				return err
			}
			if aws.ToString(out.Role.Path) != "/dovetail/" {
				return fmt.Errorf("%s path %s", name, aws.ToString(out.Role.Path))
			}
			if out.Role.PermissionsBoundary == nil || aws.ToString(out.Role.PermissionsBoundary.PermissionsBoundaryArn) != boundary {
				return fmt.Errorf("%s boundary %+v, want %s", name, out.Role.PermissionsBoundary, boundary)
			}
			got := map[string]string{}
			for _, tag := range out.Role.Tags {
				got[aws.ToString(tag.Key)] = aws.ToString(tag.Value)
			}
			for k, v := range tags {
				if got[k] != v {
					return fmt.Errorf("%s tags %v, want %v among them", name, got, tags)
				}
			}
			if _, stale := got["team"]; stale && tags["team"] == "" {
				return fmt.Errorf("%s still has the removed tag team: %v", name, got)
			}
			return nil
		}
	}
	profileIs := func(tags map[string]string) resource.TestCheckFunc {
		return func(*terraform.State) error {
			out, err := api.GetInstanceProfile(ctx, &iam.GetInstanceProfileInput{InstanceProfileName: aws.String("KarpenterNodeRole-demo")})
			if err != nil {
				return err
			}
			got := map[string]string{}
			for _, tag := range out.InstanceProfile.Tags {
				if k := aws.ToString(tag.Key); k != provider.CreationTokenTag {
					got[k] = aws.ToString(tag.Value)
				}
			}
			if fmt.Sprint(got) != fmt.Sprint(tags) {
				return fmt.Errorf("instance profile tags %v, want %v", got, tags)
			}
			return nil
		}
	}
	both := func(boundary string, tags map[string]string) resource.TestCheckFunc {
		return resource.ComposeTestCheckFunc(roleIs("KarpenterNodeRole-demo", boundary, tags), roleIs("DovetailController-demo", boundary, tags), profileIs(tags))
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: factories,
		Steps: []resource.TestStep{
			{
				Config: config(`{ team = "platform", env = "prod" }`, boundaries[0]),
				Check:  both(boundaries[0], map[string]string{"team": "platform", "env": "prod"}),
			},
			{
				// Tags and boundary change in place: the roles keep their ARNs.
				Config: config(`{ env = "staging", owner = "sre" }`, boundaries[1]),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction("dovetail_node_role.this", plancheck.ResourceActionUpdate),
					plancheck.ExpectResourceAction("dovetail_controller_role.this", plancheck.ResourceActionUpdate),
				}},
				Check: both(boundaries[1], map[string]string{"env": "staging", "owner": "sre"}),
			},
			{ResourceName: "dovetail_node_role.this", ImportState: true, ImportStateId: "KarpenterNodeRole-demo", ImportStateVerify: true},
			{
				// Imported with an import block under the configuration that made it, it
				// plans nothing else: no replacement, no update.
				ResourceName: "dovetail_node_role.this", ImportState: true, ImportStateKind: resource.ImportBlockWithID, ImportStateId: "KarpenterNodeRole-demo",
			},
		},
	})
	// Bad settings fail the plan, naming the attribute.
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: factories,
		Steps: []resource.TestStep{{
			Config:      config(`{ "" = "x" }`, "arn:aws:iam::123456789012:role/not-a-policy"),
			PlanOnly:    true,
			ExpectError: regexp.MustCompile(`(?s)permissions_boundary must be an IAM policy ARN.*tags\[""\] string length must be between 1 and 128`),
		}},
	})
}
