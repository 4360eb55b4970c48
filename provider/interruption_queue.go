package provider

import (
	"context"
	"fmt"
	"regexp"
	"sort"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	ebtypes "github.com/aws/aws-sdk-go-v2/service/eventbridge/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/hashicorp/terraform-plugin-framework-validators/int64validator"
	"github.com/hashicorp/terraform-plugin-framework-validators/mapvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/booldefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/int64default"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

// InterruptionRule is one EventBridge rule feeding the interruption queue.
type InterruptionRule struct {
	Suffix  string
	Pattern string
}

// InterruptionRules are the events the controller's interruption handling reads.
var InterruptionRules = []InterruptionRule{
	{"spot-interruption", `{"source":["aws.ec2"],"detail-type":["EC2 Spot Instance Interruption Warning"]}`},
	{"rebalance", `{"source":["aws.ec2"],"detail-type":["EC2 Instance Rebalance Recommendation"]}`},
	{"instance-state-change", `{"source":["aws.ec2"],"detail-type":["EC2 Instance State-change Notification"]}`},
	{"scheduled-change", `{"source":["aws.health"],"detail-type":["AWS Health Event"]}`},
	{"capacity-reservation-interruption", `{"source":["aws.ec2"],"detail-type":["EC2 Capacity Reservation Instance Interruption Warning"]}`},
}

const queueTargetID = "dovetail-interruption-queue"

// NewInterruptionQueueResource is dovetail_interruption_queue.
func NewInterruptionQueueResource() resource.Resource { return &interruptionQueue{} }

type interruptionQueue struct{ withClients }

type interruptionQueueModel struct {
	ID               types.String `tfsdk:"id"`
	Name             types.String `tfsdk:"name"`
	MessageRetention types.Int64  `tfsdk:"message_retention_seconds"`
	SQSManagedSSE    types.Bool   `tfsdk:"sqs_managed_sse"`
	KMSMasterKeyID   types.String `tfsdk:"kms_master_key_id"`
	KMSDataKeyReuse  types.Int64  `tfsdk:"kms_data_key_reuse_period_seconds"`
	URL              types.String `tfsdk:"url"`
	ARN              types.String `tfsdk:"arn"`
	Tags             types.Map    `tfsdk:"tags"`
	TagsAll          types.Map    `tfsdk:"tags_all"`
	RuleNames        types.List   `tfsdk:"rule_names"`
	PolicyStatements types.List   `tfsdk:"policy_statements"`
}

func (r *interruptionQueue) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_interruption_queue"
}

func (r *interruptionQueue) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	computedString := func(desc string) schema.StringAttribute {
		return schema.StringAttribute{Computed: true, Description: desc, PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()}}
	}
	resp.Schema = schema.Schema{
		Description: "The SQS queue the controller's --interruption-queue reads, and the EventBridge rules that fill it: spot interruption warnings, rebalance recommendations, instance state changes, AWS Health scheduled changes and capacity-reservation interruptions. The queue is encrypted, keeps messages 300 s, and admits only EventBridge and SQS over TLS.",
		Attributes: map[string]schema.Attribute{
			"id": computedString("The queue name."),
			"name": schema.StringAttribute{Required: true, Description: "Queue name; the rules are named <name>-<event>.",
				Validators:    []validator.String{stringvalidator.RegexMatches(regexp.MustCompile(`^[A-Za-z0-9_-]{1,30}$`), "must be 1-30 letters, digits, - or _ (rule names add up to 34 characters)")},
				PlanModifiers: []planmodifier.String{stringplanmodifier.RequiresReplace()}},
			"message_retention_seconds": schema.Int64Attribute{Optional: true, Computed: true, Default: int64default.StaticInt64(300),
				Description: "How long an unread message is kept; an interruption older than 5 minutes is moot.",
				Validators:  []validator.Int64{int64validator.Between(60, 1209600)}},
			"sqs_managed_sse": schema.BoolAttribute{Optional: true, Computed: true, Default: booldefault.StaticBool(true), Description: "Encrypt messages at rest with SQS-managed keys; set false with kms_master_key_id."},
			"kms_master_key_id": schema.StringAttribute{Optional: true,
				Description: "KMS key (ID, ARN or alias) to encrypt messages with instead of SQS-managed keys; EventBridge needs kms:GenerateDataKey and kms:Decrypt on it, and the controller kms:Decrypt.",
				Validators:  []validator.String{stringvalidator.LengthBetween(1, 2048)}},
			"kms_data_key_reuse_period_seconds": schema.Int64Attribute{Optional: true,
				Description: "How long SQS reuses a data key before asking KMS again (60-86400); only with kms_master_key_id.",
				Validators:  []validator.Int64{int64validator.Between(60, 86400), int64validator.AlsoRequires(path.MatchRoot("kms_master_key_id"))}},
			"url": computedString("The queue URL."),
			"arn": computedString("The queue ARN."),
			"rule_names": schema.ListAttribute{Computed: true, ElementType: types.StringType, Description: "The EventBridge rules.",
				PlanModifiers: nil},
			"tags_all":          tagsAllAttribute(),
			"policy_statements": queuePolicyStatementsAttribute(),
			"tags": schema.MapAttribute{Optional: true, ElementType: types.StringType, Description: "Tags on the queue and its EventBridge rules; changed in place.",
				Validators: []validator.Map{mapvalidator.SizeAtMost(50), mapvalidator.KeysAre(stringvalidator.LengthBetween(1, 128)), mapvalidator.ValueStringsAre(stringvalidator.LengthAtMost(256))}},
		},
	}
}

