package iampolicy

import (
	"strings"
	"testing"
)

func mustParse(t *testing.T, doc string) *Policy {
	t.Helper()
	p, err := Parse(doc)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestConditions(t *testing.T) {
	// The AWS documentation's examples of set qualifiers and Null, then each
	// operator's own cases.
	for _, tc := range []struct {
		name      string
		condition string
		ctx       Context
		want      bool
	}{
		// ForAllValues: every request value must be among the policy's, and a request
		// without the key passes.
		{"ForAllValues all listed", `{"ForAllValues:StringEquals":{"aws:TagKeys":["environment","cost-center"]}}`, Context{"aws:TagKeys": {"environment", "cost-center"}}, true},
		{"ForAllValues a subset", `{"ForAllValues:StringEquals":{"aws:TagKeys":["environment","cost-center"]}}`, Context{"aws:TagKeys": {"environment"}}, true},
		{"ForAllValues one unlisted", `{"ForAllValues:StringEquals":{"aws:TagKeys":["environment","cost-center"]}}`, Context{"aws:TagKeys": {"environment", "owner"}}, false},
		{"ForAllValues values keep their case", `{"ForAllValues:StringEquals":{"aws:TagKeys":["environment","cost-center"]}}`, Context{"aws:TagKeys": {"Environment"}}, false},
		{"ForAllValues missing key", `{"ForAllValues:StringEquals":{"aws:TagKeys":["environment","cost-center"]}}`, Context{}, true},
		{"ForAllValues empty key", `{"ForAllValues:StringEquals":{"aws:TagKeys":["environment","cost-center"]}}`, Context{"aws:TagKeys": {}}, true},
		{"ForAllValues with Null false refuses no tags", `{"ForAllValues:StringEquals":{"aws:TagKeys":["environment"]},"Null":{"aws:TagKeys":"false"}}`, Context{}, false},
		{"ForAllValues StringLike", `{"ForAllValues:StringLike":{"aws:TagKeys":["karpenter.sh/*","Name"]}}`, Context{"aws:TagKeys": {"karpenter.sh/nodeclaim", "Name"}}, true},
		{"ForAllValues negated: none listed", `{"ForAllValues:StringNotEquals":{"aws:TagKeys":["owner"]}}`, Context{"aws:TagKeys": {"environment", "team"}}, true},
		{"ForAllValues negated: one listed", `{"ForAllValues:StringNotEquals":{"aws:TagKeys":["owner"]}}`, Context{"aws:TagKeys": {"environment", "owner"}}, false},
		// ForAnyValue: at least one request value must be among the policy's; a
		// request without the key fails.
		{"ForAnyValue one listed", `{"ForAnyValue:StringEquals":{"aws:TagKeys":["environment","cost-center"]}}`, Context{"aws:TagKeys": {"environment"}}, true},
		{"ForAnyValue one listed among others", `{"ForAnyValue:StringEquals":{"aws:TagKeys":["environment","cost-center"]}}`, Context{"aws:TagKeys": {"owner", "cost-center"}}, true},
		{"ForAnyValue none listed", `{"ForAnyValue:StringEquals":{"aws:TagKeys":["environment","cost-center"]}}`, Context{"aws:TagKeys": {"owner"}}, false},
		{"ForAnyValue missing key", `{"ForAnyValue:StringEquals":{"aws:TagKeys":["environment","cost-center"]}}`, Context{}, false},
		{"ForAnyValue IfExists missing key", `{"ForAnyValue:StringEqualsIfExists":{"aws:TagKeys":["environment"]}}`, Context{}, true},
		{"ForAnyValue negated: one unlisted", `{"ForAnyValue:StringNotEquals":{"aws:TagKeys":["environment"]}}`, Context{"aws:TagKeys": {"environment", "owner"}}, true},
		{"ForAnyValue negated: all listed", `{"ForAnyValue:StringNotEquals":{"aws:TagKeys":["environment"]}}`, Context{"aws:TagKeys": {"environment"}}, false},
		{"ForAnyValue negated: missing key", `{"ForAnyValue:StringNotEquals":{"aws:TagKeys":["environment"]}}`, Context{}, false},
		// Null: "true" holds when the key is absent, "false" when present.
		{"Null true, absent", `{"Null":{"aws:TokenIssueTime":"true"}}`, Context{}, true},
		{"Null true, present", `{"Null":{"aws:TokenIssueTime":"true"}}`, Context{"aws:TokenIssueTime": {"2024-01-01T00:00:00Z"}}, false},
		{"Null false, present", `{"Null":{"aws:RequestTag/team":"false"}}`, Context{"aws:RequestTag/team": {"billing"}}, true},
		{"Null false, absent", `{"Null":{"aws:RequestTag/team":"false"}}`, Context{}, false},
		{"Null as a boolean", `{"Null":{"aws:RequestTag/team":false}}`, Context{"aws:RequestTag/team": {"billing"}}, true},
		// Single-valued operators.
		{"StringEquals", `{"StringEquals":{"aws:RequestTag/team":"billing"}}`, Context{"aws:RequestTag/team": {"billing"}}, true},
		{"StringEquals is case-sensitive on values", `{"StringEquals":{"aws:RequestTag/team":"billing"}}`, Context{"aws:RequestTag/team": {"Billing"}}, false},
		{"keys are case-insensitive", `{"StringEquals":{"AWS:requesttag/team":"billing"}}`, Context{"aws:RequestTag/team": {"billing"}}, true},
		{"StringEquals missing key", `{"StringEquals":{"aws:RequestTag/team":"billing"}}`, Context{}, false},
		{"StringEquals values are alternatives", `{"StringEquals":{"ec2:CreateAction":["RunInstances","CreateFleet"]}}`, Context{"ec2:CreateAction": {"CreateFleet"}}, true},
		{"StringEquals keys all hold", `{"StringEquals":{"aws:RequestTag/a":"1","aws:RequestTag/b":"2"}}`, Context{"aws:RequestTag/a": {"1"}, "aws:RequestTag/b": {"3"}}, false},
		{"operators all hold", `{"StringEquals":{"aws:RequestTag/a":"1"},"StringLike":{"aws:RequestTag/b":"*"}}`, Context{"aws:RequestTag/a": {"1"}}, false},
		{"StringEqualsIfExists missing key", `{"StringEqualsIfExists":{"aws:RequestTag/team":"billing"}}`, Context{}, true},
		{"StringEqualsIfExists present, other value", `{"StringEqualsIfExists":{"aws:RequestTag/team":"billing"}}`, Context{"aws:RequestTag/team": {"search"}}, false},
		{"StringNotEquals", `{"StringNotEquals":{"aws:RequestTag/team":"billing"}}`, Context{"aws:RequestTag/team": {"search"}}, true},
		{"StringNotEquals listed", `{"StringNotEquals":{"aws:RequestTag/team":["search","billing"]}}`, Context{"aws:RequestTag/team": {"billing"}}, false},
		{"StringNotEquals missing key holds", `{"StringNotEquals":{"aws:RequestTag/team":"billing"}}`, Context{}, true},
		{"StringEqualsIgnoreCase", `{"StringEqualsIgnoreCase":{"aws:RequestTag/team":"billing"}}`, Context{"aws:RequestTag/team": {"BILLING"}}, true},
		{"StringNotEqualsIgnoreCase", `{"StringNotEqualsIgnoreCase":{"aws:RequestTag/team":"billing"}}`, Context{"aws:RequestTag/team": {"BILLING"}}, false},
		{"StringLike star", `{"StringLike":{"aws:RequestTag/karpenter.sh/nodepool":"*"}}`, Context{"aws:RequestTag/karpenter.sh/nodepool": {"default"}}, true},
		{"StringLike star on an empty value", `{"StringLike":{"aws:RequestTag/karpenter.sh/nodepool":"*"}}`, Context{"aws:RequestTag/karpenter.sh/nodepool": {""}}, true},
		{"StringLike star on a missing key", `{"StringLike":{"aws:RequestTag/karpenter.sh/nodepool":"*"}}`, Context{}, false},
		{"StringLike question mark", `{"StringLike":{"aws:RequestTag/zone":"us-west-2?"}}`, Context{"aws:RequestTag/zone": {"us-west-2a"}}, true},
		{"StringLike question mark is one character", `{"StringLike":{"aws:RequestTag/zone":"us-west-2?"}}`, Context{"aws:RequestTag/zone": {"us-west-2"}}, false},
		{"StringLike is case-sensitive", `{"StringLike":{"aws:RequestTag/team":"bill*"}}`, Context{"aws:RequestTag/team": {"Billing"}}, false},
		{"StringNotLike", `{"StringNotLike":{"aws:RequestTag/team":"bill*"}}`, Context{"aws:RequestTag/team": {"search"}}, true},
		{"StringNotLike matching", `{"StringNotLike":{"aws:RequestTag/team":"bill*"}}`, Context{"aws:RequestTag/team": {"billing"}}, false},
		{"StringNotLike missing key holds", `{"StringNotLike":{"aws:RequestTag/team":"bill*"}}`, Context{}, true},
		{"single-valued on a multivalued key: any matches", `{"StringEquals":{"aws:TagKeys":"team"}}`, Context{"aws:TagKeys": {"owner", "team"}}, true},
		{"ArnLike", `{"ArnLike":{"aws:SourceArn":"arn:aws:sqs:*:123456789012:queue-*"}}`, Context{"aws:SourceArn": {"arn:aws:sqs:us-west-2:123456789012:queue-1"}}, true},
		{"ArnLike: a wildcard stays in its part", `{"ArnLike":{"aws:SourceArn":"arn:aws:sqs:*:123456789012"}}`, Context{"aws:SourceArn": {"arn:aws:sqs:us-west-2:123456789012:queue-1"}}, false},
		{"ArnEquals", `{"ArnEquals":{"aws:SourceArn":"arn:aws:iam::123456789012:role/nodes"}}`, Context{"aws:SourceArn": {"arn:aws:iam::123456789012:role/nodes"}}, true},
		{"ArnNotLike", `{"ArnNotLike":{"aws:SourceArn":"arn:aws:iam::*:role/admin*"}}`, Context{"aws:SourceArn": {"arn:aws:iam::123456789012:role/nodes"}}, true},
		{"ArnNotLike matching", `{"ArnNotLike":{"aws:SourceArn":"arn:aws:iam::*:role/admin*"}}`, Context{"aws:SourceArn": {"arn:aws:iam::123456789012:role/admin-1"}}, false},
		{"ArnLike on a non-ARN", `{"ArnLike":{"aws:SourceArn":"arn:aws:iam::*:role/*"}}`, Context{"aws:SourceArn": {"nodes"}}, false},
		{"Bool", `{"Bool":{"aws:SecureTransport":"true"}}`, Context{"aws:SecureTransport": {"true"}}, true},
		{"Bool as a boolean", `{"Bool":{"aws:SecureTransport":true}}`, Context{"aws:SecureTransport": {"false"}}, false},
		{"Bool missing key", `{"Bool":{"aws:SecureTransport":"false"}}`, Context{}, false},
		{"NumericLessThanEquals", `{"NumericLessThanEquals":{"aws:MultiFactorAuthAge":3600}}`, Context{"aws:MultiFactorAuthAge": {"60"}}, true},
		{"NumericGreaterThan", `{"NumericGreaterThan":{"aws:MultiFactorAuthAge":"3600"}}`, Context{"aws:MultiFactorAuthAge": {"60"}}, false},
		{"NumericEquals", `{"NumericEquals":{"ec2:VolumeSize":"20"}}`, Context{"ec2:VolumeSize": {"20"}}, true},
		{"NumericNotEquals", `{"NumericNotEquals":{"ec2:VolumeSize":"20"}}`, Context{"ec2:VolumeSize": {"20"}}, false},
		{"Numeric on a non-number", `{"NumericLessThan":{"ec2:VolumeSize":"20"}}`, Context{"ec2:VolumeSize": {"big"}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := mustParse(t, `{"Version":"2012-10-17","Statement":{"Effect":"Allow","Action":"ec2:CreateTags","Resource":"*","Condition":`+tc.condition+`}}`)
			d := p.Evaluate(Request{Action: "ec2:CreateTags", Resource: "arn:aws:ec2:us-west-2:123456789012:instance/i-1", Context: tc.ctx})
			if d.Allowed != tc.want {
				t.Errorf("allowed = %v, want %v (%+v)", d.Allowed, tc.want, d)
			}
		})
	}
}

func TestStatements(t *testing.T) {
	const instance = "arn:aws:ec2:us-west-2:123456789012:instance/i-1"
	for _, tc := range []struct {
		name   string
		policy string
		req    Request
		want   bool
		by     string
	}{
		{"default deny", `{"Statement":[{"Effect":"Allow","Action":"ec2:DescribeInstances","Resource":"*"}]}`,
			Request{Action: "ec2:TerminateInstances", Resource: instance}, false, ""},
		{"action without regard to case", `{"Statement":{"Sid":"A","Effect":"Allow","Action":"EC2:terminateinstances","Resource":"*"}}`,
			Request{Action: "ec2:TerminateInstances", Resource: instance}, true, "A"},
		{"action wildcard", `{"Statement":{"Sid":"A","Effect":"Allow","Action":"ec2:Describe*","Resource":"*"}}`,
			Request{Action: "ec2:DescribeInstances", Resource: "*"}, true, "A"},
		{"action wildcard does not match another service", `{"Statement":{"Effect":"Allow","Action":"ec2:Describe*","Resource":"*"}}`,
			Request{Action: "eks:DescribeCluster", Resource: "*"}, false, ""},
		{"action question mark", `{"Statement":{"Sid":"A","Effect":"Allow","Action":"sqs:?eleteMessage","Resource":"*"}}`,
			Request{Action: "sqs:DeleteMessage", Resource: "*"}, true, "A"},
		{"resource glob", `{"Statement":{"Sid":"A","Effect":"Allow","Action":"ec2:TerminateInstances","Resource":["arn:aws:ec2:us-west-2:*:instance/*"]}}`,
			Request{Action: "ec2:TerminateInstances", Resource: instance}, true, "A"},
		{"resource in another region", `{"Statement":{"Effect":"Allow","Action":"ec2:TerminateInstances","Resource":"arn:aws:ec2:us-east-1:*:instance/*"}}`,
			Request{Action: "ec2:TerminateInstances", Resource: instance}, false, ""},
		{"resource is case-sensitive", `{"Statement":{"Effect":"Allow","Action":"ec2:TerminateInstances","Resource":"arn:aws:ec2:us-west-2:*:Instance/*"}}`,
			Request{Action: "ec2:TerminateInstances", Resource: instance}, false, ""},
		{"NotAction", `{"Statement":{"Sid":"A","Effect":"Allow","NotAction":["iam:*"],"Resource":"*"}}`,
			Request{Action: "ec2:TerminateInstances", Resource: instance}, true, "A"},
		{"NotAction excludes", `{"Statement":{"Effect":"Allow","NotAction":["iam:*"],"Resource":"*"}}`,
			Request{Action: "iam:PassRole", Resource: "arn:aws:iam::123456789012:role/nodes"}, false, ""},
		{"NotResource", `{"Statement":{"Sid":"A","Effect":"Allow","Action":"iam:PassRole","NotResource":"arn:aws:iam::*:role/admin"}}`,
			Request{Action: "iam:PassRole", Resource: "arn:aws:iam::123456789012:role/nodes"}, true, "A"},
		{"NotResource excludes", `{"Statement":{"Effect":"Allow","Action":"iam:PassRole","NotResource":"arn:aws:iam::*:role/admin"}}`,
			Request{Action: "iam:PassRole", Resource: "arn:aws:iam::123456789012:role/admin"}, false, ""},
		{"explicit deny wins", `{"Statement":[{"Sid":"A","Effect":"Allow","Action":"ec2:*","Resource":"*"},{"Sid":"D","Effect":"Deny","Action":"ec2:TerminateInstances","Resource":"*"}]}`,
			Request{Action: "ec2:TerminateInstances", Resource: instance}, false, "D"},
		{"a deny whose condition fails does not deny", `{"Statement":[{"Sid":"A","Effect":"Allow","Action":"ec2:*","Resource":"*"},{"Sid":"D","Effect":"Deny","Action":"ec2:TerminateInstances","Resource":"*","Condition":{"StringNotEquals":{"aws:ResourceTag/team":"billing"}}}]}`,
			Request{Action: "ec2:TerminateInstances", Resource: instance, Context: Context{"aws:ResourceTag/team": {"billing"}}}, true, "A"},
		{"a deny on a missing key", `{"Statement":[{"Sid":"A","Effect":"Allow","Action":"ec2:*","Resource":"*"},{"Sid":"D","Effect":"Deny","Action":"ec2:TerminateInstances","Resource":"*","Condition":{"StringNotEquals":{"aws:ResourceTag/team":"billing"}}}]}`,
			Request{Action: "ec2:TerminateInstances", Resource: instance}, false, "D"},
		{"any allow", `{"Statement":[{"Sid":"A","Effect":"Allow","Action":"ec2:RunInstances","Resource":"*","Condition":{"StringEquals":{"aws:RequestTag/a":"1"}}},{"Sid":"B","Effect":"Allow","Action":"ec2:RunInstances","Resource":"*"}]}`,
			Request{Action: "ec2:RunInstances", Resource: instance}, true, "B"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := mustParse(t, tc.policy).Evaluate(tc.req)
			if d.Allowed != tc.want || d.By != tc.by {
				t.Errorf("allowed = %v by %q, want %v by %q (%+v)", d.Allowed, d.By, tc.want, tc.by, d)
			}
		})
	}
}

