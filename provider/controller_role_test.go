package provider_test

import (
	"context"
	"fmt"
	"net/url"
	"sort"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
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
	attached := func(want ...string) resource.TestCheckFunc {
		return func(*terraform.State) error {
			out, err := api.ListAttachedRolePolicies(ctx, &iam.ListAttachedRolePoliciesInput{RoleName: name})
			if err != nil {
				return err
			}
			var got []string
			for _, p := range out.AttachedPolicies {
				got = append(got, aws.ToString(p.PolicyName))
			}
			sort.Strings(got)
			if strings.Join(got, ",") != strings.Join(want, ",") {
				return fmt.Errorf("attached policies %v, want %v", got, want)
			}
			return nil
		}
	}
	queue := `interruption_queue_arn = "arn:aws:sqs:us-west-2:123456789012:demo"`
	// The role's creation date tells the role created first from a replacement.
	var created string
	sameRole := func(*terraform.State) error {
		out, err := api.GetRole(ctx, &iam.GetRoleInput{RoleName: name})
		if err != nil {
			return err
		}
		if when := out.Role.CreateDate.String(); created == "" {
			created = when
		} else if when != created {
			return fmt.Errorf("the role was replaced (created %s, first %s)", when, created)
		}
		return nil
	}
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
				Check:  resource.ComposeTestCheckFunc(trustContains("pods.eks.amazonaws.com"), policyContains(`"iam:PassRole"`, true), policyContains("sqs:ReceiveMessage", false), sameRole),
			},
			{
				// Adding the queue updates the policy in place.
				Config: controllerRoleConfig(moto.Endpoint, queue, ""),
				Check:  policyContains("sqs:ReceiveMessage", true),
			},
			{
				// Import reads back everything the configuration set: the policy's
				// inputs from the policy, the trust from the role.
				ResourceName: "dovetail_controller_role.this", ImportState: true, ImportStateId: "DovetailController-demo", ImportStateVerify: true,
			},
			{
				// ...so importing it with an import block, under the configuration
				// that made it, plans nothing else (no replacement, no update).
				ResourceName: "dovetail_controller_role.this", ImportState: true, ImportStateKind: resource.ImportBlockWithID, ImportStateId: "DovetailController-demo",
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
				// Switching to IRSA updates the role's trust in place: the role, and
				// whatever else is attached to it, stays.
				Config: controllerRoleConfig(moto.Endpoint, queue, irsa),
				Check:  resource.ComposeTestCheckFunc(trustContains("system:serviceaccount:dovetail:dovetail"), sameRole),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction("dovetail_controller_role.this", plancheck.ResourceActionUpdate)}},
			},
			{
				Config: controllerRoleConfig(moto.Endpoint, queue, irsa+"\n  namespace = \"karpenter\"\n  service_account = \"karpenter\""),
				Check:  resource.ComposeTestCheckFunc(trustContains("system:serviceaccount:karpenter:karpenter"), sameRole),
			},
			{
				ResourceName: "dovetail_controller_role.this", ImportState: true, ImportStateId: "DovetailController-demo", ImportStateVerify: true,
			},
			{
				ResourceName: "dovetail_controller_role.this", ImportState: true, ImportStateKind: resource.ImportBlockWithID, ImportStateId: "DovetailController-demo",
			},
			{
				// Further managed policies (terraform-aws-eks's iam_role_policies) are
				// attached and detached in place, and imported.
				Config: controllerRoleConfig(moto.Endpoint, queue, withPolicies("ReadOnlyAccess", "AmazonSQSReadOnlyAccess")),
				Check:  resource.ComposeTestCheckFunc(attached("AmazonSQSReadOnlyAccess", "ReadOnlyAccess"), sameRole),
			},
			{
				Config: controllerRoleConfig(moto.Endpoint, queue, withPolicies("AmazonSQSReadOnlyAccess")),
				Check:  resource.ComposeTestCheckFunc(attached("AmazonSQSReadOnlyAccess"), sameRole),
			},
			{
				ResourceName: "dovetail_controller_role.this", ImportState: true, ImportStateKind: resource.ImportBlockWithID, ImportStateId: "DovetailController-demo",
			},
			{
				// One attached by hand is drift, detached by the next apply.
				PreConfig: func() {
					if _, err := api.AttachRolePolicy(ctx, &iam.AttachRolePolicyInput{RoleName: name, PolicyArn: aws.String("arn:aws:iam::aws:policy/ReadOnlyAccess")}); err != nil {
						t.Fatal(err)
					}
				},
				Config: controllerRoleConfig(moto.Endpoint, queue, withPolicies("AmazonSQSReadOnlyAccess")),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction("dovetail_controller_role.this", plancheck.ResourceActionUpdate)}},
				Check: attached("AmazonSQSReadOnlyAccess"),
			},
		},
	})
}

func withPolicies(names ...string) string {
	var arns []string
	for _, n := range names {
		arns = append(arns, fmt.Sprintf("%q", "arn:aws:iam::aws:policy/"+n))
	}
	return "policy_arns = [" + strings.Join(arns, ", ") + "]"
}
