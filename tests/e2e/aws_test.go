package e2e

import (
	"context"
	"encoding/base64"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	ebtypes "github.com/aws/aws-sdk-go-v2/service/eventbridge/types"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go/middleware"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	awsv1 "github.com/dovetail-sh/dovetail/controller/apis/aws/v1"
	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	dtaws "github.com/dovetail-sh/dovetail/controller/cloudprovider/aws"
	"github.com/dovetail-sh/dovetail/controller/cloudprovider/aws/nodeclass"
	"github.com/dovetail-sh/dovetail/controller/metrics"
	"github.com/dovetail-sh/dovetail/controller/operator"
	"github.com/dovetail-sh/dovetail/controller/scheduling"
	"github.com/dovetail-sh/dovetail/provider"
	"github.com/dovetail-sh/dovetail/tests/iampolicy"
	"github.com/dovetail-sh/dovetail/tests/localstack"
	"github.com/dovetail-sh/dovetail/tests/testenv"
)

// motoAccount is the account the emulator puts everything in.
const motoAccount = "123456789012"

// TestAWSEndToEnd runs the controller with the AWS provider against the emulator:
// instances it launches become Nodes through the kubelet stand-in, pods run on them,
// and when the work is gone every instance is terminated.
func TestAWSEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the whole local stack and moto_server")
	}
	ctx := context.Background()
	cluster := startAWSCluster(t)
	c, clients, standIn, endpoint, events := cluster.client, cluster.clients, cluster.standIn, cluster.eksEndpoint, cluster.events
	must(t, c.Create(ctx, localstack.NodePool("default",
		localstack.Requirement(v1.LabelCapacityType, v1.OpIn, v1.CapacityTypeSpot),
		localstack.Requirement(v1.LabelInstanceCategory, v1.OpIn, "c", "m", "r"))))
	must(t, c.Create(ctx, localstack.Deployment("inflate", 0, "1", "1Gi")))

	t.Run("scale to 50 on EC2 instances", func(t *testing.T) {
		t.Cleanup(func() {
			if t.Failed() {
				dumpCluster(t, c)
			}
		})
		scale(t, c, "inflate", 50)
		pods := allRunning(t, c, "inflate", 50, 180*time.Second)
		verifyPlacement(t, c, pods, "default")
		nodes := map[string]bool{}
		for _, p := range pods {
			nodes[p.Spec.NodeName] = true
		}
		for name := range nodes {
			node := &corev1.Node{}
			must(t, c.Get(ctx, client.ObjectKey{Name: name}, node))
			id := node.Spec.ProviderID[strings.LastIndex(node.Spec.ProviderID, "/")+1:]
			out, err := clients.EC2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{id}})
			must(t, err)
			inst := out.Reservations[0].Instances[0]
			if string(inst.InstanceType) != node.Labels[v1.LabelInstanceType] || aws.ToString(inst.Placement.AvailabilityZone) != node.Labels[v1.LabelTopologyZone] {
				t.Errorf("node %s says %s in %s; its instance is %s in %s", name, node.Labels[v1.LabelInstanceType], node.Labels[v1.LabelTopologyZone], inst.InstanceType, aws.ToString(inst.Placement.AvailabilityZone))
			}
			tags := map[string]string{}
			for _, tag := range inst.Tags {
				tags[aws.ToString(tag.Key)] = aws.ToString(tag.Value)
			}
			claim := claimOfNode(t, c, name)
			if tags[dtaws.TagNodeClaim] != claim.Name || tags[dtaws.TagNodePool] != "default" || tags[dtaws.ClusterTag("e2e")] != "owned" {
				t.Errorf("instance %s tags %v do not name its claim %s, pool and cluster", id, tags, claim.Name)
			}
		}
		if standIn.Registered() != len(nodes) {
			t.Errorf("%d instances registered for %d nodes in use; every launched instance should host pods", standIn.Registered(), len(nodes))
		}
		templates, err := clients.EC2.DescribeLaunchTemplates(ctx, &ec2.DescribeLaunchTemplatesInput{})
		must(t, err)
		versions, err := clients.EC2.DescribeLaunchTemplateVersions(ctx, &ec2.DescribeLaunchTemplateVersionsInput{LaunchTemplateId: templates.LaunchTemplates[0].LaunchTemplateId})
		must(t, err)
		ud, _ := base64.StdEncoding.DecodeString(aws.ToString(versions.LaunchTemplateVersions[0].LaunchTemplateData.UserData))
		if !strings.Contains(string(ud), "apiServerEndpoint: "+endpoint) {
			t.Errorf("user data does not join the endpoint EKS reports (%s):\n%s", endpoint, ud)
		}
	})

	t.Run("a spot interruption warning drains the node and its pods run elsewhere", func(t *testing.T) {
		pods, err := podsOf(c, "inflate")
		must(t, err)
		victim := claimOfNode(t, c, pods[0].Spec.NodeName)
		id := victim.Status.ProviderID[strings.LastIndex(victim.Status.ProviderID, "/")+1:]
		interrupted := metrics.NodeClaimsDisrupted.WithLabelValues("interrupted", victim.Labels[v1.LabelNodePool], victim.Labels[v1.LabelCapacityType], "", metrics.TerminationMode(victim.Spec.TerminationGracePeriod))
		disrupted, drained := testutil.ToFloat64(interrupted), testutil.ToFloat64(metrics.PodsDrained.WithLabelValues("interrupted"))
		queued := queueDurations(t)
		interrupt(t, events, id)
		replacedElsewhere(t, cluster, victim, id, 60*time.Second, "the interrupted nodeclaim drained and its instance terminated")
		if observed := queueDurations(t); observed <= queued {
			t.Errorf("queue durations observed went from %d to %d; want the interruption's", queued, observed)
		}
		if got := testutil.ToFloat64(interrupted); got != disrupted+1 {
			t.Errorf("interrupted nodeclaims went from %v to %v; want one more", disrupted, got)
		}
		// The claim said why it went (its DisruptionReason), and its pods were
		// evicted under that reason.
		if got := testutil.ToFloat64(metrics.PodsDrained.WithLabelValues("interrupted")); got <= drained {
			t.Errorf("pods drained for an interruption went from %v to %v; want more", drained, got)
		}
	})

	t.Run("an instance failing its EC2 status check is replaced at once", func(t *testing.T) {
		pods, err := podsOf(c, "inflate")
		must(t, err)
		victim := claimOfNode(t, c, pods[0].Spec.NodeName)
		id := victim.Status.ProviderID[strings.LastIndex(victim.Status.ProviderID, "/")+1:]
		category := metrics.InterruptionInstanceStatusUnhealthy.WithLabelValues("InstanceStatus")
		reason := metrics.NodeClaimsDisrupted.WithLabelValues("instance_status", victim.Labels[v1.LabelNodePool], victim.Labels[v1.LabelCapacityType], "", metrics.TerminationMode(victim.Spec.TerminationGracePeriod))
		counted, disrupted := testutil.ToFloat64(category), testutil.ToFloat64(reason)
		cluster.impaired.Store(id)
		t.Cleanup(func() { cluster.impaired.Store("") })
		replacedElsewhere(t, cluster, victim, id, 3*time.Minute, "the impaired instance's nodeclaim gone and the instance terminated")
		if got := testutil.ToFloat64(category); got != counted+1 {
			t.Errorf("instance status unhealthy count went from %v to %v; want one more", counted, got)
		}
		if got := testutil.ToFloat64(reason); got != disrupted+1 {
			t.Errorf("nodeclaims disrupted for instance_status went from %v to %v; want one more", disrupted, got)
		}
		eventually(t, 30*time.Second, "an InstanceUnhealthy event on the nodeclaim", func() error {
			if len(eventsFor(t, c, metav1.NamespaceDefault, victim.Name, "InstanceUnhealthy")) == 0 {
				return fmt.Errorf("no InstanceUnhealthy event on nodeclaim %s", victim.Name)
			}
			return nil
		})
	})

	t.Run("a malformed message is deleted and counted", func(t *testing.T) {
		malformed := testutil.ToFloat64(metrics.InterruptionReceivedMessages.WithLabelValues("malformed"))
		_, err := clients.SQS.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: cluster.queueURL, MessageBody: aws.String("this is not an event")})
		must(t, err)
		eventually(t, 60*time.Second, "the malformed message counted and gone from the queue", func() error {
			if got := testutil.ToFloat64(metrics.InterruptionReceivedMessages.WithLabelValues("malformed")); got != malformed+1 {
				return fmt.Errorf("malformed messages counted: %v, want %v", got, malformed+1)
			}
			attrs, err := clients.SQS.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: cluster.queueURL,
				AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameApproximateNumberOfMessages, sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible}})
			if err != nil {
				return err
			}
			if n, invisible := attrs.Attributes["ApproximateNumberOfMessages"], attrs.Attributes["ApproximateNumberOfMessagesNotVisible"]; n != "0" || invisible != "0" {
				return fmt.Errorf("queue holds %s visible and %s in-flight messages", n, invisible)
			}
			return nil
		})
	})

	t.Run("Karpenter's metric names are served", checkKarpenterMetrics)

	t.Run("scale to zero and terminate every instance", func(t *testing.T) {
		scale(t, c, "inflate", 0)
		eventually(t, 60*time.Second, "inflate pods gone", func() error {
			pods, err := podsOf(c, "inflate")
			if err != nil || len(pods) > 0 {
				return fmt.Errorf("%d pods remain (%v)", len(pods), err)
			}
			return nil
		})
		must(t, c.DeleteAllOf(ctx, &v1.NodeClaim{}))
		eventually(t, 60*time.Second, "every nodeclaim, node and instance gone", func() error {
			claims, nodes, err := claimsAndNodes(c)
			if err != nil {
				return err
			}
			out, err := clients.EC2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{Filters: []ec2types.Filter{
				{Name: aws.String("instance-state-name"), Values: []string{"pending", "running", "stopping", "stopped"}}}})
			if err != nil {
				return err
			}
			live := 0
			for _, r := range out.Reservations {
				live += len(r.Instances)
			}
			if claims+nodes+live > 0 {
				return fmt.Errorf("%d nodeclaims, %d nodes and %d instances remain", claims, nodes, live)
			}
			return nil
		})
	})
}

