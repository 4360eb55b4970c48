package provider_test

import (
	"context"
	"fmt"
	"maps"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	iamtypes "github.com/aws/aws-sdk-go-v2/service/iam/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"

	"github.com/dovetail-sh/dovetail/provider"
	"github.com/dovetail-sh/dovetail/tests/testenv"
)

// The provider's aws.default_tags behave as hashicorp/aws's: on AWS under each
// resource's own tags, shown in tags_all, a change applied in place, imports and
// tags that repeat a default planning nothing, tags added by hand removed.
func TestAccDefaultTags(t *testing.T) {
	acceptance(t)
	ctx := context.Background()
	moto := testenv.StartMoto(t)
	clients := testenv.AWSClients(t, moto, "us-west-2")
	config := func(team, roleTags string) string {
		return fmt.Sprintf(`
provider "dovetail" {
  aws {
    region    = "us-west-2"
    endpoints = { iam = %[1]q, sqs = %[1]q, events = %[1]q }
    default_tags {
      tags = { team = %[2]q, env = "dev" }
    }
  }
}

resource "dovetail_node_role" "this" {
  name                    = "DovetailNode-demo"
  create_instance_profile = true
  tags                    = %[3]s
}

resource "dovetail_interruption_queue" "this" {
  name = "demo-interruption"
}
`, moto.Endpoint, team, roleTags)
	}
	onAWS := func(wantRole, wantQueue map[string]string) resource.TestCheckFunc {
		return func(*terraform.State) error {
			role, err := clients.IAM.GetRole(ctx, &iam.GetRoleInput{RoleName: aws.String("DovetailNode-demo")})
			if err != nil {
				return err
			}
			got := map[string]string{}
			for _, tag := range role.Role.Tags {
				got[aws.ToString(tag.Key)] = aws.ToString(tag.Value)
			}
			// Tags the provider keeps for itself.
			delete(got, "dovetail.sh/managed-by")
			delete(got, provider.CreationTokenTag)
			if !maps.Equal(got, wantRole) {
				return fmt.Errorf("role tags %v, want %v", got, wantRole)
			}
			profile, err := clients.IAM.GetInstanceProfile(ctx, &iam.GetInstanceProfileInput{InstanceProfileName: aws.String("DovetailNode-demo")})
			if err != nil {
				return err
			}
			got = map[string]string{}
			for _, tag := range profile.InstanceProfile.Tags {
				got[aws.ToString(tag.Key)] = aws.ToString(tag.Value)
			}
			delete(got, provider.CreationTokenTag)
			if !maps.Equal(got, wantRole) {
				return fmt.Errorf("instance profile tags %v, want %v", got, wantRole)
			}
			url, err := clients.SQS.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String("demo-interruption")})
			if err != nil {
				return err
			}
			q, err := clients.SQS.ListQueueTags(ctx, &sqs.ListQueueTagsInput{QueueUrl: url.QueueUrl})
			if err != nil {
				return err
			}
			if !maps.Equal(q.Tags, wantQueue) {
				return fmt.Errorf("queue tags %v, want %v", q.Tags, wantQueue)
			}
			return nil
		}
	}
	const role, queue = "dovetail_node_role.this", "dovetail_interruption_queue.this"
	inPlace := resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
		plancheck.ExpectResourceAction(role, plancheck.ResourceActionUpdate), plancheck.ExpectResourceAction(queue, plancheck.ResourceActionUpdate)}}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: factories,
		Steps: []resource.TestStep{
			{
				Config: config("platform", `{ env = "prod" }`),
				Check: resource.ComposeTestCheckFunc(
					onAWS(map[string]string{"team": "platform", "env": "prod"}, map[string]string{"team": "platform", "env": "dev"}),
					resource.TestCheckResourceAttr(role, "tags.%", "1"),
					resource.TestCheckResourceAttr(role, "tags_all.%", "2"),
					resource.TestCheckResourceAttr(role, "tags_all.env", "prod"),
					resource.TestCheckNoResourceAttr(queue, "tags.%"),
					resource.TestCheckResourceAttr(queue, "tags_all.team", "platform"),
				),
			},
			{
				// A default changed: every resource is updated in place, none replaced.
				Config:           config("infra", `{ env = "prod" }`),
				ConfigPlanChecks: inPlace,
				Check:            onAWS(map[string]string{"team": "infra", "env": "prod"}, map[string]string{"team": "infra", "env": "dev"}),
			},
			{
				// Imported, neither plans anything: the default tags are not taken for
				// the resource's own.
				ResourceName: queue, ImportState: true, ImportStateKind: resource.ImportBlockWithID, ImportStateId: "demo-interruption",
			},
			{
				ResourceName: role, ImportState: true, ImportStateKind: resource.ImportBlockWithID, ImportStateId: "DovetailNode-demo",
			},
			{
				// Tags added in the console are drift: the apply removes them.
				PreConfig: func() {
					url, err := clients.SQS.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String("demo-interruption")})
					if err != nil {
						t.Fatal(err)
					}
					if _, err := clients.SQS.TagQueue(ctx, &sqs.TagQueueInput{QueueUrl: url.QueueUrl, Tags: map[string]string{"added-by": "console"}}); err != nil {
						t.Fatal(err)
					}
					if _, err := clients.IAM.TagRole(ctx, &iam.TagRoleInput{RoleName: aws.String("DovetailNode-demo"), Tags: []iamtypes.Tag{{Key: aws.String("added-by"), Value: aws.String("console")}}}); err != nil {
						t.Fatal(err)
					}
				},
				Config:           config("infra", `{ env = "prod" }`),
				ConfigPlanChecks: inPlace,
				Check:            onAWS(map[string]string{"team": "infra", "env": "prod"}, map[string]string{"team": "infra", "env": "dev"}),
			},
			{
				// A tag of the resource's own that repeats a default stays in tags: the
				// plan after the apply is empty (the framework checks it).
				Config: config("infra", `{ env = "prod", team = "infra" }`),
				Check: resource.ComposeTestCheckFunc(
					onAWS(map[string]string{"team": "infra", "env": "prod"}, map[string]string{"team": "infra", "env": "dev"}),
					resource.TestCheckResourceAttr(role, "tags.team", "infra")),
			},
		},
	})
}
