package provider_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/terraform"

	"github.com/dovetail-sh/dovetail/provider"
	"github.com/dovetail-sh/dovetail/tests/iampolicy"
	"github.com/dovetail-sh/dovetail/tests/testenv"
)

type policyDoc struct {
	Statement []struct {
		Sid       string
		Action    []string
		Resource  []string
		Condition map[string]map[string]any
	}
}

func TestControllerPolicyIsScoped(t *testing.T) {
	in := provider.ControllerPolicyInput{Region: "us-west-2", AccountID: "123456789012", ClusterName: "demo", NodeRoleARN: "arn:aws:iam::123456789012:role/nodes"}
	doc, err := provider.ControllerPolicy(in)
	if err != nil {
		t.Fatal(err)
	}
	var p policyDoc
	if err := json.Unmarshal([]byte(doc), &p); err != nil {
		t.Fatal(err)
	}
	reads := map[string]bool{}
	for _, s := range p.Statement {
		for _, a := range s.Action {
			if strings.Contains(a, "*") {
				t.Errorf("%s grants a wildcard action %s", s.Sid, a)
			}
			verb := a[strings.Index(a, ":")+1:]
			read := strings.HasPrefix(verb, "Describe") || strings.HasPrefix(verb, "Get")
			if read {
				reads[a] = true
			}
			if !read && a != "ec2:RunInstances" && a != "ec2:CreateFleet" && len(s.Condition) == 0 && a != "iam:PassRole" {
				t.Errorf("%s grants %s without a condition", s.Sid, a)
			}
			if !read && len(s.Resource) == 1 && s.Resource[0] == "*" {
				t.Errorf("%s grants %s on every resource", s.Sid, a)
			}
			if strings.HasPrefix(a, "sqs:") {
				t.Errorf("%s grants %s though no queue was given", s.Sid, a)
			}
		}
		if s.Sid == "AllowPassingInstanceRole" && (len(s.Resource) != 1 || s.Resource[0] != in.NodeRoleARN) {
			t.Errorf("PassRole on %v, want only the node role", s.Resource)
		}
	}
	// Every AWS call the controller makes is allowed.
	for _, a := range []string{"ec2:DescribeInstanceTypes", "ec2:DescribeInstanceTypeOfferings", "ec2:DescribeSpotPriceHistory", "ec2:DescribeSubnets",
		"ec2:DescribeSecurityGroups", "ec2:DescribeImages", "ec2:DescribeInstances", "ec2:DescribeInstanceStatus", "ec2:DescribeLaunchTemplates", "ssm:GetParameter", "pricing:GetProducts",
		"iam:GetInstanceProfile", "eks:DescribeCluster"} {
		if !reads[a] {
			t.Errorf("the controller calls %s, which the policy does not allow", a)
		}
	}
	in.InterruptionQueueARN = "arn:aws:sqs:us-west-2:123456789012:demo"
	withQueue, _ := provider.ControllerPolicy(in)
	if !strings.Contains(withQueue, `"sqs:ReceiveMessage"`) || !strings.Contains(withQueue, in.InterruptionQueueARN) {
		t.Errorf("no SQS permission on the given queue: %s", withQueue)
	}
}

func TestAccControllerPolicyDataSource(t *testing.T) {
	acceptance(t)
	ctx := context.Background()
	moto := testenv.StartMoto(t)
	api := testenv.AWSClients(t, moto, "us-west-2").IAM
	want, err := provider.ControllerPolicy(provider.ControllerPolicyInput{Region: "us-west-2", AccountID: "123456789012", ClusterName: "demo",
		NodeRoleARN: "arn:aws:iam::123456789012:role/nodes", InterruptionQueueARN: "arn:aws:sqs:us-west-2:123456789012:demo"})
	if err != nil {
		t.Fatal(err)
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: factories,
		Steps: []resource.TestStep{{
			Config: `
data "dovetail_controller_policy" "this" {
  cluster_name           = "demo"
  region                 = "us-west-2"
  account_id             = "123456789012"
  node_role_arn          = "arn:aws:iam::123456789012:role/nodes"
  interruption_queue_arn = "arn:aws:sqs:us-west-2:123456789012:demo"
}
`,
			Check: resource.ComposeTestCheckFunc(
				resource.TestCheckResourceAttr("data.dovetail_controller_policy.this", "json", want),
				func(s *terraform.State) error {
					// IAM accepts the document as a managed policy.
					doc := s.RootModule().Resources["data.dovetail_controller_policy.this"].Primary.Attributes["json"]
					if _, err := api.CreatePolicy(ctx, &iam.CreatePolicyInput{PolicyName: aws.String("DovetailController"), PolicyDocument: aws.String(doc)}); err != nil {
						return fmt.Errorf("IAM refused the policy: %v", err)
					}
					return nil
				},
			),
		}},
	})
}