// replacedElsewhere waits until the victim's claim is gone and its instance
// terminated, then for every inflate pod to run again, none on the victim's node.
func replacedElsewhere(t *testing.T, cluster *awsCluster, victim *v1.NodeClaim, id string, timeout time.Duration, what string) {
	t.Helper()
	ctx, c := context.Background(), cluster.client
	eventually(t, timeout, what, func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(victim), victim); err == nil {
			return fmt.Errorf("nodeclaim %s still exists (termination timestamp %q)", victim.Name, victim.Annotations[v1.NodeClaimTerminationTimestampAnnotationKey])
		}
		desc, err := cluster.clients.EC2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{id}})
		if err != nil {
			return err
		}
		if state := desc.Reservations[0].Instances[0].State.Name; state != ec2types.InstanceStateNameTerminated && state != ec2types.InstanceStateNameShuttingDown {
			return fmt.Errorf("instance %s is %s", id, state)
		}
		return nil
	})
	for _, p := range allRunning(t, c, "inflate", 50, 120*time.Second) {
		if p.Spec.NodeName == victim.Status.NodeName {
			t.Errorf("pod %s still runs on node %s, whose claim is gone", p.Name, victim.Status.NodeName)
		}
	}
}

// dumpCluster logs the claims, nodes and unscheduled pods, to explain a failure.
// awsCluster is the local stack with the controller on the AWS provider against
// moto: seeded VPC, an EKS cluster record, the interruption queue and its rule, the
// kubelet stand-in, and a Ready "default" EC2NodeClass.
type awsCluster struct {
	client  client.Client
	clients *dtaws.Clients
	// moto and kubeconfig are the servers' for tools a user runs (terraform).
	moto       *localstack.Moto
	kubeconfig string
	standIn    *localstack.KubeletStandIn
	// eksEndpoint is the API endpoint EKS reports for the cluster.
	eksEndpoint string
	// events puts events on the bus whose spot rule targets queueURL.
	events   *eventbridge.Client
	queueURL *string
	region   string
	// impaired is an instance ID EC2's instance status reports failing its
	// reachability check (moto reports every instance passing): the controller's
	// DescribeInstanceStatus answers are changed on their way back to it.
	impaired *atomic.Value
}

