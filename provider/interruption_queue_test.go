package provider_test

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	ebtypes "github.com/aws/aws-sdk-go-v2/service/eventbridge/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"

	"github.com/dovetail-sh/dovetail/provider"
	"github.com/dovetail-sh/dovetail/tests/testenv"
)

func queueConfig(endpoint string, retention int) string {
	return awsProvider(endpoint, "sqs", "events") + fmt.Sprintf(`
resource "dovetail_interruption_queue" "this" {
  name                      = "demo-interruption"
  message_retention_seconds = %d
}
`, retention)
}

func TestAccInterruptionQueue(t *testing.T) {
	acceptance(t)
	ctx := context.Background()
	moto := testenv.StartMoto(t)
	clients := testenv.AWSClients(t, moto, "us-west-2")
	events := eventbridge.New(eventbridge.Options{Region: "us-west-2", BaseEndpoint: aws.String(moto.Endpoint), Credentials: credentials.NewStaticCredentialsProvider("testing", "testing", "")})
	queueURL := func() (string, error) {
		out, err := clients.SQS.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String("demo-interruption")})
		if err != nil {
			return "", err
		}
		return aws.ToString(out.QueueUrl), nil
	}
	attribute := func(name sqstypes.QueueAttributeName, want func(string) error) resource.TestCheckFunc {
		return func(*terraform.State) error {
			url, err := queueURL()
			if err != nil {
				return err
			}
			out, err := clients.SQS.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(url), AttributeNames: []sqstypes.QueueAttributeName{name}})
			if err != nil {
				return err
			}
			return want(out.Attributes[string(name)])
		}
	}
	equals := func(v string) func(string) error {
		return func(got string) error {
			if got != v {
				return fmt.Errorf("got %q, want %q", got, v)
			}
			return nil
		}
	}
	// The rules must deliver: a spot warning sent to EventBridge lands in the queue.
	delivers := func(*terraform.State) error {
		out, err := events.PutEvents(ctx, &eventbridge.PutEventsInput{Entries: []ebtypes.PutEventsRequestEntry{{
			Source: aws.String("aws.ec2"), DetailType: aws.String("EC2 Spot Instance Interruption Warning"), Detail: aws.String(`{"instance-id":"i-0123456789abcdef0"}`)}}})
		if err != nil || out.FailedEntryCount > 0 {
			return fmt.Errorf("PutEvents: %v %+v", err, out)
		}
		url, err := queueURL()
		if err != nil {
			return err
		}
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) {
			msgs, err := clients.SQS.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), WaitTimeSeconds: 1})
			if err != nil {
				return err
			}
			for _, m := range msgs.Messages {
				if strings.Contains(aws.ToString(m.Body), "i-0123456789abcdef0") {
					_, err := clients.SQS.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(url), ReceiptHandle: m.ReceiptHandle})
					return err
				}
			}
		}
		return fmt.Errorf("the spot interruption warning never reached the queue")
	}
	inPlace := resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{plancheck.ExpectResourceAction("dovetail_interruption_queue.this", plancheck.ResourceActionUpdate)}}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: factories,
		CheckDestroy: func(*terraform.State) error {
			if _, err := queueURL(); err == nil {
				return fmt.Errorf("the queue still exists")
			}
			for _, r := range provider.InterruptionRules {
				if _, err := events.DescribeRule(ctx, &eventbridge.DescribeRuleInput{Name: aws.String("demo-interruption-" + r.Suffix)}); err == nil {
					return fmt.Errorf("rule %s still exists", r.Suffix)
				}
			}
			return nil
		},
		Steps: []resource.TestStep{
			{
				Config: queueConfig(moto.Endpoint, 300),
				Check: resource.ComposeTestCheckFunc(
					attribute(sqstypes.QueueAttributeNameMessageRetentionPeriod, equals("300")),
					attribute(sqstypes.QueueAttributeNameSqsManagedSseEnabled, equals("true")),
					attribute(sqstypes.QueueAttributeNamePolicy, func(p string) error {
						for _, want := range []string{"events.amazonaws.com", "sqs.amazonaws.com", `"aws:SecureTransport":"false"`} {
							// The emulator re-indents the document.
							if !strings.Contains(strings.ReplaceAll(p, " ", ""), want) {
								return fmt.Errorf("queue policy lacks %s: %s", want, p)
							}
						}
						return nil
					}),
					resource.TestCheckResourceAttr("dovetail_interruption_queue.this", "rule_names.#", fmt.Sprint(len(provider.InterruptionRules))),
					resource.TestCheckResourceAttrSet("dovetail_interruption_queue.this", "arn"),
					delivers,
				),
			},
			{
				Config: queueConfig(moto.Endpoint, 600),
				Check:  attribute(sqstypes.QueueAttributeNameMessageRetentionPeriod, equals("600")),
			},
			{ResourceName: "dovetail_interruption_queue.this", ImportState: true, ImportStateId: "demo-interruption", ImportStateVerify: true},
			{
				// Imported with an import block under the configuration that made it, it
				// plans nothing else: no replacement, no update.
				ResourceName: "dovetail_interruption_queue.this", ImportState: true, ImportStateKind: resource.ImportBlockWithID, ImportStateId: "demo-interruption",
			},
			{
				// Retention changed out of band shows as drift.
				PreConfig: func() {
					url, err := queueURL()
					if err == nil {
						_, err = clients.SQS.SetQueueAttributes(ctx, &sqs.SetQueueAttributesInput{QueueUrl: aws.String(url), Attributes: map[string]string{"MessageRetentionPeriod": "900"}})
					}
					if err != nil {
						t.Fatal(err)
					}
				},
				Config: queueConfig(moto.Endpoint, 600), PlanOnly: true, ExpectNonEmptyPlan: true,
			},
			{
				// A rule deleted out of band is put back, in place: the queue and its
				// messages stay.
				PreConfig: func() {
					name := "demo-interruption-" + provider.InterruptionRules[0].Suffix
					if _, err := events.RemoveTargets(ctx, &eventbridge.RemoveTargetsInput{Rule: aws.String(name), Ids: []string{"dovetail-interruption-queue"}}); err != nil {
						t.Fatal(err)
					}
					if _, err := events.DeleteRule(ctx, &eventbridge.DeleteRuleInput{Name: aws.String(name)}); err != nil {
						t.Fatal(err)
					}
				},
				Config:           queueConfig(moto.Endpoint, 600),
				ConfigPlanChecks: inPlace,
				Check:            resource.ComposeTestCheckFunc(attribute(sqstypes.QueueAttributeNameMessageRetentionPeriod, equals("600")), delivers),
			},
			{
				// Only the target removed: the same.
				PreConfig: func() {
					name := "demo-interruption-" + provider.InterruptionRules[1].Suffix
					if _, err := events.RemoveTargets(ctx, &eventbridge.RemoveTargetsInput{Rule: aws.String(name), Ids: []string{"dovetail-interruption-queue"}}); err != nil {
						t.Fatal(err)
					}
				},
				Config:           queueConfig(moto.Endpoint, 600),
				ConfigPlanChecks: inPlace,
				Check:            delivers,
			},
			{
				// A disabled rule delivers nothing: it is enabled again.
				PreConfig: func() {
					name := "demo-interruption-" + provider.InterruptionRules[0].Suffix
					if _, err := events.DisableRule(ctx, &eventbridge.DisableRuleInput{Name: aws.String(name)}); err != nil {
						t.Fatal(err)
					}
				},
				Config:           queueConfig(moto.Endpoint, 600),
				ConfigPlanChecks: inPlace,
				Check: resource.ComposeTestCheckFunc(delivers, func(*terraform.State) error {
					for _, rule := range provider.InterruptionRules {
						out, err := events.DescribeRule(ctx, &eventbridge.DescribeRuleInput{Name: aws.String("demo-interruption-" + rule.Suffix)})
						if err != nil {
							return err
						}
						if out.State != ebtypes.RuleStateEnabled {
							return fmt.Errorf("rule %s is %s", aws.ToString(out.Name), out.State)
						}
					}
					return nil
				}),
			},
		},
	})
}