func (r *interruptionQueue) ModifyPlan(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	requireAWS(r.clients, "dovetail_interruption_queue", &resp.Diagnostics)
	planTagsAll(ctx, r.clients, req, resp)
	if req.State.Raw.IsNull() || req.Plan.Raw.IsNull() {
		return
	}
	// Refresh left out the rules that no longer deliver: plan them back.
	var plan interruptionQueueModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if resp.Diagnostics.HasError() || plan.Name.IsUnknown() {
		return
	}
	want, d := types.ListValueFrom(ctx, types.StringType, expectedRuleNames(plan.Name.ValueString()))
	resp.Diagnostics.Append(d...)
	if !plan.RuleNames.Equal(want) {
		resp.Diagnostics.Append(resp.Plan.SetAttribute(ctx, path.Root("rule_names"), want)...)
	}
}

func (r *interruptionQueue) attributes(m *interruptionQueueModel, arn string) map[string]string {
	attrs := map[string]string{
		string(sqstypes.QueueAttributeNameMessageRetentionPeriod): strconv.FormatInt(m.MessageRetention.ValueInt64(), 10),
		string(sqstypes.QueueAttributeNameSqsManagedSseEnabled):   strconv.FormatBool(m.SQSManagedSSE.ValueBool()),
	}
	if key := m.KMSMasterKeyID.ValueString(); key != "" {
		attrs[string(sqstypes.QueueAttributeNameKmsMasterKeyId)] = key
		if !m.KMSDataKeyReuse.IsNull() {
			attrs[string(sqstypes.QueueAttributeNameKmsDataKeyReusePeriodSeconds)] = strconv.FormatInt(m.KMSDataKeyReuse.ValueInt64(), 10)
		}
	}
	if arn != "" {
		attrs[string(sqstypes.QueueAttributeNamePolicy)] = queuePolicy(arn, listStrings(context.Background(), m.PolicyStatements))
	}
	return attrs
}

// apply makes the queue and rules match the model; each call is idempotent. The model
// records each part once it exists (the queue's URL and ARN, then each working rule),
// so a failure part way leaves it describing what is there.
func (r *interruptionQueue) apply(ctx context.Context, m *interruptionQueueModel) error {
	api := r.clients.AWS
	created, err := api.SQS.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(m.Name.ValueString()), Attributes: r.attributes(m, "")})
	if err != nil && !isCode(err, "QueueAlreadyExists", "QueueNameExists") {
		return fmt.Errorf("creating queue %s, %w", m.Name.ValueString(), err)
	}
	url := ""
	if created != nil {
		url = aws.ToString(created.QueueUrl)
	}
	if url == "" {
		got, err := api.SQS.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(m.Name.ValueString())})
		if err != nil {
			return fmt.Errorf("finding queue %s, %w", m.Name.ValueString(), err)
		}
		url = aws.ToString(got.QueueUrl)
	}
	m.ID, m.URL = m.Name, types.StringValue(url)
	attrs, err := api.SQS.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(url), AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn}})
	if err != nil {
		return fmt.Errorf("reading queue %s, %w", m.Name.ValueString(), err)
	}
	arn := attrs.Attributes[string(sqstypes.QueueAttributeNameQueueArn)]
	m.ARN = types.StringValue(arn)
	var diags diag.Diagnostics
	tags := roleTags(ctx, m.TagsAll, &diags)
	if diags.HasError() {
		return fmt.Errorf("reading tags, %v", diags)
	}
	if err := syncQueueTags(ctx, api.SQS, url, tags); err != nil {
		return err
	}
	if _, err := api.SQS.SetQueueAttributes(ctx, &sqs.SetQueueAttributesInput{QueueUrl: aws.String(url), Attributes: r.attributes(m, arn)}); err != nil {
		return fmt.Errorf("setting the attributes of queue %s, %w", m.Name.ValueString(), err)
	}
	names := []string{}
	m.RuleNames, _ = types.ListValueFrom(ctx, types.StringType, names)
	for _, rule := range InterruptionRules {
		name := m.Name.ValueString() + "-" + rule.Suffix
		put, err := api.EventBridge.PutRule(ctx, &eventbridge.PutRuleInput{Name: aws.String(name), EventPattern: aws.String(rule.Pattern),
			State: ebtypes.RuleStateEnabled, Description: aws.String("Dovetail interruption handling: " + rule.Suffix)})
		if err != nil {
			return fmt.Errorf("creating EventBridge rule %s, %w", name, err)
		}
		if err := syncRuleTags(ctx, api.EventBridge, aws.ToString(put.RuleArn), tags); err != nil {
			return err
		}
		if _, err := api.EventBridge.PutTargets(ctx, &eventbridge.PutTargetsInput{Rule: aws.String(name),
			Targets: []ebtypes.Target{{Id: aws.String(queueTargetID), Arn: aws.String(arn)}}}); err != nil {
			return fmt.Errorf("pointing EventBridge rule %s at the queue, %w", name, err)
		}
		names = append(names, name)
		m.RuleNames, _ = types.ListValueFrom(ctx, types.StringType, names)
	}
	return nil
}

