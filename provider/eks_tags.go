package provider

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	"github.com/hashicorp/terraform-plugin-framework-validators/mapvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

// eksTagsAttribute is tags on an EKS resource, within EKS's limits.
func eksTagsAttribute() schema.MapAttribute {
	return schema.MapAttribute{Optional: true, ElementType: types.StringType, Description: "Tags on the EKS resource; changed in place.",
		Validators: []validator.Map{mapvalidator.SizeAtMost(50), mapvalidator.KeysAre(stringvalidator.LengthBetween(1, 128)), mapvalidator.ValueStringsAre(stringvalidator.LengthAtMost(256))}}
}

// syncEKSTags brings an EKS resource's tags from have to want.
func syncEKSTags(ctx context.Context, api *eks.Client, arn string, have, want map[string]string) error {
	drop, set := tagDiff(have, want)
	if len(drop) > 0 {
		if _, err := api.UntagResource(ctx, &eks.UntagResourceInput{ResourceArn: aws.String(arn), TagKeys: drop}); err != nil {
			return fmt.Errorf("untagging %s, %w", arn, err)
		}
	}
	if len(set) > 0 {
		if _, err := api.TagResource(ctx, &eks.TagResourceInput{ResourceArn: aws.String(arn), Tags: set}); err != nil {
			return fmt.Errorf("tagging %s, %w", arn, err)
		}
	}
	return nil
}
