package nodeclass

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	awsv1 "github.com/dovetail-sh/dovetail/controller/apis/aws/v1"
	"github.com/dovetail-sh/dovetail/controller/cloudprovider/aws/awserr"
)

// PlacementGroupAPI is the part of EC2 placement group resolution uses.
type PlacementGroupAPI interface {
	DescribePlacementGroups(context.Context, *ec2.DescribePlacementGroupsInput, ...func(*ec2.Options)) (*ec2.DescribePlacementGroupsOutput, error)
}

// PlacementGroup resolves the selector to the available placement group it names,
// or nil when there is none (none named, or it is not available).
func PlacementGroup(ctx context.Context, api PlacementGroupAPI, sel *awsv1.PlacementGroupSelector) (*awsv1.PlacementGroup, error) {
	if sel == nil {
		return nil, nil
	}
	in := &ec2.DescribePlacementGroupsInput{Filters: []ec2types.Filter{{Name: aws.String("state"), Values: []string{string(ec2types.PlacementGroupStateAvailable)}}}}
	if sel.ID != nil {
		in.GroupIds = []string{*sel.ID}
	} else {
		in.GroupNames = []string{aws.ToString(sel.Name)}
	}
	out, err := api.DescribePlacementGroups(ctx, in)
	if err != nil {
		// EC2 answers a group it does not know with an error, not an empty list.
		if awserr.IsCode(err, "InvalidPlacementGroup.Unknown") {
			return nil, nil
		}
		return nil, fmt.Errorf("describing placement groups, %w", err)
	}
	for _, pg := range out.PlacementGroups {
		if pg.State != ec2types.PlacementGroupStateAvailable {
			continue
		}
		return &awsv1.PlacementGroup{ID: aws.ToString(pg.GroupId), Name: aws.ToString(pg.GroupName), Strategy: string(pg.Strategy),
			PartitionCount: aws.ToInt32(pg.PartitionCount), SpreadLevel: string(pg.SpreadLevel)}, nil
	}
	return nil, nil
}
