package provider

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/robfig/cron/v3"
	apiresource "k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dovetailv1alpha1 "github.com/dovetail-sh/dovetail/controller/apis/dovetail/v1alpha1"
	karpv1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/controller/apis/v1alpha1"
	"github.com/dovetail-sh/dovetail/controller/capacitymix"
	"github.com/dovetail-sh/dovetail/controller/commitment"
	"github.com/dovetail-sh/dovetail/controller/overlay"
	"github.com/dovetail-sh/dovetail/controller/scheduling"
)

// NewNodePoolResource is dovetail_node_pool: a karpenter.sh/v1 NodePool.
func NewNodePoolResource() resource.Resource {
	return &customResource{
		kindName:   "NodePool",
		typeSuffix: "_node_pool",
		description: "A karpenter.sh/v1 NodePool: what nodes Dovetail may launch for pending pods and how they may be disrupted. " +
			"The spec mirrors the YAML field by field in snake_case; defaults, validation and status come from the CRD, so plans are checked before the CRD is installed. Applied with server-side apply.",
		extraChecks:      nodePoolChecks,
		annotationChecks: nodePoolAnnotationChecks,
		impact:           nodePoolChange,
		capacityMix:      true,
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
		impact: ec2NodeClassChange,
	}
}

// NewNodeOverlayResource is dovetail_node_overlay: a karpenter.sh/v1alpha1 NodeOverlay.
func NewNodeOverlayResource() resource.Resource {
	return &customResource{
		kindName:   "NodeOverlay",
		typeSuffix: "_node_overlay",
		description: "A karpenter.sh/v1alpha1 NodeOverlay: a price, a price adjustment or extended capacity (hugepages, devices) for the instance types and offerings its requirements select, as the controller plans with them (feature gate NodeOverlay). " +
			"The spec mirrors the YAML field by field in snake_case; validation and status come from the CRD, and what the controller checks besides (requirement keys and values, restricted resources) is checked at plan. Applied with server-side apply.",
		extraChecks: nodeOverlayChecks,
	}
}

// NewCapacityBufferResource is dovetail_capacity_buffer: an
// autoscaling.x-k8s.io/v1beta1 CapacityBuffer.
func NewCapacityBufferResource() resource.Resource {
	return &customResource{
		kindName:   "CapacityBuffer",
		typeSuffix: "_capacity_buffer",
		namespaced: true,
		description: "An autoscaling.x-k8s.io/v1beta1 CapacityBuffer: spare capacity the controller keeps for copies of a PodTemplate's or a workload's pods (feature gate CapacityBuffer), " +
			"as many as `replicas`, `percentage` of the workload's replicas and `limits` say. Namespaced: `namespace` defaults to \"default\", and import IDs are namespace/name. " +
			"The spec mirrors the YAML field by field in snake_case; validation and status come from the CRD. Applied with server-side apply.",
	}
}

// NewCommitmentResource is dovetail_commitment: a dovetail.sh/v1alpha1 Commitment.
func NewCommitmentResource() resource.Resource {
	return &customResource{
		kindName:   "Commitment",
		typeSuffix: "_commitment",
		description: "A dovetail.sh/v1alpha1 Commitment: Reserved Instances (a count per type, zonal or regional) and Savings Plans (Compute, or EC2Instance for one family; an hourly commitment and its discount) the controller plans with. " +
			"An on-demand node they pay for is priced at what it adds to the bill: 0 while a reservation lasts, the plan's rate while its commitment does, the list price after; consolidation prices nodes the same way. " +
			"The spec mirrors the YAML field by field in snake_case; validation and status (what of each commitment the nodes use) come from the CRD, and the controller's own checks run at plan. Applied with server-side apply.",
		extraChecks: commitmentChecks,
	}
}

// commitmentChecks runs the controller's parsing of a commitment at plan time.
func commitmentChecks(spec map[string]any) field.ErrorList {
	raw, err := json.Marshal(spec)
	if err != nil {
		return field.ErrorList{field.InternalError(field.NewPath("spec"), err)}
	}
	c := &dovetailv1alpha1.Commitment{}
	if err := json.Unmarshal(raw, &c.Spec); err != nil {
		return field.ErrorList{field.Invalid(field.NewPath("spec"), string(raw), err.Error())}
	}
	if _, err := commitment.Parse(c); err != nil {
		return field.ErrorList{field.Forbidden(field.NewPath("spec"), err.Error())}
	}
	return nil
}

