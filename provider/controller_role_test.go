package provider_test

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/terraform"

	"github.com/dovetail-sh/dovetail/tests/testenv"
)

func controllerRoleConfig(endpoint, queue, trust string) string {
	return awsProvider(endpoint, "iam") + fmt.Sprintf(`
resource "dovetail_controller_role" "this" {
  name          = "DovetailController-demo"
  cluster_name  = "demo"
  region        = "us-west-2"
  account_id    = "123456789012"
  node_role_arn = "arn:aws:iam::123456789012:role/KarpenterNodeRole-demo"
  %s
  %s
}
`, queue, trust)
}

func TestAccControllerRole(t *testing.T) {
	acceptance(t)
	ctx := context.Background()
	moto := testenv.StartMoto(t)
	api := testenv.AWSClients(t, moto, "us-west-2").IAM
	name := aws.String("DovetailController-demo")
	policyContains := func(want string, present bool) resource.TestCheckFunc {
		return func(*terraform.State) error {
			out, err := api.GetRolePolicy(ctx, &iam.GetRolePolicyInput{RoleName: name, PolicyName: aws.String("DovetailController")})
			if err != nil {
				return err
			}
			doc, _ := url.QueryUnescape(aws.ToString(out.PolicyDocument))
			if strings.Contains(strings.ReplaceAll(doc, " ", ""), want) != present {
				return fmt.Errorf("policy contains %s: %v, want %v\n%s", want, !present, present, doc)
			}
			return nil
		}
	}
	trustContains := func(want string) resource.TestCheckFunc {
		return func(*terraform.State) error {
			out, err := api.GetRole(ctx, &iam.GetRoleInput{RoleName: name})
			if err != nil {
				return err
			}
			doc, _ := url.QueryUnescape(aws.ToString(out.Role.AssumeRolePolicyDocument))
			if !strings.Contains(doc, want) {
				return fmt.Errorf("trust policy lacks %s:\n%s", want, doc)
			}
			return nil
		}
	}
	queue := `interruption_queue_arn = "arn:aws:sqs:us-west-2:123456789012:demo"`
	irsa := `oidc_provider_arn = "arn:aws:iam::123456789012:oidc-provider/oidc.eks.us-west-2.amazonaws.com/id/ABC"`
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: factories,
		CheckDestroy: func(*terraform.State) error {
			if _, err := api.GetRole(ctx, &iam.GetRoleInput{RoleName: name}); err == nil {
				return fmt.Errorf("the controller role still exists")
			}
			return nil
		},
		Steps: []resource.TestStep{
			{
				Config: controllerRoleConfig(moto.Endpoint, "", ""),
				Check:  resource.ComposeTestCheckFunc(trustContains("pods.eks.amazonaws.com"), policyContains(`"iam:PassRole"`, true), policyContains("sqs:ReceiveMessage", false)),
			},
			{
				// Adding the queue updates the policy in place.
				Config: controllerRoleConfig(moto.Endpoint, queue, ""),
				Check:  policyContains("sqs:ReceiveMessage", true),
			},
			{
				// The inputs the policy was rendered from are not in IAM; import keeps the rest.
				ResourceName: "dovetail_controller_role.this", ImportState: true, ImportStateId: "DovetailController-demo", ImportStateVerify: true,
				ImportStateVerifyIgnore: []string{"cluster_name", "region", "account_id", "node_role_arn", "interruption_queue_arn", "namespace", "service_account"},
			},
			{
				// A policy removed by hand is drift, and apply puts it back.
				PreConfig: func() {
					if _, err := api.DeleteRolePolicy(ctx, &iam.DeleteRolePolicyInput{RoleName: name, PolicyName: aws.String("DovetailController")}); err != nil {
						t.Fatal(err)
					}
				},
				Config: controllerRoleConfig(moto.Endpoint, queue, ""), PlanOnly: true, ExpectNonEmptyPlan: true,
			},
			{
				Config: controllerRoleConfig(moto.Endpoint, queue, ""),
				Check:  policyContains("sqs:ReceiveMessage", true),
			},
			{
				// Switching to IRSA replaces the role with one trusting the OIDC provider.
				Config: controllerRoleConfig(moto.Endpoint, queue, irsa),
				Check:  trustContains("system:serviceaccount:dovetail:dovetail"),
			},
		},
	})
}