// reportImpaired makes DescribeInstanceStatus answer, for the instance ID held in
// impaired, what EC2 answers for an instance whose status check has failed for ten
// minutes. The call still goes to the emulator, and through the IAM check.
func reportImpaired(impaired *atomic.Value) func(*middleware.Stack) error {
	return func(stack *middleware.Stack) error {
		return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("e2eReportImpaired", func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
			out, md, err := next.HandleInitialize(ctx, in)
			id, _ := impaired.Load().(string)
			status, ok := out.Result.(*ec2.DescribeInstanceStatusOutput)
			if err != nil || !ok || id == "" {
				return out, md, err
			}
			for i := range status.InstanceStatuses {
				if aws.ToString(status.InstanceStatuses[i].InstanceId) == id {
					status.InstanceStatuses[i].InstanceStatus = &ec2types.InstanceStatusSummary{Status: ec2types.SummaryStatusImpaired,
						Details: []ec2types.InstanceStatusDetails{{Name: ec2types.StatusNameReachability, Status: ec2types.StatusTypeFailed, ImpairedSince: aws.Time(time.Now().Add(-10 * time.Minute))}}}
				}
			}
			return out, md, err
		}), middleware.After)
	}
}

// instanceTypes are the types the AWS provider offers the pool, as the controller
// sees them (its own provider, on the same moto and the same prices).
func (a *awsCluster) instanceTypes(t *testing.T, pool *v1.NodePool) []*scheduling.InstanceType {
	t.Helper()
	types, err := localstack.InstanceTypes(context.Background(), a.client, a.clients, "e2e", a.region, pool)
	must(t, err)
	return types
}