// A queue of the same name made outside this state (another cluster's, or a
// hand-made one) is not taken over: the create fails, says to import, and the queue
// keeps its attributes.
func TestAccInterruptionQueueRefusesToTakeOver(t *testing.T) {
	acceptance(t)
	ctx := context.Background()
	moto := testenv.StartMoto(t)
	clients := testenv.AWSClients(t, moto, "us-west-2")
	made, err := clients.SQS.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("demo-interruption"),
		Attributes: map[string]string{"MessageRetentionPeriod": "1200"}})
	if err != nil {
		t.Fatal(err)
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: factories,
		Steps: []resource.TestStep{{
			Config:      queueConfig(moto.Endpoint, 300),
			ExpectError: regexp.MustCompile(`SQS queue demo-interruption already exists(.|\n)*terraform import\s+dovetail_interruption_queue.<name>\s+demo-interruption`),
		}},
	})
	attrs, err := clients.SQS.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: made.QueueUrl,
		AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameMessageRetentionPeriod}})
	if err != nil {
		t.Fatalf("the existing queue is gone: %v", err)
	}
	if got := attrs.Attributes["MessageRetentionPeriod"]; got != "1200" {
		t.Errorf("the existing queue's retention became %s; it must be left alone", got)
	}
}

// A rule that fails after the queue exists leaves the queue in the state, not only in
// the account: destroy then deletes it and every rule of its name, and an apply once
// EventBridge works again replaces the tainted queue with a working one.
func TestAccInterruptionQueuePartialCreate(t *testing.T) {
	acceptance(t)
	ctx := context.Background()
	moto := testenv.StartMoto(t)
	clients := testenv.AWSClients(t, moto, "us-west-2")
	events := eventbridge.New(eventbridge.Options{Region: "us-west-2", BaseEndpoint: aws.String(moto.Endpoint), Credentials: credentials.NewStaticCredentialsProvider("testing", "testing", "")})
	broken := "demo-interruption-" + provider.InterruptionRules[2].Suffix
	var failing atomic.Bool
	failing.Store(true)
	eventBridgeDown := failCall(&failing, func(input any) bool {
		in, ok := input.(*eventbridge.PutTargetsInput)
		return ok && aws.ToString(in.Rule) == broken
	}, apiError("InternalException", "injected: EventBridge is unavailable"))
	leftovers := func() []string {
		var left []string
		if _, err := clients.SQS.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String("demo-interruption")}); err == nil {
			left = append(left, "queue demo-interruption")
		}
		for _, r := range provider.InterruptionRules {
			if _, err := events.DescribeRule(ctx, &eventbridge.DescribeRuleInput{Name: aws.String("demo-interruption-" + r.Suffix)}); err == nil {
				left = append(left, "rule demo-interruption-"+r.Suffix)
			}
		}
		return left
	}
	failed := regexp.MustCompile(`pointing\s+EventBridge\s+rule\s+` + broken + `\s+at\s+the\s+queue(.|\n)*injected`)
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: factoriesWith(eventBridgeDown),
		CheckDestroy: func(*terraform.State) error {
			if left := leftovers(); len(left) > 0 {
				return fmt.Errorf("destroy left %v", left)
			}
			return nil
		},
		Steps: []resource.TestStep{
			{Config: queueConfig(moto.Endpoint, 300), ExpectError: failed},
			{
				// The queue is in the state, so destroy deletes it with its rules.
				PreConfig: func() {
					if left := leftovers(); len(left) == 0 {
						t.Fatal("the failed create made nothing; the injected failure missed")
					}
				},
				Config: queueConfig(moto.Endpoint, 300), Destroy: true,
			},
			{
				PreConfig: func() {
					if left := leftovers(); len(left) > 0 {
						t.Fatalf("destroying the partly created queue left %v", left)
					}
				},
				Config: queueConfig(moto.Endpoint, 300), ExpectError: failed,
			},
			{
				// Tracked and tainted: once EventBridge answers, the next apply replaces it.
				PreConfig:        func() { failing.Store(false) },
				Config:           queueConfig(moto.Endpoint, 300),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{plancheck.ExpectResourceAction("dovetail_interruption_queue.this", plancheck.ResourceActionDestroyBeforeCreate)}},
				Check:            resource.TestCheckResourceAttr("dovetail_interruption_queue.this", "rule_names.#", fmt.Sprint(len(provider.InterruptionRules))),
			},
		},
	})
}