func (r *interruptionQueue) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var plan interruptionQueueModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if resp.Diagnostics.HasError() {
		return
	}
	// CreateQueue answers with the existing queue when one has the name: refuse
	// rather than take over and rewrite another state's queue.
	if r.clients != nil && r.clients.AWS != nil {
		_, err := r.clients.AWS.SQS.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(plan.Name.ValueString())})
		switch {
		case err == nil:
			resp.Diagnostics.AddAttributeError(path.Root("name"), fmt.Sprintf("SQS queue %s already exists", plan.Name.ValueString()),
				fmt.Sprintf("The account already has a queue named %q, made outside this configuration. Creating it here would take it over and rewrite its policy and rules. "+
					"To manage it here, import it: terraform import dovetail_interruption_queue.<name> %s. Otherwise choose another name.", plan.Name.ValueString(), plan.Name.ValueString()))
			return
		case !isCode(err, "AWS.SimpleQueueService.NonExistentQueue", "QueueDoesNotExist"):
			resp.Diagnostics.AddError("Cannot check whether the interruption queue exists", err.Error())
			return
		}
	}
	if err := r.apply(ctx, &plan); err != nil {
		resp.Diagnostics.AddError("Cannot create the interruption queue", err.Error())
		// Once the queue exists it is recorded, with the rules that work, so Terraform
		// tracks it: the next apply replaces it (the resource is tainted) and destroy
		// deletes it and every rule of its name.
		if !plan.URL.IsUnknown() {
			if plan.ARN.IsUnknown() {
				plan.ARN = types.StringNull()
			}
			if plan.RuleNames.IsUnknown() {
				plan.RuleNames = types.ListValueMust(types.StringType, nil)
			}
			resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
		}
		return
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
}