// TestControllerPolicyScopesInstanceProfileTagging evaluates the policy as IAM does:
// the controller may create its class's profile with the cluster's tags, and tag a
// profile that is already the cluster's, but not claim someone else's profile by
// tagging it (it could then remove its roles or delete it).
func TestControllerPolicyScopesInstanceProfileTagging(t *testing.T) {
	doc, err := provider.ControllerPolicy(provider.ControllerPolicyInput{Region: "us-west-2", AccountID: "123456789012", ClusterName: "demo",
		NodeRoleARN: "arn:aws:iam::123456789012:role/nodes"})
	if err != nil {
		t.Fatal(err)
	}
	p, err := iampolicy.Parse(doc)
	if err != nil {
		t.Fatal(err)
	}
	owned := map[string]string{"kubernetes.io/cluster/demo": "owned", "topology.kubernetes.io/region": "us-west-2",
		"karpenter.k8s.aws/ec2nodeclass": "default", "eks:eks-cluster-name": "demo"}
	ctx := func(request, resource map[string]string) iampolicy.Context {
		c := iampolicy.Context{"aws:RequestedRegion": {"us-east-1"}}
		for k, v := range request {
			c["aws:RequestTag/"+k] = []string{v}
			c["aws:TagKeys"] = append(c["aws:TagKeys"], k)
		}
		for k, v := range resource {
			c["aws:ResourceTag/"+k] = []string{v}
		}
		return c
	}
	const profile = "arn:aws:iam::123456789012:instance-profile/"
	for _, tc := range []struct {
		name string
		req  iampolicy.Request
		want bool
	}{
		{"create the class's profile", iampolicy.Request{Action: "iam:CreateInstanceProfile", Resource: profile + "demo_1", Context: ctx(owned, nil)}, true},
		{"tag it on create", iampolicy.Request{Action: "iam:TagInstanceProfile", Resource: profile + "demo_1", Context: ctx(owned, owned)}, true},
		{"create one without the cluster's tags", iampolicy.Request{Action: "iam:CreateInstanceProfile", Resource: profile + "other", Context: ctx(nil, nil)}, false},
		{"tag someone else's profile as the cluster's", iampolicy.Request{Action: "iam:TagInstanceProfile", Resource: profile + "other",
			Context: ctx(owned, map[string]string{"team": "payments"})}, false},
		{"delete someone else's profile", iampolicy.Request{Action: "iam:DeleteInstanceProfile", Resource: profile + "other",
			Context: ctx(nil, map[string]string{"team": "payments"})}, false},
		{"delete the class's profile", iampolicy.Request{Action: "iam:DeleteInstanceProfile", Resource: profile + "demo_1", Context: ctx(nil, owned)}, true},
	} {
		if d := p.Evaluate(tc.req); d.Allowed != tc.want {
			t.Errorf("%s: allowed = %v, want %v (%+v)", tc.name, d.Allowed, tc.want, d)
		}
	}
}