// The queue and every rule carry the configured tags, changed in place.
func TestAccInterruptionQueueTags(t *testing.T) {
	acceptance(t)
	ctx := context.Background()
	moto := testenv.StartMoto(t)
	clients := testenv.AWSClients(t, moto, "us-west-2")
	events := eventbridge.New(eventbridge.Options{Region: "us-west-2", BaseEndpoint: aws.String(moto.Endpoint), Credentials: credentials.NewStaticCredentialsProvider("testing", "testing", "")})
	config := func(tags string) string {
		return awsProvider(moto.Endpoint, "sqs", "events") + fmt.Sprintf(`
resource "dovetail_interruption_queue" "this" {
  name = "demo-interruption"
  tags = %s
}
`, tags)
	}
	tagged := func(want map[string]string) resource.TestCheckFunc {
		return func(*terraform.State) error {
			url, err := clients.SQS.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String("demo-interruption")})
			if err != nil {
				return err
			}
			q, err := clients.SQS.ListQueueTags(ctx, &sqs.ListQueueTagsInput{QueueUrl: url.QueueUrl})
			if err != nil {
				return err
			}
			if fmt.Sprint(q.Tags) != fmt.Sprint(want) {
				return fmt.Errorf("queue tags %v, want %v", q.Tags, want)
			}
			for _, name := range provider.InterruptionRuleNames("demo-interruption") {
				rule, err := events.DescribeRule(ctx, &eventbridge.DescribeRuleInput{Name: aws.String(name)})
				if err != nil {
					return err
				}
				listed, err := events.ListTagsForResource(ctx, &eventbridge.ListTagsForResourceInput{ResourceARN: rule.Arn})
				if err != nil {
					return err
				}
				got := map[string]string{}
				for _, tag := range listed.Tags {
					got[aws.ToString(tag.Key)] = aws.ToString(tag.Value)
				}
				if fmt.Sprint(got) != fmt.Sprint(want) {
					return fmt.Errorf("rule %s tags %v, want %v", name, got, want)
				}
			}
			return nil
		}
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: factories,
		Steps: []resource.TestStep{
			{Config: config(`{ team = "platform", env = "prod" }`), Check: tagged(map[string]string{"team": "platform", "env": "prod"})},
			{Config: config(`{ env = "staging" }`), Check: tagged(map[string]string{"env": "staging"}),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction("dovetail_interruption_queue.this", plancheck.ResourceActionUpdate)}}},
			{ResourceName: "dovetail_interruption_queue.this", ImportState: true, ImportStateId: "demo-interruption", ImportStateVerify: true},
			{
				// Imported with an import block under the configuration that made it, it
				// plans nothing else: no replacement, no update.
				ResourceName: "dovetail_interruption_queue.this", ImportState: true, ImportStateKind: resource.ImportBlockWithID, ImportStateId: "demo-interruption",
			},
		},
	})
}