// Read reports the queue's attributes; a missing queue or rule means the resource
// must be made again.
func (r *interruptionQueue) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var state interruptionQueueModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() || r.clients == nil || r.clients.AWS == nil {
		return
	}
	api := r.clients.AWS
	got, err := api.SQS.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(state.Name.ValueString())})
	if isCode(err, "AWS.SimpleQueueService.NonExistentQueue", "QueueDoesNotExist") {
		resp.State.RemoveResource(ctx)
		return
	}
	if err != nil {
		resp.Diagnostics.AddError("Cannot read the interruption queue", err.Error())
		return
	}
	attrs, err := api.SQS.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: got.QueueUrl, AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameAll}})
	if err != nil {
		resp.Diagnostics.AddError("Cannot read the interruption queue", err.Error())
		return
	}
	a := attrs.Attributes
	if v, err := strconv.ParseInt(a[string(sqstypes.QueueAttributeNameMessageRetentionPeriod)], 10, 64); err == nil {
		state.MessageRetention = types.Int64Value(v)
	}
	if v, err := strconv.ParseBool(a[string(sqstypes.QueueAttributeNameSqsManagedSseEnabled)]); err == nil {
		state.SQSManagedSSE = types.BoolValue(v)
	}
	if key := a[string(sqstypes.QueueAttributeNameKmsMasterKeyId)]; key != "" || !state.KMSMasterKeyID.IsNull() {
		state.KMSMasterKeyID = types.StringValue(key)
		if key == "" {
			state.KMSMasterKeyID = types.StringNull()
		}
	}
	if v, err := strconv.ParseInt(a[string(sqstypes.QueueAttributeNameKmsDataKeyReusePeriodSeconds)], 10, 64); err == nil && !state.KMSDataKeyReuse.IsNull() {
		state.KMSDataKeyReuse = types.Int64Value(v)
	}
	state.URL, state.ARN = types.StringValue(aws.ToString(got.QueueUrl)), types.StringValue(a[string(sqstypes.QueueAttributeNameQueueArn)])
	listed, err := api.SQS.ListQueueTags(ctx, &sqs.ListQueueTagsInput{QueueUrl: got.QueueUrl})
	if err != nil {
		resp.Diagnostics.AddError("Cannot read the interruption queue's tags", err.Error())
		return
	}
	readTags(ctx, r.clients, listed.Tags, &state.Tags, &state.TagsAll, &resp.Diagnostics)
	state.PolicyStatements = readQueueStatements(ctx, a[string(sqstypes.QueueAttributeNamePolicy)], state.ARN.ValueString(), state.PolicyStatements, &resp.Diagnostics)
	// A rule that is gone, disabled or no longer sends to the queue is left out of
	// rule_names: the plan then puts it back in place, and the queue is kept.
	var names []string
	for _, rule := range InterruptionRules {
		name := state.Name.ValueString() + "-" + rule.Suffix
		working, err := r.ruleDelivers(ctx, name, state.ARN.ValueString())
		if err != nil {
			resp.Diagnostics.AddError("Cannot read the interruption rules", err.Error())
			return
		}
		if working {
			names = append(names, name)
		}
	}
	state.RuleNames, _ = types.ListValueFrom(ctx, types.StringType, names)
	state.ID = state.Name
	resp.Diagnostics.Append(resp.State.Set(ctx, &state)...)
}

// ruleDelivers reports whether the rule exists, is enabled and targets the queue.
func (r *interruptionQueue) ruleDelivers(ctx context.Context, name, queueARN string) (bool, error) {
	api := r.clients.AWS
	rule, err := api.EventBridge.DescribeRule(ctx, &eventbridge.DescribeRuleInput{Name: aws.String(name)})
	if isCode(err, "ResourceNotFoundException") {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if rule.State != ebtypes.RuleStateEnabled {
		return false, nil
	}
	targets, err := api.EventBridge.ListTargetsByRule(ctx, &eventbridge.ListTargetsByRuleInput{Rule: aws.String(name)})
	if isCode(err, "ResourceNotFoundException") {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	for _, t := range targets.Targets {
		if aws.ToString(t.Arn) == queueARN {
			return true, nil
		}
	}
	return false, nil
}

// InterruptionRuleNames are the EventBridge rules of the queue of that name.
func InterruptionRuleNames(queue string) []string { return expectedRuleNames(queue) }

// expectedRuleNames are the rules a queue of that name has when all is well.
func expectedRuleNames(queue string) []string {
	names := make([]string, 0, len(InterruptionRules))
	for _, rule := range InterruptionRules {
		names = append(names, queue+"-"+rule.Suffix)
	}
	return names
}

func (r *interruptionQueue) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	var plan interruptionQueueModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if resp.Diagnostics.HasError() {
		return
	}
	if err := r.apply(ctx, &plan); err != nil {
		resp.Diagnostics.AddError("Cannot update the interruption queue", err.Error())
		return
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
}

func (r *interruptionQueue) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var state interruptionQueueModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	api := r.clients.AWS
	for _, rule := range InterruptionRules {
		name := state.Name.ValueString() + "-" + rule.Suffix
		if _, err := api.EventBridge.RemoveTargets(ctx, &eventbridge.RemoveTargetsInput{Rule: aws.String(name), Ids: []string{queueTargetID}}); err != nil && !isCode(err, "ResourceNotFoundException") {
			resp.Diagnostics.AddError("Cannot remove the rule's target", fmt.Sprintf("rule %s: %v", name, err))
			return
		}
		if _, err := api.EventBridge.DeleteRule(ctx, &eventbridge.DeleteRuleInput{Name: aws.String(name)}); err != nil && !isCode(err, "ResourceNotFoundException") {
			resp.Diagnostics.AddError("Cannot delete the rule", fmt.Sprintf("rule %s: %v", name, err))
			return
		}
	}
	got, err := api.SQS.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(state.Name.ValueString())})
	if isCode(err, "AWS.SimpleQueueService.NonExistentQueue", "QueueDoesNotExist") {
		return
	}
	if err == nil {
		_, err = api.SQS.DeleteQueue(ctx, &sqs.DeleteQueueInput{QueueUrl: got.QueueUrl})
	}
	if err != nil {
		resp.Diagnostics.AddError("Cannot delete the interruption queue", err.Error())
	}
}

