package iampolicy_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	iamtypes "github.com/aws/aws-sdk-go-v2/service/iam/types"
	"github.com/aws/aws-sdk-go-v2/service/pricing"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	"github.com/aws/smithy-go/middleware"

	"github.com/dovetail-sh/dovetail/provider"
	"github.com/dovetail-sh/dovetail/tests/iampolicy"
)

const (
	account  = "123456789012"
	region   = "us-west-2"
	cluster  = "demo"
	nodeRole = "arn:aws:iam::123456789012:role/KarpenterNodeRole-demo"
	queueARN = "arn:aws:sqs:us-west-2:123456789012:demo-interruption"
	profile  = "demo_123"
)

// lookup is the state of existing resources, as a test sets it.
type lookup struct {
	instances map[string]map[string]string
	templates map[string]*iampolicy.LaunchTemplate
	profiles  map[string]*iampolicy.InstanceProfile
}

func (l *lookup) InstanceTags(_ context.Context, id string) (map[string]string, error) {
	return l.instances[id], nil
}

func (l *lookup) LaunchTemplate(_ context.Context, id, name, _ string) (*iampolicy.LaunchTemplate, error) {
	for _, lt := range l.templates {
		if (id != "" && lt.ID == id) || (name != "" && lt.Name == name) {
			return lt, nil
		}
	}
	return nil, nil
}

func (l *lookup) InstanceProfile(_ context.Context, name string) (*iampolicy.InstanceProfile, error) {
	return l.profiles[name], nil
}

func (l *lookup) RoleARN(_ context.Context, name string) (string, error) {
	return "arn:aws:iam::" + account + ":role/" + name, nil
}

func policy(t *testing.T) string {
	t.Helper()
	doc, err := provider.ControllerPolicy(provider.ControllerPolicyInput{Region: region, AccountID: account, ClusterName: cluster,
		NodeRoleARN: nodeRole, InterruptionQueueARN: queueARN})
	if err != nil {
		t.Fatal(err)
	}
	return doc
}

func tags(m map[string]string) []ec2types.Tag {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]ec2types.Tag, 0, len(keys))
	for _, k := range keys {
		out = append(out, ec2types.Tag{Key: aws.String(k), Value: aws.String(m[k])})
	}
	return out
}

// launchTags are the tags the controller puts on what a launch creates
// (CloudProvider.instanceTags): the class's own, then the cluster's, pool's and claim's.
func launchTags() map[string]string {
	return map[string]string{
		"team":                           "billing",
		"kubernetes.io/cluster/demo":     "owned",
		"karpenter.k8s.aws/cluster":      cluster,
		"eks:eks-cluster-name":           cluster,
		"karpenter.sh/nodepool":          "general",
		"karpenter.sh/nodeclaim":         "general-abcde",
		"karpenter.k8s.aws/ec2nodeclass": "default",
		"Name":                           "general-abcde",
	}
}

// templateTags are the launch template's own tags (LaunchTemplates.create): the
// pool's (CloudProvider.poolTags) with the cluster and class.
var templateTags = map[string]string{"karpenter.k8s.aws/cluster": cluster, "karpenter.k8s.aws/ec2nodeclass": "default", "team": "billing",
	"kubernetes.io/cluster/demo": "owned", "eks:eks-cluster-name": cluster, "karpenter.sh/nodepool": "general"}

// karpenterInstanceTags are what Karpenter v1 puts on an instance it launches: no
// karpenter.k8s.aws/cluster tag.
var karpenterInstanceTags = map[string]string{"kubernetes.io/cluster/demo": "owned", "karpenter.sh/nodepool": "general", "karpenter.sh/nodeclaim": "general-x1",
	"eks:eks-cluster-name": cluster, "karpenter.k8s.aws/ec2nodeclass": "default", "Name": "general-x1"}

