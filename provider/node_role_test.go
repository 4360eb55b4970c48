package provider_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/dovetail-sh/dovetail/provider"
	"github.com/dovetail-sh/dovetail/tests/testenv"
)

func nodeRoleConfig(endpoint string, profile bool) string {
	return awsProvider(endpoint, "iam") + fmt.Sprintf(`
resource "dovetail_node_role" "this" {
  name                    = "KarpenterNodeRole-demo"
  create_instance_profile = %t
}
`, profile)
}

func TestAccNodeRole(t *testing.T) {
	acceptance(t)
	ctx := context.Background()
	moto := testenv.StartMoto(t)
	api := testenv.AWSClients(t, moto, "us-west-2").IAM
	name := aws.String("KarpenterNodeRole-demo")
	policies := func(want ...string) resource.TestCheckFunc {
		return func(*terraform.State) error {
			out, err := api.ListAttachedRolePolicies(ctx, &iam.ListAttachedRolePoliciesInput{RoleName: name})
			if err != nil {
				return err
			}
			got := sets.New[string]()
			for _, p := range out.AttachedPolicies {
				got.Insert(aws.ToString(p.PolicyName))
			}
			if !got.Equal(sets.New(want...)) {
				return fmt.Errorf("attached policies %v, want %v", sets.List(got), want)
			}
			return nil
		}
	}
	profile := func(want bool) resource.TestCheckFunc {
		return func(*terraform.State) error {
			out, err := api.GetInstanceProfile(ctx, &iam.GetInstanceProfileInput{InstanceProfileName: name})
			switch {
			case want && err != nil:
				return fmt.Errorf("instance profile: %v", err)
			case want && (len(out.InstanceProfile.Roles) != 1 || aws.ToString(out.InstanceProfile.Roles[0].RoleName) != *name):
				return fmt.Errorf("instance profile holds %+v, want the node role", out.InstanceProfile.Roles)
			case !want && err == nil:
				return fmt.Errorf("an instance profile exists that should not")
			}
			return nil
		}
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: factories,
		CheckDestroy: func(*terraform.State) error {
			if _, err := api.GetRole(ctx, &iam.GetRoleInput{RoleName: name}); err == nil {
				return fmt.Errorf("the role still exists")
			}
			return profile(false)(nil)
		},
		Steps: []resource.TestStep{
			{
				Config: nodeRoleConfig(moto.Endpoint, false),
				Check: resource.ComposeTestCheckFunc(policies(provider.NodeRolePolicies...), profile(false),
					resource.TestCheckResourceAttr("dovetail_node_role.this", "arn", "arn:aws:iam::123456789012:role/KarpenterNodeRole-demo")),
			},
			{
				// Asking for an instance profile replaces the role with one that has it.
				Config: nodeRoleConfig(moto.Endpoint, true),
				Check: resource.ComposeTestCheckFunc(policies(provider.NodeRolePolicies...), profile(true),
					resource.TestCheckResourceAttr("dovetail_node_role.this", "instance_profile_name", "KarpenterNodeRole-demo")),
			},
			{ResourceName: "dovetail_node_role.this", ImportState: true, ImportStateId: "KarpenterNodeRole-demo", ImportStateVerify: true},
			{
				// Imported with an import block under the configuration that made it, it
				// plans nothing else: no replacement, no update.
				ResourceName: "dovetail_node_role.this", ImportState: true, ImportStateKind: resource.ImportBlockWithID, ImportStateId: "KarpenterNodeRole-demo",
			},
			{
				// A managed policy detached out of band shows in the plan...
				PreConfig: func() {
					if _, err := api.DetachRolePolicy(ctx, &iam.DetachRolePolicyInput{RoleName: name, PolicyArn: aws.String("arn:aws:iam::aws:policy/AmazonEKS_CNI_Policy")}); err != nil {
						t.Fatal(err)
					}
				},
				Config: nodeRoleConfig(moto.Endpoint, true), PlanOnly: true, ExpectNonEmptyPlan: true,
			},
			{
				// ...and apply attaches it again, in place.
				Config: nodeRoleConfig(moto.Endpoint, true),
				Check:  resource.ComposeTestCheckFunc(policies(provider.NodeRolePolicies...), profile(true)),
			},
		},
	})
}