func TestDeniedRequestsSayWhy(t *testing.T) {
	p := mustParse(t, `{"Statement":[{"Sid":"Tagged","Effect":"Allow","Action":"ec2:CreateFleet","Resource":"arn:aws:ec2:*:*:fleet/*",
		"Condition":{"StringEquals":{"aws:RequestTag/kubernetes.io/cluster/demo":"owned"},"StringLike":{"aws:RequestTag/karpenter.sh/nodepool":"*"}}}]}`)
	d := p.Evaluate(Request{Action: "ec2:CreateFleet", Resource: "arn:aws:ec2:us-west-2:123456789012:fleet/new",
		Context: Context{"aws:RequestTag/karpenter.sh/nodepool": {"default"}}})
	if d.Allowed || len(d.Misses) != 1 || d.Misses[0].Sid != "Tagged" || len(d.Misses[0].Failed) != 1 ||
		!strings.Contains(d.Misses[0].Failed[0], "kubernetes.io/cluster/demo") || !strings.Contains(d.Misses[0].Failed[0], "missing") {
		t.Errorf("decision %+v; want a miss of Tagged naming the missing cluster tag", d)
	}
}

func TestParseRefusesWhatItCannotEvaluate(t *testing.T) {
	for name, doc := range map[string]string{
		"not JSON":             `{`,
		"no statement":         `{"Version":"2012-10-17"}`,
		"bad effect":           `{"Statement":{"Effect":"Maybe","Action":"ec2:*","Resource":"*"}}`,
		"no action":            `{"Statement":{"Effect":"Allow","Resource":"*"}}`,
		"action and not":       `{"Statement":{"Effect":"Allow","Action":"ec2:*","NotAction":"iam:*","Resource":"*"}}`,
		"no resource":          `{"Statement":{"Effect":"Allow","Action":"ec2:*"}}`,
		"principal":            `{"Statement":{"Effect":"Allow","Principal":"*","Action":"ec2:*","Resource":"*"}}`,
		"unknown element":      `{"Statement":{"Effect":"Allow","Action":"ec2:*","Resource":"*","Conditions":{}}}`,
		"date operator":        `{"Statement":{"Effect":"Allow","Action":"ec2:*","Resource":"*","Condition":{"DateGreaterThan":{"aws:CurrentTime":"2020-01-01T00:00:00Z"}}}}`,
		"ip operator":          `{"Statement":{"Effect":"Allow","Action":"ec2:*","Resource":"*","Condition":{"IpAddress":{"aws:SourceIp":"10.0.0.0/8"}}}}`,
		"bad qualifier":        `{"Statement":{"Effect":"Allow","Action":"ec2:*","Resource":"*","Condition":{"ForSomeValues:StringEquals":{"aws:TagKeys":"a"}}}}`,
		"qualified Null":       `{"Statement":{"Effect":"Allow","Action":"ec2:*","Resource":"*","Condition":{"ForAllValues:Null":{"aws:TagKeys":"true"}}}}`,
		"policy variable":      `{"Statement":{"Effect":"Allow","Action":"ec2:*","Resource":"*","Condition":{"StringEquals":{"aws:RequestTag/owner":"${aws:username}"}}}}`,
		"variable in resource": `{"Statement":{"Effect":"Allow","Action":"iam:*","Resource":"arn:aws:iam::*:user/${aws:username}"}}`,
		"object value":         `{"Statement":{"Effect":"Allow","Action":"ec2:*","Resource":"*","Condition":{"StringEquals":{"aws:TagKeys":{"a":"b"}}}}}`,
	} {
		if _, err := Parse(doc); err == nil {
			t.Errorf("%s: parsed %s", name, doc)
		}
	}
}

func TestGlob(t *testing.T) {
	for _, tc := range []struct {
		pattern, s string
		want       bool
	}{
		{"*", "", true}, {"*", "anything", true}, {"", "", true}, {"", "a", false},
		{"a*c", "abbbc", true}, {"a*c", "abbb", false}, {"a?c", "abc", true}, {"a?c", "ac", false},
		{"*/*", "instance/i-1", true}, {"*b*b*", "abab", true}, {"*b*b*", "ab", false},
		{"arn:aws:ec2:us-west-2:*:instance/*", "arn:aws:ec2:us-west-2:123456789012:instance/i-1", true},
	} {
		if got := glob(tc.pattern, tc.s); got != tc.want {
			t.Errorf("glob(%q, %q) = %v, want %v", tc.pattern, tc.s, got, tc.want)
		}
	}
}
