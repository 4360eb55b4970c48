package provider

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/hashicorp/terraform-plugin-framework-timeouts/resource/timeouts"
	"github.com/hashicorp/terraform-plugin-framework/diag"
)

// defaultDeleteTimeout bounds a destroy's wait for finalizers and terminating nodes
// when no timeouts block says otherwise.
const defaultDeleteTimeout = 10 * time.Minute

// operation is one of a timeouts block's operations.
type operation string

const (
	opCreate operation = "create"
	opUpdate operation = "update"
	opDelete operation = "delete"
)

// withOperationTimeout bounds ctx by the timeouts block's value for op, or def when the block
// does not set it. Every wait in the operation shares the one deadline, so the block
// bounds the whole operation as hashicorp/aws's do.
func withOperationTimeout(ctx context.Context, t timeouts.Value, op operation, def time.Duration, diags *diag.Diagnostics) (context.Context, context.CancelFunc, time.Duration) {
	var d time.Duration
	var ds diag.Diagnostics
	switch op {
	case opCreate:
		d, ds = t.Create(ctx, def)
	case opUpdate:
		d, ds = t.Update(ctx, def)
	default:
		d, ds = t.Delete(ctx, def)
	}
	diags.Append(ds...)
	c, cancel := context.WithTimeout(ctx, d)
	return c, cancel, d
}

// timedOut says how long an operation waited and how to give it longer.
func timedOut(op operation, d time.Duration) string {
	return fmt.Sprintf("after %s (timeouts { %s = %q } gives it longer)", d, op, (2 * d).String())
}

// timeoutsAnnotation is the part of an annotation that records a timeouts block, so
// an import reads back what the configuration says and plans nothing: the block lives
// nowhere else.
func timeoutsAnnotation(t timeouts.Value) string {
	if t.IsNull() || t.IsUnknown() {
		return ""
	}
	var b strings.Builder
	for _, op := range []operation{opCreate, opUpdate, opDelete} {
		if v, ok := t.Attributes()[string(op)].(types.String); ok && !v.IsNull() && !v.IsUnknown() {
			fmt.Fprintf(&b, ",%s=%s", op, v.ValueString())
		}
	}
	return b.String()
}

// timeoutsFromAnnotation is the timeouts block of ops that timeoutsAnnotation
// recorded in the annotation's key-value pairs; null when it recorded none.
func timeoutsFromAnnotation(pairs types.Map, ops ...operation) timeouts.Value {
	attrTypes := map[string]attr.Type{}
	values := map[string]attr.Value{}
	set := false
	for _, op := range ops {
		attrTypes[string(op)] = types.StringType
		values[string(op)] = types.StringNull()
		if v, ok := pairs.Elements()[string(op)].(types.String); ok && v.ValueString() != "" {
			values[string(op)], set = v, true
		}
	}
	if !set {
		return timeouts.Value{Object: types.ObjectNull(attrTypes)}
	}
	return timeouts.Value{Object: types.ObjectValueMust(attrTypes, values)}
}