// createLaunchTemplate is the controller's CreateLaunchTemplate input; tagged adds
// the launch's tags for the network interface and, for spot, the spot request, as
// Karpenter tags them through its templates.
func createLaunchTemplate(tagged bool) *ec2.CreateLaunchTemplateInput {
	data := &ec2types.RequestLaunchTemplateData{
		ImageId:            aws.String("ami-0123"),
		IamInstanceProfile: &ec2types.LaunchTemplateIamInstanceProfileSpecificationRequest{Name: aws.String(profile)},
		SecurityGroupIds:   []string{"sg-0123"},
	}
	if tagged {
		data.TagSpecifications = []ec2types.LaunchTemplateTagSpecificationRequest{
			{ResourceType: ec2types.ResourceTypeNetworkInterface, Tags: tags(launchTags())},
			{ResourceType: ec2types.ResourceTypeSpotInstancesRequest, Tags: tags(launchTags())},
		}
	}
	return &ec2.CreateLaunchTemplateInput{
		LaunchTemplateName: aws.String("dovetail/demo/0123456789abcdef"),
		LaunchTemplateData: data,
		TagSpecifications:  []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeLaunchTemplate, Tags: tags(templateTags)}},
	}
}

// createFleet is the controller's CreateFleet input (CloudProvider.launch); tagged
// tags the fleet too.
func createFleet(capacityType ec2types.DefaultTargetCapacityType, tagged bool) *ec2.CreateFleetInput {
	specs := []ec2types.TagSpecification{
		{ResourceType: ec2types.ResourceTypeInstance, Tags: tags(launchTags())},
		{ResourceType: ec2types.ResourceTypeVolume, Tags: tags(launchTags())},
	}
	if tagged {
		specs = append(specs, ec2types.TagSpecification{ResourceType: ec2types.ResourceTypeFleet, Tags: tags(launchTags())})
	}
	return &ec2.CreateFleetInput{
		Type: ec2types.FleetTypeInstant,
		LaunchTemplateConfigs: []ec2types.FleetLaunchTemplateConfigRequest{{
			LaunchTemplateSpecification: &ec2types.FleetLaunchTemplateSpecificationRequest{LaunchTemplateName: aws.String("dovetail/demo/0123456789abcdef"), Version: aws.String("$Latest")},
			Overrides: []ec2types.FleetLaunchTemplateOverridesRequest{
				{InstanceType: "m5.large", SubnetId: aws.String("subnet-a"), AvailabilityZone: aws.String("us-west-2a"), ImageId: aws.String("ami-0123")},
				{InstanceType: "m5.large", SubnetId: aws.String("subnet-b"), AvailabilityZone: aws.String("us-west-2b"), ImageId: aws.String("ami-0123")},
			},
		}},
		TargetCapacitySpecification: &ec2types.TargetCapacitySpecificationRequest{TotalTargetCapacity: aws.Int32(1), DefaultTargetCapacityType: capacityType},
		TagSpecifications:           specs,
	}
}

// templateFromCreate is what describing the created template returns.
func templateFromCreate(in *ec2.CreateLaunchTemplateInput) *iampolicy.LaunchTemplate {
	lt := &iampolicy.LaunchTemplate{ID: "lt-0123", Name: aws.ToString(in.LaunchTemplateName), Tags: templateTags,
		TagSpecifications: map[string]map[string]string{}, InstanceProfileName: profile, SecurityGroupIDs: []string{"sg-0123"}, ImageID: "ami-0123"}
	for _, s := range in.LaunchTemplateData.TagSpecifications {
		lt.TagSpecifications[string(s.ResourceType)] = launchTags()
	}
	return lt
}

func newLookup(template *iampolicy.LaunchTemplate) *lookup {
	return &lookup{
		instances: map[string]map[string]string{"i-0123": launchTags(), "i-karpenters": karpenterInstanceTags,
			"i-cluster-tag-only": {"karpenter.k8s.aws/cluster": cluster}, "i-no-nodepool": {"kubernetes.io/cluster/demo": "owned", "karpenter.k8s.aws/cluster": cluster}},
		templates: map[string]*iampolicy.LaunchTemplate{template.ID: template},
		profiles: map[string]*iampolicy.InstanceProfile{profile: {ARN: "arn:aws:iam::" + account + ":instance-profile/" + profile,
			Tags:     map[string]string{"kubernetes.io/cluster/demo": "owned", "eks:eks-cluster-name": cluster, "karpenter.k8s.aws/ec2nodeclass": "default", "topology.kubernetes.io/region": region},
			RoleARNs: []string{nodeRole}}},
	}
}

