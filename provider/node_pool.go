package provider

import (
	"context"
	"fmt"

	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/robfig/cron/v3"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// NewNodePoolResource is dovetail_node_pool: a karpenter.sh/v1 NodePool.
func NewNodePoolResource() resource.Resource {
	return &customResource{
		kindName:   "NodePool",
		typeSuffix: "_node_pool",
		description: "A karpenter.sh/v1 NodePool: what nodes Dovetail may launch for pending pods and how they may be disrupted. " +
			"The spec mirrors the YAML field by field in snake_case; defaults, validation and status come from the CRD, so plans are checked before the CRD is installed. Applied with server-side apply.",
		extraChecks: nodePoolChecks,
		afterDelete: func(ctx context.Context, cl client.Client, name string) error {
			return nodeClaimsGone(ctx, cl, client.MatchingLabels{"karpenter.sh/nodepool": name})
		},
	}
}

// NewEC2NodeClassResource is dovetail_ec2_node_class: a karpenter.k8s.aws/v1 EC2NodeClass.
func NewEC2NodeClassResource() resource.Resource {
	return &customResource{
		kindName:   "EC2NodeClass",
		typeSuffix: "_ec2_node_class",
		description: "A karpenter.k8s.aws/v1 EC2NodeClass: the AMIs, subnets, security groups, IAM role, user data and disks of the nodes a NodePool launches. " +
			"The spec mirrors the YAML field by field in snake_case; defaults, validation and status come from the CRD. Applied with server-side apply.",
	}
}

// nodePoolChecks parses budget schedules the way the controller does: the CRD's
// pattern only counts five fields.
func nodePoolChecks(spec map[string]any) field.ErrorList {
	var errs field.ErrorList
	disruption, _ := spec["disruption"].(map[string]any)
	budgets, _ := disruption["budgets"].([]any)
	for i, b := range budgets {
		budget, _ := b.(map[string]any)
		schedule, ok := budget["schedule"].(string)
		if !ok {
			continue
		}
		if _, err := cron.ParseStandard(schedule); err != nil {
			errs = append(errs, field.Invalid(field.NewPath("spec", "disruption", "budgets").Index(i).Child("schedule"), schedule,
				fmt.Sprintf("not a cron expression: %v; write minute hour day-of-month month day-of-week (UTC), such as \"0 9 * * mon-fri\", or @daily", err)))
		}
	}
	return errs
}

// dnsSubdomain checks an object name as the API server will.
type dnsSubdomain struct{}

func (dnsSubdomain) Description(context.Context) string {
	return "a lowercase RFC 1123 subdomain"
}
func (v dnsSubdomain) MarkdownDescription(ctx context.Context) string { return v.Description(ctx) }
func (dnsSubdomain) ValidateString(_ context.Context, req validator.StringRequest, resp *validator.StringResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	for _, msg := range validation.IsDNS1123Subdomain(req.ConfigValue.ValueString()) {
		resp.Diagnostics.AddAttributeError(req.Path, "Invalid name", fmt.Sprintf("%q is not a valid object name: %s", req.ConfigValue.ValueString(), msg))
	}
}
