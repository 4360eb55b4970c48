package provider_test

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/terraform"

	"github.com/dovetail-sh/dovetail/tests/testenv"
)

func providerBlock(endpoint string) string { return awsProvider(endpoint, "ec2") }

// awsProvider configures the provider's aws block with the services at endpoint.
func awsProvider(endpoint string, services ...string) string {
	entries := ""
	for i, s := range services {
		if i > 0 {
			entries += ", "
		}
		entries += fmt.Sprintf("%s = %q", s, endpoint)
	}
	return fmt.Sprintf(`
provider "dovetail" {
  aws {
    region    = "us-west-2"
    endpoints = { %s }
  }
}
`, entries)
}

func discoveryConfig(endpoint string, subnets []string, group string) string {
	return providerBlock(endpoint) + fmt.Sprintf(`
resource "dovetail_discovery_tags" "this" {
  cluster_name       = "demo"
  subnet_ids         = %s
  security_group_ids = [%q]
}
`, hclList(subnets), group)
}

func hclList(items []string) string {
	out := "["
	for i, s := range items {
		if i > 0 {
			out += ", "
		}
		out += fmt.Sprintf("%q", s)
	}
	return out + "]"
}

// discoveryValue is the resource's tag value, "" when it has none.
func discoveryValue(ctx context.Context, api *ec2.Client, id string) (string, error) {
	out, err := api.DescribeTags(ctx, &ec2.DescribeTagsInput{Filters: []ec2types.Filter{
		{Name: aws.String("resource-id"), Values: []string{id}}, {Name: aws.String("key"), Values: []string{"karpenter.sh/discovery"}}}})
	if err != nil {
		return "", err
	}
	for _, t := range out.Tags {
		return aws.ToString(t.Value), nil
	}
	return "", nil
}

func expectTag(ctx context.Context, api *ec2.Client, want string, ids ...string) resource.TestCheckFunc {
	return func(*terraform.State) error {
		for _, id := range ids {
			got, err := discoveryValue(ctx, api, id)
			if err != nil {
				return err
			}
			if got != want {
				return fmt.Errorf("%s has karpenter.sh/discovery=%q, want %q", id, got, want)
			}
		}
		return nil
	}
}

func TestAccDiscoveryTags(t *testing.T) {
	acceptance(t)
	ctx := context.Background()
	moto := testenv.StartMoto(t)
	clients := testenv.AWSClients(t, moto, "us-west-2")
	api := clients.EC2
	vpc, err := api.CreateVpc(ctx, &ec2.CreateVpcInput{CidrBlock: aws.String("10.60.0.0/16")})
	if err != nil {
		t.Fatal(err)
	}
	var subnets []string
	for i, zone := range []string{"us-west-2a", "us-west-2b", "us-west-2c"} {
		s, err := api.CreateSubnet(ctx, &ec2.CreateSubnetInput{VpcId: vpc.Vpc.VpcId, CidrBlock: aws.String(fmt.Sprintf("10.60.%d.0/24", i)), AvailabilityZone: aws.String(zone)})
		if err != nil {
			t.Fatal(err)
		}
		subnets = append(subnets, aws.ToString(s.Subnet.SubnetId))
	}
	sg, err := api.CreateSecurityGroup(ctx, &ec2.CreateSecurityGroupInput{GroupName: aws.String("nodes"), Description: aws.String("nodes"), VpcId: vpc.Vpc.VpcId})
	if err != nil {
		t.Fatal(err)
	}
	group := aws.ToString(sg.GroupId)
	// Another cluster's tag on the third subnet must survive everything below.
	if _, err := api.CreateTags(ctx, &ec2.CreateTagsInput{Resources: []string{subnets[2]}, Tags: []ec2types.Tag{{Key: aws.String("karpenter.sh/discovery"), Value: aws.String("other")}}}); err != nil {
		t.Fatal(err)
	}

	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: factories,
		CheckDestroy: func(*terraform.State) error {
			if err := expectTag(ctx, api, "", subnets[0], subnets[1], group)(nil); err != nil {
				return err
			}
			return expectTag(ctx, api, "other", subnets[2])(nil)
		},
		Steps: []resource.TestStep{
			{
				Config: discoveryConfig(moto.Endpoint, subnets[:2], group),
				Check: resource.ComposeTestCheckFunc(
					expectTag(ctx, api, "demo", subnets[0], subnets[1], group),
					resource.TestCheckResourceAttr("dovetail_discovery_tags.this", "id", "demo"),
					resource.TestCheckResourceAttr("dovetail_discovery_tags.this", "tag_key", "karpenter.sh/discovery"),
				),
			},
			{
				// Update in place: the dropped subnet loses only our tag.
				Config: discoveryConfig(moto.Endpoint, subnets[:1], group),
				Check: resource.ComposeTestCheckFunc(
					expectTag(ctx, api, "demo", subnets[0], group),
					expectTag(ctx, api, "", subnets[1]),
				),
			},
			{
				ResourceName: "dovetail_discovery_tags.this", ImportState: true, ImportStateId: "demo", ImportStateVerify: true,
			},
			{
				// Imported with an import block under the configuration that made it, it
				// plans nothing else: no replacement, no update.
				ResourceName: "dovetail_discovery_tags.this", ImportState: true, ImportStateKind: resource.ImportBlockWithID, ImportStateId: "demo",
			},
			{
				// A tag removed out of band is drift the next plan shows...
				PreConfig: func() {
					if _, err := api.DeleteTags(ctx, &ec2.DeleteTagsInput{Resources: []string{subnets[0]}, Tags: []ec2types.Tag{{Key: aws.String("karpenter.sh/discovery")}}}); err != nil {
						t.Fatal(err)
					}
				},
				Config: discoveryConfig(moto.Endpoint, subnets[:1], group), PlanOnly: true, ExpectNonEmptyPlan: true,
			},
			{
				// ...and apply puts back.
				Config: discoveryConfig(moto.Endpoint, subnets[:1], group),
				Check:  expectTag(ctx, api, "demo", subnets[0], group),
			},
			{
				// A new cluster name replaces the resource.
				Config: providerBlock(moto.Endpoint) + fmt.Sprintf(`
resource "dovetail_discovery_tags" "this" {
  cluster_name       = "renamed"
  security_group_ids = [%q]
}
`, group),
				Check: resource.ComposeTestCheckFunc(expectTag(ctx, api, "renamed", group), expectTag(ctx, api, "", subnets[0])),
			},
		},
	})
}