// nodeOverlayChecks runs the controller's own validation of an overlay at plan
// time, so an overlay the controller would refuse never applies.
func nodeOverlayChecks(spec map[string]any) field.ErrorList {
	raw, err := json.Marshal(spec)
	if err != nil {
		return field.ErrorList{field.InternalError(field.NewPath("spec"), err)}
	}
	o := &v1alpha1.NodeOverlay{}
	if err := json.Unmarshal(raw, &o.Spec); err != nil {
		return field.ErrorList{field.Invalid(field.NewPath("spec"), string(raw), err.Error())}
	}
	err = overlay.Validate(o)
	if err == nil {
		return nil
	}
	var errs field.ErrorList
	joined, ok := err.(interface{ Unwrap() []error })
	if !ok {
		return field.ErrorList{field.Forbidden(field.NewPath("spec"), err.Error())}
	}
	for _, e := range joined.Unwrap() {
		errs = append(errs, field.Forbidden(field.NewPath("spec"), e.Error()))
	}
	return errs
}

// nodePoolChecks parses budget schedules the way the controller does: the CRD's
// pattern only counts five fields.
func nodePoolChecks(spec map[string]any) field.ErrorList {
	var errs field.ErrorList
	limits, _ := spec["limits"].(map[string]any)
	if v, ok := limits[string(scheduling.ResourceSpendPerHour)]; ok {
		s := fmt.Sprint(v)
		if q, err := apiresource.ParseQuantity(s); err != nil || q.Sign() <= 0 {
			errs = append(errs, field.Invalid(field.NewPath("spec", "limits").Key(string(scheduling.ResourceSpendPerHour)), s,
				"the pool's spend limit is dollars per hour, a positive number such as \"50\" or \"12.5\""))
		}
	}
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

// nodePoolAnnotationChecks checks the pool's capacity mix as the controller reads
// it: each annotation parses and is in range, the on-demand base fits under
// limits.nodes, and a base has on-demand capacity to launch.
func nodePoolAnnotationChecks(annotations map[string]string, spec map[string]any) map[string]string {
	problems := map[string]string{}
	for _, key := range []string{capacitymix.OnDemandBaseAnnotationKey, capacitymix.SpotPercentAnnotationKey} {
		if v, ok := annotations[key]; ok {
			if _, _, err := capacitymix.Of(&karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{key: v}}}); err != nil {
				problems[key] = err.Error()
			}
		}
	}
	mix, ok, err := capacitymix.Of(&karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Annotations: annotations}})
	if err != nil || !ok || mix.OnDemandBase == 0 {
		return problems
	}
	limits, _ := spec["limits"].(map[string]any)
	if v, ok := limits["nodes"]; ok {
		if q, err := apiresource.ParseQuantity(fmt.Sprint(v)); err == nil && int64(mix.OnDemandBase) > q.Value() {
			problems[capacitymix.OnDemandBaseAnnotationKey] = fmt.Sprintf("the on-demand base of %d nodes is more than the pool's limits.nodes (%s), so it could never be reached: lower the base or raise the limit", mix.OnDemandBase, q.String())
		}
	}
	template, _ := spec["template"].(map[string]any)
	tspec, _ := template["spec"].(map[string]any)
	reqs, _ := tspec["requirements"].([]any)
	for _, r := range reqs {
		req, _ := r.(map[string]any)
		if req["key"] != karpv1.LabelCapacityType {
			continue
		}
		values, _ := req["values"].([]any)
		has := false
		for _, v := range values {
			has = has || v == karpv1.CapacityTypeOnDemand
		}
		if (req["operator"] == string(karpv1.OpIn) && !has) || (req["operator"] == string(karpv1.OpNotIn) && has) {
			problems[capacitymix.OnDemandBaseAnnotationKey] = "an on-demand base needs on-demand capacity, and the pool's requirements on karpenter.sh/capacity-type allow none: add \"on-demand\" to them or remove the base"
		}
	}
	return problems
}

// dnsName checks an object name (an RFC 1123 subdomain) or, with label, a
// namespace (an RFC 1123 label) as the API server will.
type dnsName struct{ label bool }

func (v dnsName) Description(context.Context) string {
	if v.label {
		return "a lowercase RFC 1123 label"
	}
	return "a lowercase RFC 1123 subdomain"
}
func (v dnsName) MarkdownDescription(ctx context.Context) string { return v.Description(ctx) }
func (v dnsName) ValidateString(_ context.Context, req validator.StringRequest, resp *validator.StringResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	check, summary, what := validation.IsDNS1123Subdomain, "Invalid name", "object name"
	if v.label {
		check, summary, what = validation.IsDNS1123Label, "Invalid namespace", "namespace"
	}
	for _, msg := range check(req.ConfigValue.ValueString()) {
		resp.Diagnostics.AddAttributeError(req.Path, summary, fmt.Sprintf("%q is not a valid %s: %s", req.ConfigValue.ValueString(), what, msg))
	}
}