// A KMS key encrypts the queue instead of SQS-managed keys, as
// terraform-aws-eks//modules/karpenter's queue_kms_master_key_id does; asking for
// both fails the plan.
func TestAccInterruptionQueueKMS(t *testing.T) {
	acceptance(t)
	ctx := context.Background()
	moto := testenv.StartMoto(t)
	clients := testenv.AWSClients(t, moto, "us-west-2")
	config := func(extra string) string {
		return awsProvider(moto.Endpoint, "sqs", "events") + fmt.Sprintf(`
resource "dovetail_interruption_queue" "this" {
  name = "demo-interruption"
  %s
}
`, extra)
	}
	encrypted := func(key, reuse string) resource.TestCheckFunc {
		return func(*terraform.State) error {
			url, err := clients.SQS.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String("demo-interruption")})
			if err != nil {
				return err
			}
			out, err := clients.SQS.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: url.QueueUrl, AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameAll}})
			if err != nil {
				return err
			}
			a := out.Attributes
			if a["KmsMasterKeyId"] != key || a["KmsDataKeyReusePeriodSeconds"] != reuse || a["SqsManagedSseEnabled"] == "true" {
				return fmt.Errorf("queue attributes %v, want KMS key %s reused %ss and no SQS-managed SSE", a, key, reuse)
			}
			return nil
		}
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: factories,
		Steps: []resource.TestStep{
			{Config: config(`sqs_managed_sse = false
  kms_master_key_id = "alias/dovetail-interruption"
  kms_data_key_reuse_period_seconds = 600`), Check: encrypted("alias/dovetail-interruption", "600")},
			{Config: config(`sqs_managed_sse = false
  kms_master_key_id = "alias/dovetail-interruption"
  kms_data_key_reuse_period_seconds = 900`), Check: encrypted("alias/dovetail-interruption", "900"),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction("dovetail_interruption_queue.this", plancheck.ResourceActionUpdate)}}},
		},
	})
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: factories,
		Steps: []resource.TestStep{{Config: config(`kms_master_key_id = "alias/dovetail-interruption"`), PlanOnly: true,
			ExpectError: regexp.MustCompile(`set sqs_managed_sse =\s+false\s+beside it`)}},
	})
}

