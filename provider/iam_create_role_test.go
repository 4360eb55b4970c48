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

// The node role's instance profile has the same problem: a lost CreateInstanceProfile
// or AddRoleToInstanceProfile response makes the SDK's retry answer
// EntityAlreadyExists or LimitExceeded for what this apply made.
func TestAccInstanceProfileCreateRetried(t *testing.T) {
	acceptance(t)
	for _, op := range []string{"CreateInstanceProfile", "AddRoleToInstanceProfile"} {
		t.Run(op, func(t *testing.T) {
			ctx := context.Background()
			moto := testenv.StartMoto(t)
			api := testenv.AWSClients(t, moto, "us-west-2").IAM
			var armed atomic.Bool
			armed.Store(true)
			resource.Test(t, resource.TestCase{
				ProtoV6ProviderFactories: factoriesWith(lostResponse(op, &armed)),
				CheckDestroy: func(*terraform.State) error {
					if _, err := api.GetInstanceProfile(ctx, &iam.GetInstanceProfileInput{InstanceProfileName: aws.String("KarpenterNodeRole-demo")}); err == nil {
						return fmt.Errorf("the instance profile is left behind")
					}
					return nil
				},
				Steps: []resource.TestStep{{
					Config: nodeRoleConfig(moto.Endpoint, true),
					Check: resource.ComposeTestCheckFunc(
						func(*terraform.State) error {
							if armed.Load() {
								return fmt.Errorf("no %s response was lost: the test tested nothing", op)
							}
							out, err := api.GetInstanceProfile(ctx, &iam.GetInstanceProfileInput{InstanceProfileName: aws.String("KarpenterNodeRole-demo")})
							if err != nil {
								return err
							}
							if len(out.InstanceProfile.Roles) != 1 || aws.ToString(out.InstanceProfile.Roles[0].RoleName) != "KarpenterNodeRole-demo" {
								return fmt.Errorf("the profile holds %v, want the node role", out.InstanceProfile.Roles)
							}
							return nil
						},
						resource.TestCheckResourceAttr("dovetail_node_role.this", "instance_profile_name", "KarpenterNodeRole-demo"),
					),
				}},
			})
		})
	}
}