// denials checks the requests of one call against the shipped policy.
func denials(t *testing.T, rec *iampolicy.Recorder, service, operation string, input any) (allowed []string, denied []string) {
	t.Helper()
	reqs, err := rec.Requests(context.Background(), service, operation, region, input)
	if err != nil {
		t.Fatal(err)
	}
	p, err := iampolicy.Parse(policy(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range reqs {
		if d := p.Evaluate(r); d.Allowed {
			allowed = append(allowed, r.String())
		} else {
			denied = append(denied, r.String())
		}
	}
	return allowed, denied
}

func TestCreateFleetAsTheControllerTagsIt(t *testing.T) {
	for _, capacityType := range []ec2types.DefaultTargetCapacityType{ec2types.DefaultTargetCapacityTypeOnDemand, ec2types.DefaultTargetCapacityTypeSpot} {
		t.Run(string(capacityType), func(t *testing.T) {
			rec := iampolicy.NewRecorder(iampolicy.Options{AccountID: account, Lookup: newLookup(templateFromCreate(createLaunchTemplate(true)))})
			allowed, denied := denials(t, rec, "EC2", "CreateFleet", createFleet(capacityType, true))
			if len(denied) > 0 {
				t.Errorf("the shipped policy denies %s", strings.Join(denied, "; "))
			}
			all := strings.Join(allowed, "\n")
			want := []string{
				"ec2:CreateFleet on arn:aws:ec2:us-west-2:123456789012:fleet/new",
				"ec2:CreateTags on arn:aws:ec2:us-west-2:123456789012:fleet/new",
				"ec2:CreateFleet on arn:aws:ec2:us-west-2:123456789012:instance/new",
				"ec2:CreateTags on arn:aws:ec2:us-west-2:123456789012:instance/new",
				"ec2:CreateFleet on arn:aws:ec2:us-west-2:123456789012:volume/new",
				"ec2:CreateFleet on arn:aws:ec2:us-west-2:123456789012:network-interface/new",
				"ec2:CreateTags on arn:aws:ec2:us-west-2:123456789012:network-interface/new",
				"ec2:CreateFleet on arn:aws:ec2:us-west-2:123456789012:launch-template/lt-0123",
				"ec2:CreateFleet on arn:aws:ec2:us-west-2:123456789012:subnet/subnet-a",
				"ec2:CreateFleet on arn:aws:ec2:us-west-2:123456789012:subnet/subnet-b",
				"ec2:CreateFleet on arn:aws:ec2:us-west-2:123456789012:security-group/sg-0123",
				"ec2:CreateFleet on arn:aws:ec2:us-west-2::image/ami-0123",
				"iam:PassRole on " + nodeRole,
			}
			if capacityType == ec2types.DefaultTargetCapacityTypeSpot {
				want = append(want, "ec2:CreateFleet on arn:aws:ec2:us-west-2:123456789012:spot-instances-request/new")
			} else if strings.Contains(all, "spot-instances-request") {
				t.Errorf("an on-demand fleet is authorized on a spot request:\n%s", all)
			}
			for _, w := range want {
				if !strings.Contains(all, w) {
					t.Errorf("no %s among the requests:\n%s", w, all)
				}
			}
		})
	}
}

// TestCreateFleetUntaggedIsDenied is defect 1 of issue 13: the fleet, network
// interface and spot request untagged, as the controller launched before, and the
// shipped policy (rightly) refuses them.
func TestCreateFleetUntaggedIsDenied(t *testing.T) {
	rec := iampolicy.NewRecorder(iampolicy.Options{AccountID: account, Lookup: newLookup(templateFromCreate(createLaunchTemplate(false)))})
	_, denied := denials(t, rec, "EC2", "CreateFleet", createFleet(ec2types.DefaultTargetCapacityTypeSpot, false))
	got := strings.Join(denied, "\n")
	for _, kind := range []string{"fleet", "network-interface", "spot-instances-request"} {
		if !strings.Contains(got, "ec2:CreateFleet on arn:aws:ec2:us-west-2:123456789012:"+kind+"/new") {
			t.Errorf("an untagged %s is allowed; denied only:\n%s", kind, got)
		}
	}
	for _, kind := range []string{"instance", "volume"} {
		if strings.Contains(got, ":"+kind+"/") {
			t.Errorf("a tagged %s is denied:\n%s", kind, got)
		}
	}
}

// TestTemplateTagsComeFromTheRecordedCreate: a template created through the
// recorder needs no lookup to authorize launches from it.
func TestTemplateTagsComeFromTheRecordedCreate(t *testing.T) {
	rec := iampolicy.NewRecorder(iampolicy.Options{AccountID: account, Lookup: newLookup(&iampolicy.LaunchTemplate{ID: "lt-other"})})
	client := fakeEC2(t, rec, map[string]string{
		"CreateLaunchTemplate": `<CreateLaunchTemplateResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/"><launchTemplate><launchTemplateId>lt-0123</launchTemplateId><launchTemplateName>dovetail/demo/0123456789abcdef</launchTemplateName></launchTemplate></CreateLaunchTemplateResponse>`,
	})
	if _, err := client.CreateLaunchTemplate(context.Background(), createLaunchTemplate(true)); err != nil {
		t.Fatal(err)
	}
	_, denied := denials(t, rec, "EC2", "CreateFleet", createFleet(ec2types.DefaultTargetCapacityTypeSpot, true))
	if len(denied) > 0 {
		t.Errorf("denied %v", denied)
	}
	calls := rec.Calls()
	if len(calls) != 1 || calls[0].Operation != "CreateLaunchTemplate" || calls[0].Region != region || calls[0].Err != nil {
		t.Fatalf("recorded %+v", calls)
	}
	var actions []string
	for _, r := range calls[0].Requests {
		actions = append(actions, r.String()+" "+fmt.Sprint(r.Context["ec2:CreateAction"]))
	}
	if got := strings.Join(actions, "; "); got != "ec2:CreateLaunchTemplate on arn:aws:ec2:us-west-2:123456789012:launch-template/new []; "+
		"ec2:CreateTags on arn:aws:ec2:us-west-2:123456789012:launch-template/new [CreateLaunchTemplate]" {
		t.Errorf("CreateLaunchTemplate requests: %s", got)
	}
}

// fakeEC2 is an EC2 client instrumented by rec whose API answers each operation
// with the given body (an empty response for others).
func fakeEC2(t *testing.T, rec *iampolicy.Recorder, bodies map[string]string) *ec2.Client {
	t.Helper()
	return ec2.New(ec2.Options{
		Region: region, BaseEndpoint: aws.String("http://127.0.0.1:1"),
		Credentials: credentials.NewStaticCredentialsProvider("testing", "testing", ""),
		HTTPClient: doer(func(r *http.Request) (*http.Response, error) {
			raw, _ := io.ReadAll(r.Body)
			op := ""
			for _, kv := range strings.Split(string(raw), "&") {
				if v, ok := strings.CutPrefix(kv, "Action="); ok {
					op = v
				}
			}
			body, ok := bodies[op]
			if !ok {
				body = fmt.Sprintf(`<%sResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/"></%sResponse>`, op, op)
			}
			return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"text/xml"}}, Body: io.NopCloser(strings.NewReader(body)), Request: r}, nil
		}),
		APIOptions: []func(*middleware.Stack) error{rec.APIOption},
	})
}

