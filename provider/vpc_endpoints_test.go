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
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/dovetail-sh/dovetail/tests/testenv"
)

func TestAccVPCEndpoints(t *testing.T) {
	acceptance(t)
	ctx := context.Background()
	moto := testenv.StartMoto(t)
	api := testenv.AWSClients(t, moto, "us-west-2").EC2
	vpc, err := api.CreateVpc(ctx, &ec2.CreateVpcInput{CidrBlock: aws.String("10.70.0.0/16")})
	if err != nil {
		t.Fatal(err)
	}
	vpcID := aws.ToString(vpc.Vpc.VpcId)
	subnet, err := api.CreateSubnet(ctx, &ec2.CreateSubnetInput{VpcId: vpc.Vpc.VpcId, CidrBlock: aws.String("10.70.1.0/24"), AvailabilityZone: aws.String("us-west-2a")})
	if err != nil {
		t.Fatal(err)
	}
	rt, err := api.CreateRouteTable(ctx, &ec2.CreateRouteTableInput{VpcId: vpc.Vpc.VpcId})
	if err != nil {
		t.Fatal(err)
	}
	config := func(services string) string {
		return awsProvider(moto.Endpoint, "ec2") + fmt.Sprintf(`
resource "dovetail_vpc_endpoints" "this" {
  vpc_id          = %q
  subnet_ids      = [%q]
  route_table_ids = [%q]
  %s
}
`, vpcID, aws.ToString(subnet.Subnet.SubnetId), aws.ToString(rt.RouteTable.RouteTableId), services)
	}
	endpoints := func() (map[string]ec2types.VpcEndpoint, error) {
		out, err := api.DescribeVpcEndpoints(ctx, &ec2.DescribeVpcEndpointsInput{Filters: []ec2types.Filter{{Name: aws.String("vpc-id"), Values: []string{vpcID}}}})
		if err != nil {
			return nil, err
		}
		byService := map[string]ec2types.VpcEndpoint{}
		for _, ep := range out.VpcEndpoints {
			if !strings.EqualFold(string(ep.State), "deleted") {
				byService[aws.ToString(ep.ServiceName)] = ep
			}
		}
		return byService, nil
	}
	expect := func(services ...string) resource.TestCheckFunc {
		return func(*terraform.State) error {
			got, err := endpoints()
			if err != nil {
				return err
			}
			want := sets.New[string]()
			for _, s := range services {
				want.Insert("com.amazonaws.us-west-2." + s)
			}
			have := sets.New[string]()
			for name, ep := range got {
				have.Insert(name)
				if ep.VpcEndpointType == ec2types.VpcEndpointTypeInterface && !aws.ToBool(ep.PrivateDnsEnabled) {
					return fmt.Errorf("%s has no private DNS", name)
				}
			}
			if !have.Equal(want) {
				return fmt.Errorf("endpoints %v, want %v", sets.List(have), sets.List(want))
			}
			return nil
		}
	}
	all := []string{"sts", "ssm", "ec2", "sqs", "ecr.api", "ecr.dkr", "eks", "s3"}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: factories,
		CheckDestroy: func(*terraform.State) error {
			if err := expect()(nil); err != nil {
				return err
			}
			groups, err := api.DescribeSecurityGroups(ctx, &ec2.DescribeSecurityGroupsInput{Filters: []ec2types.Filter{{Name: aws.String("group-name"), Values: []string{"dovetail-vpc-endpoints-" + vpcID}}}})
			if err != nil {
				return err
			}
			if len(groups.SecurityGroups) > 0 {
				return fmt.Errorf("the endpoints' security group is left behind")
			}
			return nil
		},
		Steps: []resource.TestStep{
			{Config: config(""), Check: resource.ComposeTestCheckFunc(expect(all...), resource.TestCheckResourceAttrSet("dovetail_vpc_endpoints.this", "security_group_id"))},
			{Config: config(`services = ["ec2", "sts"]`), Check: expect("ec2", "sts", "s3")},
			{
				// An endpoint deleted by hand is drift, and apply makes it again.
				PreConfig: func() {
					got, err := endpoints()
					if err == nil {
						_, err = api.DeleteVpcEndpoints(ctx, &ec2.DeleteVpcEndpointsInput{VpcEndpointIds: []string{aws.ToString(got["com.amazonaws.us-west-2.ec2"].VpcEndpointId)}})
					}
					if err != nil {
						t.Fatal(err)
					}
				},
				Config: config(`services = ["ec2", "sts"]`), PlanOnly: true, ExpectNonEmptyPlan: true,
			},
			{Config: config(`services = ["ec2", "sts"]`), Check: expect("ec2", "sts", "s3")},
			{
				// Import by VPC ID finds the tagged endpoints and their group.
				ResourceName: "dovetail_vpc_endpoints.this", ImportState: true, ImportStateVerify: true, ImportStateId: vpcID,
			},
			{
				// Imported with an import block under the configuration that made it, it
				// plans nothing else: no replacement, no update.
				ResourceName: "dovetail_vpc_endpoints.this", ImportState: true, ImportStateKind: resource.ImportBlockWithID, ImportStateId: vpcID,
			},
		},
	})
}

