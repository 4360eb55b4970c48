package testenv

import (
	"context"
	"slices"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/middleware"
)

// PlacementGroups emulates EC2's DescribePlacementGroups, which moto_server does
// not implement, from the groups given: by id or name and by the state filter,
// an unknown name or id refused with InvalidPlacementGroup.Unknown as EC2 refuses
// it. Launches still go to moto, which keeps the launch template's placement.
type PlacementGroups struct {
	Groups []ec2types.PlacementGroup
}

// Option installs the emulator on an EC2 client, after the middleware already
// there (an IAM recorder sees the calls it answers).
func (p *PlacementGroups) Option(o *ec2.Options) {
	o.APIOptions = append(o.APIOptions, func(stack *middleware.Stack) error {
		return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("PlacementGroups", func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
			input, ok := in.Parameters.(*ec2.DescribePlacementGroupsInput)
			if !ok {
				return next.HandleInitialize(ctx, in)
			}
			out, err := p.describe(input)
			return middleware.InitializeOutput{Result: out}, middleware.Metadata{}, err
		}), middleware.After)
	})
}

func (p *PlacementGroups) describe(in *ec2.DescribePlacementGroupsInput) (*ec2.DescribePlacementGroupsOutput, error) {
	out := &ec2.DescribePlacementGroupsOutput{}
	for _, g := range p.Groups {
		if len(in.GroupIds) > 0 && !slices.Contains(in.GroupIds, aws.ToString(g.GroupId)) {
			continue
		}
		if len(in.GroupNames) > 0 && !slices.Contains(in.GroupNames, aws.ToString(g.GroupName)) {
			continue
		}
		ok := true
		for _, f := range in.Filters {
			if aws.ToString(f.Name) == "state" && !slices.Contains(f.Values, string(g.State)) {
				ok = false
			}
		}
		if ok {
			out.PlacementGroups = append(out.PlacementGroups, g)
		}
	}
	if len(out.PlacementGroups) == 0 && len(in.GroupIds)+len(in.GroupNames) > 0 {
		known := false
		for _, g := range p.Groups {
			known = known || slices.Contains(in.GroupIds, aws.ToString(g.GroupId)) || slices.Contains(in.GroupNames, aws.ToString(g.GroupName))
		}
		if !known {
			return nil, &smithy.GenericAPIError{Code: "InvalidPlacementGroup.Unknown", Message: "The Placement Group is unknown"}
		}
	}
	return out, nil
}
