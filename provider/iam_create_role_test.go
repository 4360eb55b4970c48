package provider_test

import (
	"context"
	"fmt"
	"regexp"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/terraform"

	"github.com/dovetail-sh/dovetail/tests/testenv"
)

// roleResources are the resources that create an IAM role, with a configuration.
var roleResources = []struct {
	resourceType, role string
	config             func(endpoint string) string
}{
	{"dovetail_node_role", "KarpenterNodeRole-demo", func(endpoint string) string { return nodeRoleConfig(endpoint, false) }},
	{"dovetail_controller_role", "DovetailController-demo", func(endpoint string) string { return controllerRoleConfig(endpoint, "", "") }},
}

// IAM has no client token. When CreateRole's response is lost after the role was made,
// the SDK's retry answers EntityAlreadyExists: the role is still this apply's, and the
// apply goes on with it.
func TestAccRoleCreateRetried(t *testing.T) {
	acceptance(t)
	for _, r := range roleResources {
		t.Run(r.resourceType, func(t *testing.T) {
			ctx := context.Background()
			moto := testenv.StartMoto(t)
			api := testenv.AWSClients(t, moto, "us-west-2").IAM
			var armed atomic.Bool
			armed.Store(true)
			resource.Test(t, resource.TestCase{
				ProtoV6ProviderFactories: factoriesWith(lostResponse("CreateRole", &armed)),
				CheckDestroy: func(*terraform.State) error {
					if _, err := api.GetRole(ctx, &iam.GetRoleInput{RoleName: aws.String(r.role)}); err == nil {
						return fmt.Errorf("role %s is left behind", r.role)
					}
					return nil
				},
				Steps: []resource.TestStep{{
					Config: r.config(moto.Endpoint),
					Check: resource.ComposeTestCheckFunc(
						func(*terraform.State) error {
							if armed.Load() {
								return fmt.Errorf("no CreateRole response was lost: the test tested nothing")
							}
							return nil
						},
						resource.TestCheckResourceAttr(r.resourceType+".this", "arn", "arn:aws:iam::123456789012:role/"+r.role),
					),
				}},
			})
		})
	}
}

// A role of the name someone else made is not taken over, even one that looks the
// same: the create fails, says to import, and the role stays.
func TestAccRoleCreateRefusesExisting(t *testing.T) {
	acceptance(t)
	for _, r := range roleResources {
		t.Run(r.resourceType, func(t *testing.T) {
			ctx := context.Background()
			moto := testenv.StartMoto(t)
			api := testenv.AWSClients(t, moto, "us-west-2").IAM
			trust := `{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"Service":"ec2.amazonaws.com"},"Action":"sts:AssumeRole"}]}`
			if _, err := api.CreateRole(ctx, &iam.CreateRoleInput{RoleName: aws.String(r.role), AssumeRolePolicyDocument: aws.String(trust)}); err != nil {
				t.Fatal(err)
			}
			resource.Test(t, resource.TestCase{
				ProtoV6ProviderFactories: factories,
				Steps: []resource.TestStep{{
					Config:      r.config(moto.Endpoint),
					ExpectError: regexp.MustCompile(`IAM role ` + r.role + ` already exists(.|\n)*terraform\s+import\s+` + r.resourceType + `.<name>\s+` + r.role),
				}},
			})
			if _, err := api.GetRole(ctx, &iam.GetRoleInput{RoleName: aws.String(r.role)}); err != nil {
				t.Errorf("the existing role is gone: %v", err)
			}
		})
	}
}