func TestUnmappedOperationIsAnError(t *testing.T) {
	rec := iampolicy.NewRecorder(iampolicy.Options{AccountID: account})
	client := fakeEC2(t, rec, nil)
	if _, err := client.DescribeVpcs(context.Background(), &ec2.DescribeVpcsInput{}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.DescribeInstances(context.Background(), &ec2.DescribeInstancesInput{}); err != nil {
		t.Fatal(err)
	}
	calls := rec.Calls()
	if len(calls) != 2 || calls[0].Err == nil || !strings.Contains(calls[0].Err.Error(), "DescribeVpcs") || calls[1].Err != nil {
		t.Fatalf("recorded %+v; want DescribeVpcs unmapped and DescribeInstances mapped", calls)
	}
	rep, err := iampolicy.Evaluate(policy(t), calls)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Unchecked) != 1 || len(rep.Denied) != 0 || rep.Requests["ec2:DescribeInstances"] != 1 {
		t.Errorf("report %+v", rep)
	}
}

func TestMappings(t *testing.T) {
	lt := &iampolicy.LaunchTemplate{ID: "lt-0123", Name: "dovetail/demo/0123456789abcdef", Tags: templateTags}
	profileTags := map[string]string{"kubernetes.io/cluster/demo": "owned", "eks:eks-cluster-name": cluster,
		"karpenter.k8s.aws/ec2nodeclass": "default", "topology.kubernetes.io/region": region}
	rec := iampolicy.NewRecorder(iampolicy.Options{AccountID: account, Lookup: newLookup(lt),
		SSMParameterAliases: map[string]string{"/dovetail-test/service": "/aws/service"}})
	profileARN := "arn:aws:iam::123456789012:instance-profile/" + profile
	for _, tc := range []struct {
		service, op string
		input       any
		want        []string // action on resource, then the context keys to check as k=v
		denied      bool
	}{
		{"EC2", "DescribeInstances", &ec2.DescribeInstancesInput{}, []string{"ec2:DescribeInstances on *", "aws:RequestedRegion=us-west-2"}, false},
		{"EC2", "TerminateInstances", &ec2.TerminateInstancesInput{InstanceIds: []string{"i-0123"}},
			[]string{"ec2:TerminateInstances on arn:aws:ec2:us-west-2:123456789012:instance/i-0123", "aws:ResourceTag/kubernetes.io/cluster/demo=owned", "aws:ResourceTag/karpenter.sh/nodepool=general"}, false},
		// A cluster taken over from Karpenter: its instances carry Karpenter's tags only.
		{"EC2", "TerminateInstances", &ec2.TerminateInstancesInput{InstanceIds: []string{"i-karpenters"}},
			[]string{"ec2:TerminateInstances on arn:aws:ec2:us-west-2:123456789012:instance/i-karpenters", "aws:ResourceTag/kubernetes.io/cluster/demo=owned"}, false},
		// Neither the cluster tag of ours alone, nor the cluster without a pool, is enough.
		{"EC2", "TerminateInstances", &ec2.TerminateInstancesInput{InstanceIds: []string{"i-cluster-tag-only"}},
			[]string{"ec2:TerminateInstances on arn:aws:ec2:us-west-2:123456789012:instance/i-cluster-tag-only"}, true},
		{"EC2", "TerminateInstances", &ec2.TerminateInstancesInput{InstanceIds: []string{"i-no-nodepool"}},
			[]string{"ec2:TerminateInstances on arn:aws:ec2:us-west-2:123456789012:instance/i-no-nodepool"}, true},
		{"EC2", "TerminateInstances", &ec2.TerminateInstancesInput{InstanceIds: []string{"i-someone-elses"}},
			[]string{"ec2:TerminateInstances on arn:aws:ec2:us-west-2:123456789012:instance/i-someone-elses"}, true},
		{"EC2", "DeleteLaunchTemplate", &ec2.DeleteLaunchTemplateInput{LaunchTemplateName: aws.String(lt.Name)},
			[]string{"ec2:DeleteLaunchTemplate on arn:aws:ec2:us-west-2:123456789012:launch-template/lt-0123", "aws:ResourceTag/kubernetes.io/cluster/demo=owned"}, false},
		{"EC2", "CreateLaunchTemplate", &ec2.CreateLaunchTemplateInput{LaunchTemplateName: aws.String("x"),
			TagSpecifications: []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeLaunchTemplate, Tags: tags(map[string]string{"karpenter.k8s.aws/cluster": "other"})}}},
			[]string{"ec2:CreateLaunchTemplate on arn:aws:ec2:us-west-2:123456789012:launch-template/new", "aws:RequestTag/karpenter.k8s.aws/cluster=other"}, true},
		{"SSM", "GetParameter", &ssm.GetParameterInput{Name: aws.String("/dovetail-test/service/eks/optimized-ami/1.33/amazon-linux-2023/x86_64/standard/recommended/image_id")},
			[]string{"ssm:GetParameter on arn:aws:ssm:us-west-2::parameter/aws/service/eks/optimized-ami/1.33/amazon-linux-2023/x86_64/standard/recommended/image_id"}, false},
		{"SSM", "GetParameter", &ssm.GetParameterInput{Name: aws.String("/mine/image")},
			[]string{"ssm:GetParameter on arn:aws:ssm:us-west-2:123456789012:parameter/mine/image"}, true},
		{"IAM", "GetInstanceProfile", &iam.GetInstanceProfileInput{InstanceProfileName: aws.String(profile)},
			[]string{"iam:GetInstanceProfile on " + profileARN, "aws:RequestedRegion=us-east-1"}, false},
		{"IAM", "CreateInstanceProfile", &iam.CreateInstanceProfileInput{InstanceProfileName: aws.String("demo_456"), Tags: iamTags(profileTags)},
			[]string{"iam:CreateInstanceProfile on arn:aws:iam::123456789012:instance-profile/demo_456", "aws:RequestTag/topology.kubernetes.io/region=us-west-2",
				"iam:TagInstanceProfile on arn:aws:iam::123456789012:instance-profile/demo_456"}, false},
		{"IAM", "CreateInstanceProfile", &iam.CreateInstanceProfileInput{InstanceProfileName: aws.String("demo_456")},
			[]string{"iam:CreateInstanceProfile on arn:aws:iam::123456789012:instance-profile/demo_456"}, true},
		{"IAM", "AddRoleToInstanceProfile", &iam.AddRoleToInstanceProfileInput{InstanceProfileName: aws.String(profile), RoleName: aws.String("KarpenterNodeRole-demo")},
			[]string{"iam:AddRoleToInstanceProfile on " + profileARN, "aws:ResourceTag/karpenter.k8s.aws/ec2nodeclass=default",
				"iam:PassRole on " + nodeRole, "iam:PassedToService=ec2.amazonaws.com"}, false},
		{"IAM", "AddRoleToInstanceProfile", &iam.AddRoleToInstanceProfileInput{InstanceProfileName: aws.String(profile), RoleName: aws.String("Admin")},
			[]string{"iam:PassRole on arn:aws:iam::123456789012:role/Admin"}, true},
		{"IAM", "RemoveRoleFromInstanceProfile", &iam.RemoveRoleFromInstanceProfileInput{InstanceProfileName: aws.String(profile), RoleName: aws.String("KarpenterNodeRole-demo")},
			[]string{"iam:RemoveRoleFromInstanceProfile on " + profileARN}, false},
		{"IAM", "DeleteInstanceProfile", &iam.DeleteInstanceProfileInput{InstanceProfileName: aws.String("someone-elses")},
			[]string{"iam:DeleteInstanceProfile on arn:aws:iam::123456789012:instance-profile/someone-elses"}, true},
		{"EKS", "DescribeCluster", &eks.DescribeClusterInput{Name: aws.String(cluster)}, []string{"eks:DescribeCluster on arn:aws:eks:us-west-2:123456789012:cluster/demo"}, false},
		{"EKS", "DescribeCluster", &eks.DescribeClusterInput{Name: aws.String("other")}, []string{"eks:DescribeCluster on arn:aws:eks:us-west-2:123456789012:cluster/other"}, true},
		{"Pricing", "GetProducts", &pricing.GetProductsInput{}, []string{"pricing:GetProducts on *"}, false},
		{"SQS", "GetQueueUrl", &sqs.GetQueueUrlInput{QueueName: aws.String("demo-interruption")}, []string{"sqs:GetQueueUrl on " + queueARN}, false},
		{"SQS", "ReceiveMessage", &sqs.ReceiveMessageInput{QueueUrl: aws.String("http://127.0.0.1:5000/123456789012/demo-interruption")}, []string{"sqs:ReceiveMessage on " + queueARN}, false},
		{"SQS", "DeleteMessage", &sqs.DeleteMessageInput{QueueUrl: aws.String("https://sqs.us-west-2.amazonaws.com/123456789012/other")},
			[]string{"sqs:DeleteMessage on arn:aws:sqs:us-west-2:123456789012:other"}, true},
	} {
		t.Run(tc.service+" "+tc.op, func(t *testing.T) {
			reqs, err := rec.Requests(context.Background(), tc.service, tc.op, region, tc.input)
			if err != nil {
				t.Fatal(err)
			}
			var lines []string
			for _, r := range reqs {
				lines = append(lines, r.String())
				for k, v := range r.Context {
					lines = append(lines, k+"="+strings.Join(v, ","))
				}
			}
			for _, w := range tc.want {
				found := false
				for _, l := range lines {
					found = found || l == w
				}
				if !found {
					t.Errorf("no %q in\n%s", w, strings.Join(lines, "\n"))
				}
			}
			_, denied := denials(t, rec, tc.service, tc.op, tc.input)
			if (len(denied) > 0) != tc.denied {
				t.Errorf("denied %v; want denied: %v", denied, tc.denied)
			}
		})
	}
}

func iamTags(m map[string]string) []iamtypes.Tag {
	var out []iamtypes.Tag
	for _, t := range tags(m) {
		out = append(out, iamtypes.Tag{Key: t.Key, Value: t.Value})
	}
	return out
}

type doer func(*http.Request) (*http.Response, error)

func (d doer) Do(r *http.Request) (*http.Response, error) { return d(r) }
