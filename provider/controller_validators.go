package provider

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	k8sresource "k8s.io/apimachinery/pkg/api/resource"
)

// goDuration checks a Go duration string such as 10s or 5m.
type goDuration struct{}

func (goDuration) Description(context.Context) string { return "a duration such as 10s or 5m" }

func (v goDuration) MarkdownDescription(ctx context.Context) string { return v.Description(ctx) }

func (goDuration) ValidateString(_ context.Context, req validator.StringRequest, resp *validator.StringResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	if d, err := time.ParseDuration(req.ConfigValue.ValueString()); err != nil || d <= 0 {
		resp.Diagnostics.AddAttributeError(req.Path, "Invalid duration", fmt.Sprintf("%q is not a positive duration; write it like 10s, 5m or 1h30m", req.ConfigValue.ValueString()))
	}
}

// decimal checks a number from 0 to max written in decimal, such as a price.
type decimal struct {
	max     float64
	example string
}

func (d decimal) Description(context.Context) string {
	if math.IsInf(d.max, 1) {
		return "a decimal number of at least 0, such as " + d.example
	}
	return fmt.Sprintf("a decimal number from 0 to %g, such as %s", d.max, d.example)
}

func (d decimal) MarkdownDescription(ctx context.Context) string { return d.Description(ctx) }

func (d decimal) ValidateString(ctx context.Context, req validator.StringRequest, resp *validator.StringResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	if f, err := strconv.ParseFloat(req.ConfigValue.ValueString(), 64); err != nil || f < 0 || f > d.max || math.IsNaN(f) {
		resp.Diagnostics.AddAttributeError(req.Path, "Invalid number", fmt.Sprintf("%q is not %s", req.ConfigValue.ValueString(), d.Description(ctx)))
	}
}

// quantity checks a Kubernetes resource quantity such as 500m or 1Gi.
type quantity struct{}

func (quantity) Description(context.Context) string {
	return "a Kubernetes quantity such as 500m or 1Gi"
}

func (v quantity) MarkdownDescription(ctx context.Context) string { return v.Description(ctx) }

func (quantity) ValidateString(_ context.Context, req validator.StringRequest, resp *validator.StringResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	if _, err := k8sresource.ParseQuantity(req.ConfigValue.ValueString()); err != nil {
		resp.Diagnostics.AddAttributeError(req.Path, "Invalid quantity", fmt.Sprintf("%q is not a Kubernetes quantity; write it like 500m, 1 or 1Gi", req.ConfigValue.ValueString()))
	}
}
