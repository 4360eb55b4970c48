package provider_test

import (
	"context"
	"fmt"
	"regexp"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"

	"github.com/dovetail-sh/dovetail/tests/localstack"
	"github.com/dovetail-sh/dovetail/tests/testenv"
)

// startEKS is moto with the EKS APIs it lacks (access entries, Pod Identity) served
// in front of it, and a cluster named cluster.
func startEKS(t *testing.T, cluster string) (*localstack.Moto, *localstack.EKSAccess) {
	t.Helper()
	moto := testenv.StartMoto(t)
	front, err := localstack.StartEKSAccess(moto)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(front.Stop)
	clients := testenv.AWSClients(t, moto, "us-west-2")
	if _, err := clients.EKS.CreateCluster(context.Background(), &eks.CreateClusterInput{Name: aws.String(cluster), RoleArn: aws.String("arn:aws:iam::123456789012:role/eks"),
		ResourcesVpcConfig: &ekstypes.VpcConfigRequest{SubnetIds: []string{"subnet-1"}}}); err != nil {
		t.Fatal(err)
	}
	return moto, front
}

// The node role's access entry lets its instances join; the controller's ServiceAccount
// gets its role through a Pod Identity association. Both are changed in place where EKS
// allows, imported without a plan, made again when deleted by hand, and refused with
// the fix when the cluster cannot hold them.
func TestAccNodeAccessEntryAndPodIdentity(t *testing.T) {
	acceptance(t)
	moto, front := startEKS(t, "demo")
	config := func(namespace, roleName, tags string) string {
		return fmt.Sprintf(`
provider "dovetail" {
  aws {
    region    = "us-west-2"
    endpoints = { iam = %[1]q, eks = %[2]q }
  }
}

resource "dovetail_node_role" "this" {
  name = "DovetailNode-demo"
}

resource "dovetail_node_access_entry" "this" {
  cluster_name  = "demo"
  principal_arn = dovetail_node_role.this.arn
  tags          = %[5]s
}

resource "dovetail_controller_role" "this" {
  name          = %[4]q
  cluster_name  = "demo"
  region        = "us-west-2"
  account_id    = "123456789012"
  node_role_arn = dovetail_node_role.this.arn
}

resource "dovetail_pod_identity_association" "this" {
  cluster_name    = "demo"
  namespace       = %[3]q
  service_account = "dovetail"
  role_arn        = dovetail_controller_role.this.arn
  tags            = %[5]s
}
`, moto.Endpoint, front.URL, namespace, roleName, tags)
	}
	inEKS := func(namespace, roleName string) resource.TestCheckFunc {
		return func(*terraform.State) error {
			entries := front.AccessEntries("demo")
			if len(entries) != 1 || entries["arn:aws:iam::123456789012:role/DovetailNode-demo"] != "EC2_LINUX" {
				return fmt.Errorf("access entries %v, want the node role as EC2_LINUX", entries)
			}
			assoc := front.PodIdentityAssociations("demo")
			if want := "arn:aws:iam::123456789012:role/" + roleName; len(assoc) != 1 || assoc[namespace+"/dovetail"] != want {
				return fmt.Errorf("pod identity associations %v, want %s/dovetail → %s", assoc, namespace, want)
			}
			return nil
		}
	}
	const entry, assoc = "dovetail_node_access_entry.this", "dovetail_pod_identity_association.this"
	var associationID string
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: factories,
		CheckDestroy: func(*terraform.State) error {
			if e, a := front.AccessEntries("demo"), front.PodIdentityAssociations("demo"); len(e)+len(a) > 0 {
				return fmt.Errorf("left behind: access entries %v, associations %v", e, a)
			}
			return nil
		},
		Steps: []resource.TestStep{
			{
				Config: config("dovetail", "DovetailController-demo", `{ team = "platform" }`),
				Check: resource.ComposeTestCheckFunc(inEKS("dovetail", "DovetailController-demo"),
					resource.TestCheckResourceAttr(entry, "type", "EC2_LINUX"),
					resource.TestCheckResourceAttr(entry, "id", "demo:arn:aws:iam::123456789012:role/DovetailNode-demo"),
					resource.TestMatchResourceAttr(assoc, "id", regexp.MustCompile(`^a-`)),
					func(s *terraform.State) error {
						associationID = s.RootModule().Resources[assoc].Primary.ID
						return nil
					}),
			},
			{
				// A new role is changed in place, tags too; a new namespace replaces.
				Config: config("dovetail", "DovetailController-demo-2", `{ team = "infra" }`),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(assoc, plancheck.ResourceActionUpdate), plancheck.ExpectResourceAction(entry, plancheck.ResourceActionUpdate)}},
				Check: inEKS("dovetail", "DovetailController-demo-2"),
			},
			{
				Config: config("karpenter", "DovetailController-demo-2", `{ team = "infra" }`),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(assoc, plancheck.ResourceActionDestroyBeforeCreate), plancheck.ExpectResourceAction(entry, plancheck.ResourceActionNoop)}},
				Check: inEKS("karpenter", "DovetailController-demo-2"),
			},
			{
				ResourceName: entry, ImportState: true, ImportStateKind: resource.ImportBlockWithID, ImportStateId: "demo:arn:aws:iam::123456789012:role/DovetailNode-demo",
			},
			{
				ResourceName: assoc, ImportState: true, ImportStateKind: resource.ImportBlockWithID,
				ImportStateIdFunc: func(s *terraform.State) (string, error) {
					return "demo," + s.RootModule().Resources[assoc].Primary.ID, nil
				},
			},
			{
				// Deleted by hand (eksctl, the console): the next apply makes them again.
				PreConfig: func() {
					clients := testenv.AWSClients(t, moto, "us-west-2")
					clients.EKS = eks.New(eks.Options{Region: "us-west-2", BaseEndpoint: aws.String(front.URL), Credentials: clients.EKS.Options().Credentials})
					if _, err := clients.EKS.DeleteAccessEntry(context.Background(), &eks.DeleteAccessEntryInput{ClusterName: aws.String("demo"), PrincipalArn: aws.String("arn:aws:iam::123456789012:role/DovetailNode-demo")}); err != nil {
						t.Fatal(err)
					}
				},
				Config:           config("karpenter", "DovetailController-demo-2", `{ team = "infra" }`),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{plancheck.ExpectResourceAction(entry, plancheck.ResourceActionCreate)}},
				Check:            inEKS("karpenter", "DovetailController-demo-2"),
			},
		},
	})
	if associationID == "" {
		t.Fatal("the first step recorded no association")
	}
}