func (r *interruptionQueue) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	resource.ImportStatePassthroughID(ctx, path.Root("name"), req, resp)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("id"), req.ID)...)
}

// syncQueueTags makes the queue's tags exactly want.
func syncQueueTags(ctx context.Context, api *sqs.Client, url string, want map[string]string) error {
	have, err := api.ListQueueTags(ctx, &sqs.ListQueueTagsInput{QueueUrl: aws.String(url)})
	if err != nil {
		return fmt.Errorf("reading the queue's tags, %w", err)
	}
	drop, set := tagDiff(have.Tags, want)
	if len(drop) > 0 {
		if _, err := api.UntagQueue(ctx, &sqs.UntagQueueInput{QueueUrl: aws.String(url), TagKeys: drop}); err != nil {
			return fmt.Errorf("removing the queue's tags, %w", err)
		}
	}
	if len(set) > 0 {
		if _, err := api.TagQueue(ctx, &sqs.TagQueueInput{QueueUrl: aws.String(url), Tags: set}); err != nil {
			return fmt.Errorf("tagging the queue, %w", err)
		}
	}
	return nil
}

// syncRuleTags makes an EventBridge rule's tags exactly want.
func syncRuleTags(ctx context.Context, api *eventbridge.Client, arn string, want map[string]string) error {
	listed, err := api.ListTagsForResource(ctx, &eventbridge.ListTagsForResourceInput{ResourceARN: aws.String(arn)})
	if err != nil {
		return fmt.Errorf("reading the tags of rule %s, %w", arn, err)
	}
	have := map[string]string{}
	for _, t := range listed.Tags {
		have[aws.ToString(t.Key)] = aws.ToString(t.Value)
	}
	drop, set := tagDiff(have, want)
	if len(drop) > 0 {
		if _, err := api.UntagResource(ctx, &eventbridge.UntagResourceInput{ResourceARN: aws.String(arn), TagKeys: drop}); err != nil {
			return fmt.Errorf("removing the tags of rule %s, %w", arn, err)
		}
	}
	if len(set) > 0 {
		var tags []ebtypes.Tag
		for _, k := range sortedStringKeys(set) {
			tags = append(tags, ebtypes.Tag{Key: aws.String(k), Value: aws.String(set[k])})
		}
		if _, err := api.TagResource(ctx, &eventbridge.TagResourceInput{ResourceARN: aws.String(arn), Tags: tags}); err != nil {
			return fmt.Errorf("tagging rule %s, %w", arn, err)
		}
	}
	return nil
}

// tagDiff is what turns have into want: keys to remove and tags to set.
func tagDiff(have, want map[string]string) (drop []string, set map[string]string) {
	set = map[string]string{}
	for k := range have {
		if _, ok := want[k]; !ok {
			drop = append(drop, k)
		}
	}
	sort.Strings(drop)
	for k, v := range want {
		if old, ok := have[k]; !ok || old != v {
			set[k] = v
		}
	}
	return drop, set
}

func sortedStringKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// ValidateConfig refuses two kinds of encryption at once: SQS takes SQS-managed keys
// or a KMS key, and would refuse the queue at apply.
func (r *interruptionQueue) ValidateConfig(ctx context.Context, req resource.ValidateConfigRequest, resp *resource.ValidateConfigResponse) {
	var key types.String
	var sse types.Bool
	resp.Diagnostics.Append(req.Config.GetAttribute(ctx, path.Root("kms_master_key_id"), &key)...)
	resp.Diagnostics.Append(req.Config.GetAttribute(ctx, path.Root("sqs_managed_sse"), &sse)...)
	if key.IsNull() || key.IsUnknown() || sse.IsUnknown() {
		return
	}
	if sse.IsNull() || sse.ValueBool() {
		resp.Diagnostics.AddAttributeError(path.Root("sqs_managed_sse"), "Two kinds of encryption",
			"kms_master_key_id encrypts the queue with a KMS key; set sqs_managed_sse = false beside it (SQS uses one or the other).")
	}
}