// Interface endpoints take minutes to delete, and their network interfaces hold the
// security group until they are gone: destroy waits for EC2 to report them deleted
// before it deletes the group, retries the group while it still has dependents, and
// gives up after the delete timeout naming the endpoints still there.
func TestAccVPCEndpointsDestroyWaitsForEndpoints(t *testing.T) {
	acceptance(t)
	ctx := context.Background()
	moto := testenv.StartMoto(t)
	api := testenv.AWSClients(t, moto, "us-west-2").EC2
	vpc, err := api.CreateVpc(ctx, &ec2.CreateVpcInput{CidrBlock: aws.String("10.71.0.0/16")})
	if err != nil {
		t.Fatal(err)
	}
	vpcID := aws.ToString(vpc.Vpc.VpcId)
	subnet, err := api.CreateSubnet(ctx, &ec2.CreateSubnetInput{VpcId: vpc.Vpc.VpcId, CidrBlock: aws.String("10.71.1.0/24"), AvailabilityZone: aws.String("us-west-2a")})
	if err != nil {
		t.Fatal(err)
	}
	config := func(timeout string) string {
		return awsProvider(moto.Endpoint, "ec2") + fmt.Sprintf(`
resource "dovetail_vpc_endpoints" "this" {
  vpc_id         = %q
  subnet_ids     = [%q]
  services       = ["ec2", "sts"]
  timeouts {
    delete = %q
  }
}
`, vpcID, aws.ToString(subnet.Subnet.SubnetId), timeout)
	}
	group := func() (bool, error) {
		out, err := api.DescribeSecurityGroups(ctx, &ec2.DescribeSecurityGroupsInput{Filters: []ec2types.Filter{{Name: aws.String("group-name"), Values: []string{"dovetail-vpc-endpoints-" + vpcID}}}})
		return err == nil && len(out.SecurityGroups) > 0, err
	}
	slow := &slowEndpointDeletion{}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: factoriesWith(slow.option),
		CheckDestroy: func(*terraform.State) error {
			if left, err := group(); left || err != nil {
				return fmt.Errorf("the endpoints' security group is left behind (%v)", err)
			}
			slow.mu.Lock()
			defer slow.mu.Unlock()
			if slow.violations == 0 {
				return fmt.Errorf("the security group never answered DependencyViolation: the test tested nothing")
			}
			return nil
		},
		Steps: []resource.TestStep{
			{Config: config("3s")},
			{
				// EC2 never finishes deleting them: destroy gives up, naming them, and
				// keeps the group.
				PreConfig:   func() { slow.stuck.Store(true) },
				Config:      config("3s"),
				Destroy:     true,
				ExpectError: regexp.MustCompile(`still\s+being\s+deleted(.|\n)*vpce-[0-9a-f]+\s+\((ec2|sts),\s+deleting\)(.|\n)*timeouts\s+\{\s+delete\s+\}`),
			},
			{
				// Still in the state, group included: the next apply makes the endpoints
				// again...
				PreConfig: func() {
					if left, err := group(); !left {
						t.Fatalf("the group was deleted while its endpoints were still deleting (%v)", err)
					}
					slow.stuck.Store(false)
				},
				Config: config("5m"),
			},
			// ...and the final destroy waits for EC2 and goes through.
		},
	})
}

// The endpoints and their security group carry the configured tags, changed in
// place, beside the service tags the resource keeps for import.
func TestAccVPCEndpointsTags(t *testing.T) {
	acceptance(t)
	ctx := context.Background()
	moto := testenv.StartMoto(t)
	api := testenv.AWSClients(t, moto, "us-west-2").EC2
	vpc, err := api.CreateVpc(ctx, &ec2.CreateVpcInput{CidrBlock: aws.String("10.71.0.0/16")})
	if err != nil {
		t.Fatal(err)
	}
	subnet, err := api.CreateSubnet(ctx, &ec2.CreateSubnetInput{VpcId: vpc.Vpc.VpcId, CidrBlock: aws.String("10.71.1.0/24"), AvailabilityZone: aws.String("us-west-2a")})
	if err != nil {
		t.Fatal(err)
	}
	config := func(tags string) string {
		return awsProvider(moto.Endpoint, "ec2") + fmt.Sprintf(`
resource "dovetail_vpc_endpoints" "this" {
  vpc_id     = %q
  subnet_ids = [%q]
  services   = ["ec2", "sts"]
  tags       = %s
}
`, aws.ToString(vpc.Vpc.VpcId), aws.ToString(subnet.Subnet.SubnetId), tags)
	}
	tagged := func(want map[string]string) resource.TestCheckFunc {
		return func(s *terraform.State) error {
			rs := s.RootModule().Resources["dovetail_vpc_endpoints.this"].Primary.Attributes
			ids := []string{rs["security_group_id"], rs["endpoint_ids.ec2"], rs["endpoint_ids.sts"]}
			for _, id := range ids {
				out, err := api.DescribeTags(ctx, &ec2.DescribeTagsInput{Filters: []ec2types.Filter{{Name: aws.String("resource-id"), Values: []string{id}}}})
				if err != nil {
					return err
				}
				got := map[string]string{}
				for _, tag := range out.Tags {
					if !strings.HasPrefix(aws.ToString(tag.Key), "dovetail.sh/") {
						got[aws.ToString(tag.Key)] = aws.ToString(tag.Value)
					}
				}
				if fmt.Sprint(got) != fmt.Sprint(want) {
					return fmt.Errorf("%s tags %v, want %v", id, got, want)
				}
			}
			return nil
		}
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: factories,
		Steps: []resource.TestStep{
			{Config: config(`{ team = "platform", env = "prod" }`), Check: tagged(map[string]string{"team": "platform", "env": "prod"})},
			{Config: config(`{ env = "staging" }`), Check: tagged(map[string]string{"env": "staging"}),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction("dovetail_vpc_endpoints.this", plancheck.ResourceActionUpdate)}}},
		},
	})
}