// Further queue policy statements (terraform-aws-eks's queue_policy_statements) follow
// the queue's own, scoped to the queue unless they name a resource; they change in
// place, import without a plan, and an edit outside Terraform is put back.
func TestAccInterruptionQueuePolicyStatements(t *testing.T) {
	acceptance(t)
	ctx := context.Background()
	moto := testenv.StartMoto(t)
	clients := testenv.AWSClients(t, moto, "us-west-2")
	config := func(statements string) string {
		return awsProvider(moto.Endpoint, "sqs", "events") + fmt.Sprintf(`
resource "dovetail_interruption_queue" "this" {
  name              = "demo-interruption"
  policy_statements = %s
}
`, statements)
	}
	const audit = `[jsonencode({ Sid = "AuditRead", Effect = "Allow", Principal = { AWS = "arn:aws:iam::123456789012:role/audit" }, Action = ["sqs:GetQueueAttributes"] })]`
	policy := func() (map[string]map[string]any, error) {
		url, err := clients.SQS.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String("demo-interruption")})
		if err != nil {
			return nil, err
		}
		attrs, err := clients.SQS.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: url.QueueUrl, AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNamePolicy}})
		if err != nil {
			return nil, err
		}
		var doc struct{ Statement []map[string]any }
		if err := json.Unmarshal([]byte(attrs.Attributes["Policy"]), &doc); err != nil {
			return nil, err
		}
		out := map[string]map[string]any{}
		for _, st := range doc.Statement {
			out[fmt.Sprint(st["Sid"])] = st
		}
		return out, nil
	}
	sids := func(want ...string) resource.TestCheckFunc {
		return func(*terraform.State) error {
			got, err := policy()
			if err != nil {
				return err
			}
			if len(got) != len(want) {
				return fmt.Errorf("policy statements %v, want %v", got, want)
			}
			for _, sid := range want {
				if got[sid] == nil {
					return fmt.Errorf("policy lacks %s: %v", sid, got)
				}
			}
			if a := got["AuditRead"]; a != nil && !strings.HasSuffix(fmt.Sprint(a["Resource"]), ":demo-interruption") {
				return fmt.Errorf("AuditRead is not scoped to the queue: %v", a)
			}
			return nil
		}
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: factories,
		Steps: []resource.TestStep{
			{Config: config("null"), Check: sids("EventBridgeAndSQS", "DenyHTTP")},
			{Config: config(audit), Check: sids("EventBridgeAndSQS", "DenyHTTP", "AuditRead"),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{plancheck.ExpectResourceAction("dovetail_interruption_queue.this", plancheck.ResourceActionUpdate)}}},
			{ResourceName: "dovetail_interruption_queue.this", ImportState: true, ImportStateKind: resource.ImportBlockWithID, ImportStateId: "demo-interruption"},
			{
				// Someone replaces the policy by hand: the next apply puts it back.
				PreConfig: func() {
					url, err := clients.SQS.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String("demo-interruption")})
					if err != nil {
						t.Fatal(err)
					}
					p, err := policy()
					if err != nil {
						t.Fatal(err)
					}
					p["AuditRead"]["Action"] = "sqs:*"
					doc, _ := json.Marshal(map[string]any{"Version": "2012-10-17", "Statement": []any{p["EventBridgeAndSQS"], p["DenyHTTP"], p["AuditRead"]}})
					if _, err := clients.SQS.SetQueueAttributes(ctx, &sqs.SetQueueAttributesInput{QueueUrl: url.QueueUrl, Attributes: map[string]string{"Policy": string(doc)}}); err != nil {
						t.Fatal(err)
					}
				},
				Config:           config(audit),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{plancheck.ExpectResourceAction("dovetail_interruption_queue.this", plancheck.ResourceActionUpdate)}},
				Check: func(*terraform.State) error {
					p, err := policy()
					if err != nil {
						return err
					}
					if fmt.Sprint(p["AuditRead"]["Action"]) != "[sqs:GetQueueAttributes]" {
						return fmt.Errorf("AuditRead still allows %v", p["AuditRead"]["Action"])
					}
					return nil
				},
			},
			{Config: config(`[jsonencode({ Sid = "DenyHTTP", Effect = "Allow" })]`), ExpectError: regexp.MustCompile(`Sid\s+"DenyHTTP"\s+is\s+the\s+queue's\s+own`)},
			{Config: config(`["{\"Action\": \"sqs:*\"}"]`), ExpectError: regexp.MustCompile(`needs\s+an\s+Effect`)},
			{Config: config("null"), Check: sids("EventBridgeAndSQS", "DenyHTTP")},
		},
	})
}
