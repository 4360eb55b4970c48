package nodeclass_test

import (
	"context"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	awsv1 "github.com/dovetail-sh/dovetail/controller/apis/aws/v1"
	"github.com/dovetail-sh/dovetail/controller/cloudprovider/aws/nodeclass"
	"github.com/dovetail-sh/dovetail/tests/testenv"
)

func tagSpec(kind ec2types.ResourceType, tags map[string]string) []ec2types.TagSpecification {
	spec := ec2types.TagSpecification{ResourceType: kind}
	for k, v := range tags {
		spec.Tags = append(spec.Tags, ec2types.Tag{Key: aws.String(k), Value: aws.String(v)})
	}
	return []ec2types.TagSpecification{spec}
}

func TestResolveSelectors(t *testing.T) {
	if testing.Short() {
		t.Skip("starts moto_server")
	}
	ctx := context.Background()
	api := testenv.AWSClients(t, testenv.StartMoto(t), "us-west-2").EC2
	vpc, err := api.CreateVpc(ctx, &ec2.CreateVpcInput{CidrBlock: aws.String("10.20.0.0/16")})
	if err != nil {
		t.Fatal(err)
	}
	subnet := func(cidr, zone string, tags map[string]string) string {
		out, err := api.CreateSubnet(ctx, &ec2.CreateSubnetInput{VpcId: vpc.Vpc.VpcId, CidrBlock: aws.String(cidr), AvailabilityZone: aws.String(zone),
			TagSpecifications: tagSpec(ec2types.ResourceTypeSubnet, tags)})
		if err != nil {
			t.Fatal(err)
		}
		return aws.ToString(out.Subnet.SubnetId)
	}
	a := subnet("10.20.1.0/24", "us-west-2a", map[string]string{"karpenter.sh/discovery": "demo"})
	b := subnet("10.20.2.0/24", "us-west-2b", map[string]string{"karpenter.sh/discovery": "demo", "tier": "private"})
	other := subnet("10.20.3.0/24", "us-west-2c", map[string]string{"karpenter.sh/discovery": "other"})
	group := func(name string, tags map[string]string) string {
		out, err := api.CreateSecurityGroup(ctx, &ec2.CreateSecurityGroupInput{GroupName: aws.String(name), Description: aws.String(name), VpcId: vpc.Vpc.VpcId,
			TagSpecifications: tagSpec(ec2types.ResourceTypeSecurityGroup, tags)})
		if err != nil {
			t.Fatal(err)
		}
		return aws.ToString(out.GroupId)
	}
	nodes := group("nodes", map[string]string{"karpenter.sh/discovery": "demo"})
	extra := group("extra", map[string]string{"team": "billing"})

	subnetCases := []struct {
		name  string
		terms []awsv1.SubnetSelectorTerm
		want  []string
		err   string
	}{
		{"by tag", []awsv1.SubnetSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": "demo"}}}, []string{a, b}, ""},
		{"tags are ANDed", []awsv1.SubnetSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": "demo", "tier": "private"}}}, []string{b}, ""},
		{"wildcard value", []awsv1.SubnetSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": "*"}}}, []string{a, b, other}, ""},
		{"terms are ORed", []awsv1.SubnetSelectorTerm{{ID: a}, {Tags: map[string]string{"karpenter.sh/discovery": "other"}}}, []string{a, other}, ""},
		{"nothing matches", []awsv1.SubnetSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": "nope"}}}, nil, "no subnet matches subnetSelectorTerms [tags {karpenter.sh/discovery=nope}]"},
		{"unknown id", []awsv1.SubnetSelectorTerm{{ID: "subnet-0000deadbeef"}}, nil, "no subnet matches subnetSelectorTerms [id subnet-0000deadbeef]"},
	}
	for _, tc := range subnetCases {
		t.Run("subnets "+tc.name, func(t *testing.T) {
			got, err := nodeclass.Subnets(ctx, api, tc.terms)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var ids []string
			for _, s := range got {
				ids = append(ids, s.ID)
				if s.Zone == "" || s.ZoneID == "" || s.AvailableIPs <= 0 {
					t.Errorf("subnet %s lacks zone, zone id or free addresses: %+v", s.ID, s)
				}
			}
			if strings.Join(ids, ",") != strings.Join(tc.want, ",") {
				t.Errorf("subnets = %v, want %v (sorted by zone)", ids, tc.want)
			}
		})
	}

	groupCases := []struct {
		name  string
		terms []awsv1.SecurityGroupSelectorTerm
		want  []string
		err   string
	}{
		{"by tag", []awsv1.SecurityGroupSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": "demo"}}}, []string{nodes}, ""},
		{"by name", []awsv1.SecurityGroupSelectorTerm{{Name: "extra"}}, []string{extra}, ""},
		{"by id", []awsv1.SecurityGroupSelectorTerm{{ID: nodes}}, []string{nodes}, ""},
		{"nothing matches", []awsv1.SecurityGroupSelectorTerm{{Name: "missing"}}, nil, "no security group matches securityGroupSelectorTerms [name missing]"},
	}
	for _, tc := range groupCases {
		t.Run("security groups "+tc.name, func(t *testing.T) {
			got, err := nodeclass.SecurityGroups(ctx, api, tc.terms)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tc.want) || got[0].ID != tc.want[0] || got[0].Name == "" {
				t.Errorf("security groups = %+v, want %v", got, tc.want)
			}
		})
	}
}