func startAWSCluster(t *testing.T) *awsCluster {
	t.Helper()
	impaired := &atomic.Value{}
	impaired.Store("")
	cluster := prepareAWSCluster(t, func(env awsEnv) {
		checkIAM(t, &env.opts, env.clients, env.nodeRole, env.queueARN)
		env.opts.AWSAPIOptions = append(env.opts.AWSAPIOptions, reportImpaired(impaired))
		env.stack.RunController(t, env.opts)
	})
	cluster.impaired = impaired
	return cluster
}

// awsEnv is what a controller for the AWS cluster is started with.
type awsEnv struct {
	stack              *testenv.Stack
	moto               *localstack.Moto
	clients            *dtaws.Clients
	opts               operator.Options
	nodeRole, queueARN string
}

// prepareAWSCluster starts the local stack and moto with everything a cluster on
// AWS has, and calls run to start the controller.
func prepareAWSCluster(t *testing.T, run func(awsEnv)) *awsCluster {
	t.Helper()
	if testing.Short() {
		t.Skip("starts the whole local stack and moto_server")
	}
	ctx := context.Background()
	stack := testenv.StartStack(t)
	moto := testenv.StartMoto(t)
	clients := testenv.AWSClients(t, moto, "us-west-2")
	seeded := testenv.SeedAWS(t, ctx, clients, "e2e", "10.50", "us-west-2a", "us-west-2b", "us-west-2c")
	var subnets []string
	for _, id := range seeded.Subnets {
		subnets = append(subnets, id)
	}
	// The cluster endpoint in user data is discovered from EKS, as in a real cluster.
	created, err := clients.EKS.CreateCluster(ctx, &eks.CreateClusterInput{Name: aws.String("e2e"), RoleArn: aws.String("arn:aws:iam::123456789012:role/eks"),
		ResourcesVpcConfig: &ekstypes.VpcConfigRequest{SubnetIds: subnets}})
	must(t, err)
	endpoint := aws.ToString(created.Cluster.Endpoint)

	opts := testenv.DefaultOptions(t)
	opts.CloudProvider, opts.ClusterName, opts.AWSRegion = "aws", "e2e", "us-west-2"
	opts.AWSEndpoints = operator.Endpoints{}
	for _, s := range []string{"ec2", "ssm", "iam", "eks"} {
		opts.AWSEndpoints[s] = moto.Endpoint
	}
	opts.AWSEndpoints["sqs"] = moto.Endpoint
	opts.SSMParameterPrefix = testenv.SSMPrefix
	// Interruptions reach the controller as Karpenter's do: EventBridge rules send
	// EC2 and Health events to the queue.
	queue, err := clients.SQS.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("e2e-interruption")})
	must(t, err)
	attrs, err := clients.SQS.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: queue.QueueUrl, AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn}})
	must(t, err)
	events := eventbridge.New(eventbridge.Options{Region: "us-west-2", BaseEndpoint: aws.String(moto.Endpoint), Credentials: credentials.NewStaticCredentialsProvider("testing", "testing", "")})
	_, err = events.PutRule(ctx, &eventbridge.PutRuleInput{Name: aws.String("e2e-spot"), EventPattern: aws.String(`{"source":["aws.ec2"],"detail-type":["EC2 Spot Instance Interruption Warning"]}`)})
	must(t, err)
	_, err = events.PutTargets(ctx, &eventbridge.PutTargetsInput{Rule: aws.String("e2e-spot"), Targets: []ebtypes.Target{{Id: aws.String("queue"), Arn: aws.String(attrs.Attributes["QueueArn"])}}})
	must(t, err)
	opts.InterruptionQueue = "e2e-interruption"
	opts.IsolatedVPC = true
	run(awsEnv{stack: stack, moto: moto, clients: clients, opts: opts, nodeRole: seeded.Role, queueARN: attrs.Attributes["QueueArn"]})
	c := stack.Client
	t.Cleanup(func() {
		if t.Failed() {
			dumpCluster(t, c)
		}
	})
	standIn := testenv.StartKubeletStandIn(t, c, clients.EC2, "e2e", seeded.SecurityGroup)

	class := localstack.NodeClass("default")
	class.Spec.Role = seeded.Role
	class.Spec.SubnetSelectorTerms[0].Tags["karpenter.sh/discovery"] = "e2e"
	class.Spec.SecurityGroupSelectorTerms[0].Tags["karpenter.sh/discovery"] = "e2e"
	must(t, c.Create(ctx, class))
	eventually(t, 30*time.Second, "the EC2NodeClass is Ready", func() error {
		must(t, c.Get(ctx, client.ObjectKeyFromObject(class), class))
		if !meta.IsStatusConditionTrue(class.Status.Conditions, awsv1.ConditionTypeReady) {
			return fmt.Errorf("conditions %+v", class.Status.Conditions)
		}
		return nil
	})
	return &awsCluster{client: c, clients: clients, moto: moto, kubeconfig: stack.Kubeconfig, standIn: standIn, eksEndpoint: endpoint, events: events, queueURL: queue.QueueUrl, region: "us-west-2"}
}

