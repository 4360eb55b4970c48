package provider

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"

	"github.com/hashicorp/terraform-plugin-framework-validators/listvalidator"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

// The queue's own statements: their Sids are not a user's to take.
const (
	queueSendSid     = "EventBridgeAndSQS"
	queueDenyHTTPSid = "DenyHTTP"
)

func queuePolicyStatementsAttribute() schema.ListAttribute {
	return schema.ListAttribute{Optional: true, ElementType: types.StringType,
		Description: "Further statements of the queue's policy (terraform-aws-eks's queue_policy_statements), each a JSON object (jsonencode({ Sid = ..., Effect = ..., Principal = ..., Action = ..., Condition = ... })), after the queue's own " +
			queueSendSid + " and " + queueDenyHTTPSid + ". A statement without Resource or NotResource applies to the queue. Changed in place; statements edited outside Terraform show in the next plan.",
		Validators: []validator.List{listvalidator.ValueStringsAre(queueStatement{})}}
}

// queueStatement checks a statement is a JSON object with an Effect that does not take
// the queue's own Sids.
type queueStatement struct{}

func (queueStatement) Description(context.Context) string {
	return "a JSON policy statement with Effect Allow or Deny"
}
func (v queueStatement) MarkdownDescription(ctx context.Context) string { return v.Description(ctx) }

func (queueStatement) ValidateString(_ context.Context, req validator.StringRequest, resp *validator.StringResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	var st map[string]any
	if err := json.Unmarshal([]byte(req.ConfigValue.ValueString()), &st); err != nil {
		resp.Diagnostics.AddAttributeError(req.Path, "Not a JSON policy statement", fmt.Sprintf("%v. Write it with jsonencode({ Effect = \"Allow\", Principal = ..., Action = [...] }).", err))
		return
	}
	if e := st["Effect"]; e != "Allow" && e != "Deny" {
		resp.Diagnostics.AddAttributeError(req.Path, "A policy statement needs an Effect", fmt.Sprintf("Effect is %v: set Effect = \"Allow\" or \"Deny\".", e))
	}
	if sid, _ := st["Sid"].(string); sid == queueSendSid || sid == queueDenyHTTPSid {
		resp.Diagnostics.AddAttributeError(req.Path, "Sid taken", fmt.Sprintf("Sid %q is the queue's own statement; name yours differently.", sid))
	}
}

// queuePolicy admits EventBridge and SQS, refuses anything not over TLS, and adds the
// user's statements, scoped to the queue when they name no resource.
func queuePolicy(arn string, extra []string) string {
	statements := []map[string]any{
		{"Sid": queueSendSid, "Effect": "Allow", "Action": "sqs:SendMessage", "Resource": arn,
			"Principal": map[string]any{"Service": []string{"events.amazonaws.com", "sqs.amazonaws.com"}}},
		{"Sid": queueDenyHTTPSid, "Effect": "Deny", "Action": "sqs:*", "Resource": arn, "Principal": "*",
			"Condition": map[string]any{"Bool": map[string]string{"aws:SecureTransport": "false"}}},
	}
	for _, raw := range extra {
		if st := scopedStatement(raw, arn); st != nil {
			statements = append(statements, st)
		}
	}
	b, _ := json.Marshal(map[string]any{"Version": "2012-10-17", "Id": "DovetailInterruptionQueue", "Statement": statements})
	return string(b)
}

// scopedStatement is the statement as written to the queue: Resource is the queue
// when neither Resource nor NotResource is given.
func scopedStatement(raw, arn string) map[string]any {
	var st map[string]any
	if json.Unmarshal([]byte(raw), &st) != nil {
		return nil
	}
	if st["Resource"] == nil && st["NotResource"] == nil {
		st["Resource"] = arn
	}
	return st
}

// readQueueStatements are the user's statements in the live policy. Each keeps the
// prior value's text while it means the same (formatting, the queue's Resource added),
// so only a real change shows in the plan.
func readQueueStatements(ctx context.Context, policy, arn string, prior types.List, diags *diag.Diagnostics) types.List {
	var doc struct {
		Statement []map[string]any
	}
	if json.Unmarshal([]byte(policy), &doc) != nil {
		return prior
	}
	priorTexts := listStrings(ctx, prior)
	var out []attr.Value
	for _, st := range doc.Statement {
		if sid, _ := st["Sid"].(string); sid == queueSendSid || sid == queueDenyHTTPSid {
			continue
		}
		i := len(out)
		if i < len(priorTexts) && sameStatement(scopedStatement(priorTexts[i], arn), st) {
			out = append(out, types.StringValue(priorTexts[i]))
			continue
		}
		// Written without a resource, as the queue's are (an import cannot tell).
		if st["Resource"] == arn {
			delete(st, "Resource")
		}
		b, _ := json.Marshal(st)
		out = append(out, types.StringValue(string(b)))
	}
	if len(out) == 0 && prior.IsNull() {
		return prior
	}
	v, d := types.ListValue(types.StringType, out)
	diags.Append(d...)
	return v
}

// sameStatement compares two statements as JSON values, so a list of one action and
// the action alone differ (IAM treats them alike, but a plan should not hide either).
func sameStatement(a, b map[string]any) bool {
	if a == nil {
		return false
	}
	norm := func(m map[string]any) any {
		raw, _ := json.Marshal(m)
		var v any
		_ = json.Unmarshal(raw, &v)
		return v
	}
	return reflect.DeepEqual(norm(a), norm(b))
}