// An entry or association someone else made is not taken over: the apply fails naming
// the import; a cluster without access entries (authentication mode CONFIG_MAP) fails
// saying what to change.
func TestAccNodeAccessEntryRefusals(t *testing.T) {
	acceptance(t)
	moto, front := startEKS(t, "demo")
	clients := testenv.AWSClients(t, moto, "us-west-2")
	role, err := clients.IAM.CreateRole(context.Background(), &iam.CreateRoleInput{RoleName: aws.String("eksctl-node"), AssumeRolePolicyDocument: aws.String(`{"Version":"2012-10-17","Statement":[]}`)})
	if err != nil {
		t.Fatal(err)
	}
	api := eks.New(eks.Options{Region: "us-west-2", BaseEndpoint: aws.String(front.URL), Credentials: clients.EKS.Options().Credentials})
	if _, err := api.CreateAccessEntry(context.Background(), &eks.CreateAccessEntryInput{ClusterName: aws.String("demo"), PrincipalArn: role.Role.Arn, Type: aws.String("EC2_LINUX")}); err != nil {
		t.Fatal(err)
	}
	config := func(cluster string) string {
		return fmt.Sprintf(`
provider "dovetail" {
  aws {
    region    = "us-west-2"
    endpoints = { iam = %[1]q, eks = %[2]q }
  }
}

resource "dovetail_node_access_entry" "this" {
  cluster_name  = %[3]q
  principal_arn = %[4]q
}
`, moto.Endpoint, front.URL, cluster, aws.ToString(role.Role.Arn))
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: factories,
		Steps: []resource.TestStep{
			{Config: config("demo"), ExpectError: regexp.MustCompile(`(?s)ResourceInUseException.*terraform\s+import\s+<address>\s+demo:<principal_arn>`)},
			{Config: config("other"), ExpectError: regexp.MustCompile(`(?s)EKS\s+has\s+no\s+cluster\s+other`)},
			{
				PreConfig: func() {
					if _, err := api.DeleteAccessEntry(context.Background(), &eks.DeleteAccessEntryInput{ClusterName: aws.String("demo"), PrincipalArn: role.Role.Arn}); err != nil {
						t.Fatal(err)
					}
					front.SetAuthenticationMode("demo", "CONFIG_MAP")
				},
				Config:      config("demo"),
				ExpectError: regexp.MustCompile(`(?s)authentication_mode\s+=\s+"API_AND_CONFIG_MAP".*aws-auth`),
			},
		},
	})
}

// The spot service-linked role is made when the account lacks it, taken when it has
// it, and left in the account on destroy.
func TestAccSpotServiceLinkedRole(t *testing.T) {
	acceptance(t)
	moto := testenv.StartMoto(t)
	clients := testenv.AWSClients(t, moto, "us-west-2")
	config := awsProvider(moto.Endpoint, "iam") + `
resource "dovetail_spot_service_linked_role" "this" {}
`
	exists := func() error {
		// moto names it AWSServiceRoleForspot, AWS AWSServiceRoleForEC2Spot: the path
		// is what both share.
		out, err := clients.IAM.ListRoles(context.Background(), &iam.ListRolesInput{PathPrefix: aws.String("/aws-service-role/spot.amazonaws.com/")})
		if err != nil || len(out.Roles) != 1 {
			return fmt.Errorf("the account has no spot service-linked role (%v)", err)
		}
		return nil
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: factories,
		CheckDestroy:             func(*terraform.State) error { return exists() },
		Steps: []resource.TestStep{
			{Config: config, Check: resource.ComposeTestCheckFunc(func(*terraform.State) error { return exists() },
				resource.TestMatchResourceAttr("dovetail_spot_service_linked_role.this", "arn", regexp.MustCompile(`:role/aws-service-role/spot.amazonaws.com/AWSServiceRoleFor(EC2Spot|spot)$`)))},
			{ResourceName: "dovetail_spot_service_linked_role.this", ImportState: true, ImportStateKind: resource.ImportBlockWithID, ImportStateIdFunc: func(s *terraform.State) (string, error) {
				return s.RootModule().Resources["dovetail_spot_service_linked_role.this"].Primary.ID, nil
			}},
		},
	})
	// The role is there from before: a new state takes it.
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: factories,
		Steps:                    []resource.TestStep{{Config: config, Check: func(*terraform.State) error { return exists() }}},
	})
}