// checkIAM records every AWS call the controller makes and, once the test is over
// and the controller stopped, fails the test on each call the IAM policy Dovetail
// ships (dovetail_controller_policy) would deny on AWS. Call it before RunController,
// so its check runs after the controller's cleanup.
func checkIAM(t *testing.T, opts *operator.Options, clients *dtaws.Clients, nodeRole, queueARN string) {
	t.Helper()
	rec := iamRecorder(t, opts, clients, nodeRole, queueARN, func(rep *iampolicy.Report) error {
		// Every test that runs the controller in process launches: a launch that
		// was not recorded went through a client the recorder does not hook.
		if rep.Calls["EC2 CreateFleet"] == 0 {
			return fmt.Errorf("no CreateFleet call was recorded; the controller's AWS clients are not instrumented")
		}
		return nil
	})
	opts.AWSAPIOptions = append(opts.AWSAPIOptions, rec.APIOption)
}

// checkIAMOnTheWire is checkIAM for a controller that runs as its own process: its
// SDK cannot be hooked, so every AWS endpoint it is given goes through a proxy to
// target that decodes and records each call.
func checkIAMOnTheWire(t *testing.T, opts *operator.Options, clients *dtaws.Clients, nodeRole, queueARN, target string) {
	t.Helper()
	proxy := iamRecorder(t, opts, clients, nodeRole, queueARN, func(rep *iampolicy.Report) error {
		// Every endpoint goes through the proxy; a test need not launch (a
		// takeover launches nothing), but a controller that ran made calls.
		if len(rep.Calls) == 0 {
			return fmt.Errorf("no AWS call was recorded on the wire; the controller's endpoints do not go through the proxy")
		}
		return nil
	}).Proxy(t, target)
	for service := range opts.AWSEndpoints {
		opts.AWSEndpoints[service] = proxy
	}
}