// TestControllerPolicyDecryptsOnlyTheQueuesKey evaluates the KMS and SSM grants as IAM
// would: kms:Decrypt only on the queue's key, only through SQS, whichever way the key
// is named; extra SSM parameters beside AWS's public ones.
func TestControllerPolicyDecryptsOnlyTheQueuesKey(t *testing.T) {
	const keyID = "1234abcd-12ab-34cd-56ef-1234567890ab"
	const keyARN = "arn:aws:kms:us-west-2:123456789012:key/" + keyID
	const otherKey = "arn:aws:kms:us-west-2:123456789012:key/ffffffff-12ab-34cd-56ef-1234567890ab"
	viaSQS := iampolicy.Context{"kms:ViaService": {"sqs.us-west-2.amazonaws.com"}, "aws:RequestedRegion": {"us-west-2"}}
	direct := iampolicy.Context{"aws:RequestedRegion": {"us-west-2"}}
	withAlias := func(c iampolicy.Context, alias string) iampolicy.Context {
		out := iampolicy.Context{"kms:ResourceAliases": {alias}}
		for k, v := range c {
			out[k] = v
		}
		return out
	}
	for _, key := range []string{keyARN, keyID, "alias/dovetail-queue", "arn:aws:kms:us-west-2:123456789012:alias/dovetail-queue"} {
		doc, err := provider.ControllerPolicy(provider.ControllerPolicyInput{Region: "us-west-2", AccountID: "123456789012", ClusterName: "demo",
			NodeRoleARN: "arn:aws:iam::123456789012:role/nodes", InterruptionQueueARN: "arn:aws:sqs:us-west-2:123456789012:demo",
			InterruptionQueueKMSKey: key, AMISSMParameterARNs: []string{"arn:aws:ssm:us-west-2:123456789012:parameter/golden/ami-*"}})
		if err != nil {
			t.Fatal(err)
		}
		p, err := iampolicy.Parse(doc)
		if err != nil {
			t.Fatal(err)
		}
		byAlias := strings.Contains(key, "alias/")
		ctx := func(c iampolicy.Context, alias string) iampolicy.Context {
			if byAlias {
				return withAlias(c, alias)
			}
			return c
		}
		for _, tc := range []struct {
			name string
			req  iampolicy.Request
			want bool
		}{
			{"decrypt the queue's messages", iampolicy.Request{Action: "kms:Decrypt", Resource: keyARN, Context: ctx(viaSQS, "alias/dovetail-queue")}, true},
			{"decrypt with the key directly", iampolicy.Request{Action: "kms:Decrypt", Resource: keyARN, Context: ctx(direct, "alias/dovetail-queue")}, false},
			{"decrypt with another key", iampolicy.Request{Action: "kms:Decrypt", Resource: otherKey, Context: ctx(viaSQS, "alias/other")}, false},
			{"encrypt with the key", iampolicy.Request{Action: "kms:Encrypt", Resource: keyARN, Context: ctx(viaSQS, "alias/dovetail-queue")}, false},
			{"read the user's AMI parameter", iampolicy.Request{Action: "ssm:GetParameter", Resource: "arn:aws:ssm:us-west-2:123456789012:parameter/golden/ami-al2023", Context: direct}, true},
			{"read AWS's public parameters", iampolicy.Request{Action: "ssm:GetParameter", Resource: "arn:aws:ssm:us-west-2::parameter/aws/service/eks/optimized-ami/1.33/amazon-linux-2023/x86_64/standard/recommended/image_id", Context: direct}, true},
			{"read another parameter", iampolicy.Request{Action: "ssm:GetParameter", Resource: "arn:aws:ssm:us-west-2:123456789012:parameter/secrets/db", Context: direct}, false},
		} {
			if d := p.Evaluate(tc.req); d.Allowed != tc.want {
				t.Errorf("key %s: %s: allowed = %v, want %v (%+v)", key, tc.name, d.Allowed, tc.want, d)
			}
		}
	}
}

// TestControllerPolicyFitsAManagedPolicy: the data source's JSON is meant for
// aws_iam_policy, which IAM caps at 6,144 characters; the longest EKS cluster name
// (100 characters) in the longest partition and region must still fit.
func TestControllerPolicyFitsAManagedPolicy(t *testing.T) {
	name := strings.Repeat("c", 100)
	doc, err := provider.ControllerPolicy(provider.ControllerPolicyInput{Partition: "aws-us-gov", Region: "us-gov-west-1", AccountID: "123456789012",
		ClusterName: name, NodeRoleARN: "arn:aws-us-gov:iam::123456789012:role/KarpenterNodeRole-" + name,
		InterruptionQueueARN: "arn:aws-us-gov:sqs:us-gov-west-1:123456789012:" + name})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(strings.Join(strings.Fields(doc), "")); n > 6144 {
		t.Errorf("the policy is %d characters; IAM refuses managed policies over 6,144", n)
	}
}
