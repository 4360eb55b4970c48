// Package nodeclass resolves an EC2NodeClass's selector terms against EC2: which
// subnets and security groups the class's nodes launch into. Terms are ORed; the
// fields within a term are ANDed; a tag value of "*" matches any value.
package nodeclass

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	awsv1 "github.com/dovetail-sh/dovetail/controller/apis/aws/v1"
)

// EC2API is the part of EC2 resolution uses.
type EC2API interface {
	DescribeSubnets(context.Context, *ec2.DescribeSubnetsInput, ...func(*ec2.Options)) (*ec2.DescribeSubnetsOutput, error)
	DescribeSecurityGroups(context.Context, *ec2.DescribeSecurityGroupsInput, ...func(*ec2.Options)) (*ec2.DescribeSecurityGroupsOutput, error)
}

// Subnet is a resolved subnet with what launch needs to pick one per zone.
type Subnet struct {
	awsv1.Subnet
	AvailableIPs int32
}

// tagFilters turns a tag selector into EC2 filters.
func tagFilters(tags map[string]string) []ec2types.Filter {
	keys := make([]string, 0, len(tags))
	for k := range tags {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]ec2types.Filter, 0, len(keys))
	for _, k := range keys {
		if tags[k] == "*" {
			out = append(out, ec2types.Filter{Name: aws.String("tag-key"), Values: []string{k}})
			continue
		}
		out = append(out, ec2types.Filter{Name: aws.String("tag:" + k), Values: []string{tags[k]}})
	}
	return out
}

func describeTerm(t any) string {
	switch term := t.(type) {
	case awsv1.SubnetSelectorTerm:
		if term.ID != "" {
			return "id " + term.ID
		}
		return "tags " + formatTags(term.Tags)
	case awsv1.SecurityGroupSelectorTerm:
		switch {
		case term.ID != "":
			return "id " + term.ID
		case term.Name != "":
			return "name " + term.Name
		}
		return "tags " + formatTags(term.Tags)
	}
	return fmt.Sprint(t)
}

func formatTags(tags map[string]string) string {
	parts := make([]string, 0, len(tags))
	for k, v := range tags {
		parts = append(parts, k+"="+v)
	}
	sort.Strings(parts)
	return "{" + strings.Join(parts, ", ") + "}"
}

// paginator is an EC2 Describe paginator of any output type.
type paginator[O any] interface {
	HasMorePages() bool
	NextPage(context.Context, ...func(*ec2.Options)) (O, error)
}

// eachPage visits every page of one term's Describe call. A term naming an id EC2
// does not know matches nothing, as a tag term matching nothing does; the caller
// says what matched nothing at all.
func eachPage[O any](ctx context.Context, pages paginator[O], byID bool, what string, visit func(O)) error {
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			if byID && strings.Contains(err.Error(), "NotFound") {
				return nil
			}
			return fmt.Errorf("describing %s, %w", what, err)
		}
		visit(page)
	}
	return nil
}

// Subnets resolves subnet selector terms. An error says which terms matched nothing
// and what to check, so the class's status can tell a person what to fix.
func Subnets(ctx context.Context, api EC2API, terms []awsv1.SubnetSelectorTerm) ([]Subnet, error) {
	seen := map[string]Subnet{}
	for _, term := range terms {
		in := &ec2.DescribeSubnetsInput{}
		if term.ID != "" {
			in.SubnetIds = []string{term.ID}
		} else {
			in.Filters = tagFilters(term.Tags)
		}
		err := eachPage(ctx, ec2.NewDescribeSubnetsPaginator(api, in), term.ID != "", "subnets for "+describeTerm(term), func(page *ec2.DescribeSubnetsOutput) {
			for _, s := range page.Subnets {
				seen[aws.ToString(s.SubnetId)] = Subnet{
					Subnet:       awsv1.Subnet{ID: aws.ToString(s.SubnetId), Zone: aws.ToString(s.AvailabilityZone), ZoneID: aws.ToString(s.AvailabilityZoneId)},
					AvailableIPs: aws.ToInt32(s.AvailableIpAddressCount),
				}
			}
		})
		if err != nil {
			return nil, err
		}
	}
	if len(seen) == 0 {
		return nil, fmt.Errorf("no subnet matches subnetSelectorTerms %s; tag the cluster's subnets (e.g. karpenter.sh/discovery=<cluster>) or fix the terms", describeTerms(terms))
	}
	out := make([]Subnet, 0, len(seen))
	for _, s := range seen {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Zone != out[j].Zone {
			return out[i].Zone < out[j].Zone
		}
		// Within a zone, the subnet with the most free addresses first: launches
		// take the first one per zone.
		if out[i].AvailableIPs != out[j].AvailableIPs {
			return out[i].AvailableIPs > out[j].AvailableIPs
		}
		return out[i].ID < out[j].ID
	})
	return out, nil
}

// SecurityGroups resolves security group selector terms.
func SecurityGroups(ctx context.Context, api EC2API, terms []awsv1.SecurityGroupSelectorTerm) ([]awsv1.SecurityGroup, error) {
	seen := map[string]awsv1.SecurityGroup{}
	for _, term := range terms {
		in := &ec2.DescribeSecurityGroupsInput{}
		switch {
		case term.ID != "":
			in.GroupIds = []string{term.ID}
		case term.Name != "":
			in.Filters = []ec2types.Filter{{Name: aws.String("group-name"), Values: []string{term.Name}}}
		default:
			in.Filters = tagFilters(term.Tags)
		}
		err := eachPage(ctx, ec2.NewDescribeSecurityGroupsPaginator(api, in), term.ID != "", "security groups for "+describeTerm(term), func(page *ec2.DescribeSecurityGroupsOutput) {
			for _, g := range page.SecurityGroups {
				seen[aws.ToString(g.GroupId)] = awsv1.SecurityGroup{ID: aws.ToString(g.GroupId), Name: aws.ToString(g.GroupName)}
			}
		})
		if err != nil {
			return nil, err
		}
	}
	if len(seen) == 0 {
		return nil, fmt.Errorf("no security group matches securityGroupSelectorTerms %s; tag the node security group (e.g. karpenter.sh/discovery=<cluster>) or fix the terms", describeTerms(terms))
	}
	out := make([]awsv1.SecurityGroup, 0, len(seen))
	for _, g := range seen {
		out = append(out, g)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

func describeTerms[T any](terms []T) string {
	parts := make([]string, 0, len(terms))
	for _, t := range terms {
		parts = append(parts, describeTerm(t))
	}
	return "[" + strings.Join(parts, "; ") + "]"
}
