package iampolicy_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	iamtypes "github.com/aws/aws-sdk-go-v2/service/iam/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/ssm"

	"github.com/dovetail-sh/dovetail/tests/iampolicy"
)

// A call recorded on the wire (a controller process's) is authorized exactly as the
// same call recorded through the SDK: each operation the mappings know, sent by the
// real SDK through Proxy, decodes back into the requests its typed input makes.
func TestProxyDecodesWhatTheSDKSends(t *testing.T) {
	lt := &iampolicy.LaunchTemplate{ID: "lt-0123", Name: "dovetail/demo/0123456789abcdef", Tags: templateTags, ImageID: "ami-0123", SecurityGroupIDs: []string{"sg-0123"}, InstanceProfileName: profile}
	// The emulator's answers do not matter: the call is recorded before it is sent on.
	stub := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { http.Error(w, "stub", http.StatusBadRequest) }))
	defer stub.Close()
	wire := iampolicy.NewRecorder(iampolicy.Options{AccountID: account, Lookup: newLookup(lt)})
	url := wire.Proxy(t, stub.URL)
	creds := credentials.NewStaticCredentialsProvider("testing", "testing", "")
	ec2c := ec2.New(ec2.Options{Region: region, BaseEndpoint: &url, Credentials: creds, RetryMaxAttempts: 1})
	iamc := iam.New(iam.Options{Region: "us-east-1", BaseEndpoint: &url, Credentials: creds, RetryMaxAttempts: 1})
	ssmc := ssm.New(ssm.Options{Region: region, BaseEndpoint: &url, Credentials: creds, RetryMaxAttempts: 1})
	sqsc := sqs.New(sqs.Options{Region: region, BaseEndpoint: &url, Credentials: creds, RetryMaxAttempts: 1})
	eksc := eks.New(eks.Options{Region: region, BaseEndpoint: &url, Credentials: creds, RetryMaxAttempts: 1})
	ctx := context.Background()
	queueURL := aws.String("https://sqs.us-west-2.amazonaws.com/123456789012/demo-interruption")
	cases := []struct {
		service, op, region string
		input               any
		send                func()
	}{
		{"EC2", "CreateFleet", region, createFleet(ec2types.DefaultTargetCapacityTypeSpot, true), func() { _, _ = ec2c.CreateFleet(ctx, createFleet(ec2types.DefaultTargetCapacityTypeSpot, true)) }},
		{"EC2", "CreateLaunchTemplate", region, createLaunchTemplate(true), func() { _, _ = ec2c.CreateLaunchTemplate(ctx, createLaunchTemplate(true)) }},
		{"EC2", "DeleteLaunchTemplate", region, &ec2.DeleteLaunchTemplateInput{LaunchTemplateName: aws.String(lt.Name)}, func() {
			_, _ = ec2c.DeleteLaunchTemplate(ctx, &ec2.DeleteLaunchTemplateInput{LaunchTemplateName: aws.String(lt.Name)})
		}},
		{"EC2", "TerminateInstances", region, &ec2.TerminateInstancesInput{InstanceIds: []string{"i-0123", "i-karpenters"}}, func() {
			_, _ = ec2c.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: []string{"i-0123", "i-karpenters"}})
		}},
		{"EC2", "DescribeInstances", region, &ec2.DescribeInstancesInput{}, func() { _, _ = ec2c.DescribeInstances(ctx, &ec2.DescribeInstancesInput{}) }},
		{"IAM", "CreateInstanceProfile", "us-east-1", &iam.CreateInstanceProfileInput{InstanceProfileName: aws.String(profile), Tags: []iamtypes.Tag{{Key: aws.String("kubernetes.io/cluster/demo"), Value: aws.String("owned")}}}, func() {
			_, _ = iamc.CreateInstanceProfile(ctx, &iam.CreateInstanceProfileInput{InstanceProfileName: aws.String(profile), Tags: []iamtypes.Tag{{Key: aws.String("kubernetes.io/cluster/demo"), Value: aws.String("owned")}}})
		}},
		{"IAM", "AddRoleToInstanceProfile", "us-east-1", &iam.AddRoleToInstanceProfileInput{InstanceProfileName: aws.String(profile), RoleName: aws.String("KarpenterNodeRole-demo")}, func() {
			_, _ = iamc.AddRoleToInstanceProfile(ctx, &iam.AddRoleToInstanceProfileInput{InstanceProfileName: aws.String(profile), RoleName: aws.String("KarpenterNodeRole-demo")})
		}},
		{"IAM", "GetInstanceProfile", "us-east-1", &iam.GetInstanceProfileInput{InstanceProfileName: aws.String(profile)}, func() {
			_, _ = iamc.GetInstanceProfile(ctx, &iam.GetInstanceProfileInput{InstanceProfileName: aws.String(profile)})
		}},
		{"SSM", "GetParameter", region, &ssm.GetParameterInput{Name: aws.String("/aws/service/eks/optimized-ami/1.33/amazon-linux-2023/x86_64/standard/recommended/image_id")}, func() {
			_, _ = ssmc.GetParameter(ctx, &ssm.GetParameterInput{Name: aws.String("/aws/service/eks/optimized-ami/1.33/amazon-linux-2023/x86_64/standard/recommended/image_id")})
		}},
		{"SQS", "ReceiveMessage", region, &sqs.ReceiveMessageInput{QueueUrl: queueURL, MaxNumberOfMessages: 10}, func() {
			_, _ = sqsc.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: queueURL, MaxNumberOfMessages: 10})
		}},
		{"SQS", "DeleteMessage", region, &sqs.DeleteMessageInput{QueueUrl: queueURL, ReceiptHandle: aws.String("h")}, func() {
			_, _ = sqsc.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: queueURL, ReceiptHandle: aws.String("h")})
		}},
		{"EKS", "DescribeCluster", region, &eks.DescribeClusterInput{Name: aws.String(cluster)}, func() { _, _ = eksc.DescribeCluster(ctx, &eks.DescribeClusterInput{Name: aws.String(cluster)}) }},
	}
	sdk := iampolicy.NewRecorder(iampolicy.Options{AccountID: account, Lookup: newLookup(lt)})
	for i, c := range cases {
		t.Run(c.service+" "+c.op, func(t *testing.T) {
			c.send()
			calls := wire.Calls()
			if len(calls) != i+1 {
				t.Fatalf("%d calls recorded on the wire after %d sent", len(calls), i+1)
			}
			got := calls[i]
			if got.Err != nil {
				t.Fatalf("decoding %s %s: %v", c.service, c.op, got.Err)
			}
			want, err := sdk.Requests(ctx, c.service, c.op, c.region, c.input)
			if err != nil {
				t.Fatal(err)
			}
			if got.Service != c.service || got.Operation != c.op || fmt.Sprint(got.Requests) != fmt.Sprint(want) {
				t.Errorf("on the wire %s %s %v\nthrough the SDK %s %s %v", got.Service, got.Operation, got.Requests, c.service, c.op, want)
			}
			if len(want) == 0 {
				t.Errorf("no request to compare")
			}
		})
	}
}