func TestPlanTimeValidation(t *testing.T) {
	acceptance(t)
	cases := map[string]struct{ config, want string }{
		"bad subnet id": {providerBlock("http://127.0.0.1:1") + `
resource "dovetail_discovery_tags" "this" {
  cluster_name = "demo"
  subnet_ids   = ["subnet_nope"]
}`, `must be a subnet ID such as subnet-0123abcd`},
		"nothing to tag": {providerBlock("http://127.0.0.1:1") + `
resource "dovetail_discovery_tags" "this" {
  cluster_name = "demo"
}`, `At least one of these attributes must be configured: \[subnet_ids,security_group_ids\]`},
		"bad cluster name": {providerBlock("http://127.0.0.1:1") + `
resource "dovetail_discovery_tags" "this" {
  cluster_name       = "-demo"
  security_group_ids = ["sg-0123"]
}`, `must be an EKS cluster name`},
		"queue name too long": {providerBlock("http://127.0.0.1:1") + `
resource "dovetail_interruption_queue" "this" {
  name = "a-queue-name-that-is-far-too-long-for-rules"
}`, `must be 1-30 letters, digits, - or _`},
		"queue retention out of range": {providerBlock("http://127.0.0.1:1") + `
resource "dovetail_interruption_queue" "this" {
  name                      = "q"
  message_retention_seconds = 10
}`, `message_retention_seconds value must be between 60 and 1209600`},
		"policy with a role name, not an ARN": {`
data "dovetail_controller_policy" "this" {
  cluster_name  = "demo"
  region        = "us-west-2"
  node_role_arn = "KarpenterNodeRole-demo"
}`, `must be an ARN, e.g. arn:aws:iam::123456789012:role/KarpenterNodeRole-demo`},
		"no aws block": {`
resource "dovetail_discovery_tags" "this" {
  cluster_name       = "demo"
  security_group_ids = ["sg-0123"]
}`, `add aws \{ region = "..." \} to the provider "dovetail" block`},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			resource.Test(t, resource.TestCase{
				ProtoV6ProviderFactories: factories,
				Steps:                    []resource.TestStep{{Config: c.config, PlanOnly: true, ExpectError: regexp.MustCompile(strings.ReplaceAll(c.want, " ", `\s+`))}},
			})
		})
	}
}