// iamRecorder records the controller's AWS calls and, once the test is over, fails
// it on each call the shipped policy would deny, or that could not be checked.
func iamRecorder(t *testing.T, opts *operator.Options, clients *dtaws.Clients, nodeRole, queueARN string, recorded func(*iampolicy.Report) error) *iampolicy.Recorder {
	t.Helper()
	role, err := clients.IAM.GetRole(context.Background(), &iam.GetRoleInput{RoleName: aws.String(nodeRole)})
	must(t, err)
	policy, err := provider.ControllerPolicy(provider.ControllerPolicyInput{Region: opts.AWSRegion, AccountID: motoAccount,
		ClusterName: opts.ClusterName, NodeRoleARN: aws.ToString(role.Role.Arn), InterruptionQueueARN: queueARN})
	must(t, err)
	rec := iampolicy.NewRecorder(iampolicy.Options{AccountID: motoAccount,
		Lookup:              iampolicy.AWSLookup{EC2: clients.EC2, IAM: clients.IAM},
		SSMParameterAliases: map[string]string{testenv.SSMPrefix: nodeclass.DefaultSSMPrefix}})
	t.Cleanup(func() {
		if rep := iampolicy.Check(t, policy, rec); rep != nil {
			if err := recorded(rep); err != nil {
				t.Errorf("IAM: %v", err)
			}
		}
	})
	return rec
}

func dumpCluster(t *testing.T, c client.Client) {
	ctx := context.Background()
	var claims v1.NodeClaimList
	var nodes corev1.NodeList
	var pods corev1.PodList
	var events corev1.EventList
	_ = c.List(ctx, &claims)
	_ = c.List(ctx, &nodes)
	_ = c.List(ctx, &pods)
	_ = c.List(ctx, &events)
	for _, nc := range claims.Items {
		var conds []string
		for _, cond := range nc.Status.Conditions {
			conds = append(conds, cond.Type+"="+string(cond.Status))
		}
		t.Logf("nodeclaim %s %s node=%s type=%s alloc=%v %v", nc.Name, nc.Status.ProviderID, nc.Status.NodeName, nc.Labels[v1.LabelInstanceType], nc.Status.Allocatable, conds)
	}
	for _, n := range nodes.Items {
		t.Logf("node %s %s taints=%v alloc=%v", n.Name, n.Spec.ProviderID, n.Spec.Taints, n.Status.Allocatable)
	}
	for _, p := range pods.Items {
		if p.Spec.NodeName == "" {
			t.Logf("pending pod %s nominated=%q", p.Name, p.Status.NominatedNodeName)
		}
	}
	for _, e := range events.Items {
		if e.Type == corev1.EventTypeWarning {
			t.Logf("event %s/%s %s: %s", e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Reason, e.Message)
		}
	}
}

// queueDurations is how many queue durations the interruption histogram has observed.
func queueDurations(t *testing.T) uint64 {
	m := &dto.Metric{}
	must(t, metrics.InterruptionQueueDuration.Write(m))
	return m.GetHistogram().GetSampleCount()
}
