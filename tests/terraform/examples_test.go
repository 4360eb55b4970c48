// Package terraform_test applies every example under examples/ (and so every module
// under modules/) with the real terraform binary and the provider built from this
// tree, against the local control plane and moto_server, as a user would.
package terraform_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	awsv1 "github.com/dovetail-sh/dovetail/controller/apis/aws/v1"
	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/controller/catalog"
	dtaws "github.com/dovetail-sh/dovetail/controller/cloudprovider/aws"
	"github.com/dovetail-sh/dovetail/controller/cloudprovider/aws/awserr"
	"github.com/dovetail-sh/dovetail/controller/operator/settings"
	"github.com/dovetail-sh/dovetail/controller/simulate"
	"github.com/dovetail-sh/dovetail/tests/localstack"
	"github.com/dovetail-sh/dovetail/tests/testenv"
)

const (
	cluster = "demo"
	region  = "us-west-2"
)

// example is one directory under examples/ and what applying it must leave behind.
type example struct {
	dir          string
	poolsVars    bool     // takes cluster_name, node_role_name and kubeconfig_path only
	nodePools    []string // NodePools (and their pod placements below) it creates
	nodeClasses  []string
	placements   map[string]string // Deployment in workload.yaml → the NodePool its pods must plan onto
	bootstraps   bool              // creates the IAM roles, queue and discovery tags
	installs     bool              // installs the CRDs and the controller in the cluster
	vpcEndpoints bool
	check        func(t *testing.T, tf *localstack.Terraform, clients *dtaws.Clients)
	checkCluster func(t *testing.T, kube client.Client)
}

// The examples that only declare NodePools run first, on the CRDs the stack
// installs; the bootstrap examples install (and on destroy remove) the CRDs themselves.
var examples = []example{
	{dir: "gpu-node-pool", poolsVars: true, nodePools: []string{"gpu"}, nodeClasses: []string{"gpu"},
		placements: map[string]string{"gpu-inference": "gpu"}},
	{dir: "per-team-node-pools", poolsVars: true, nodePools: []string{"team-analytics", "team-checkout"}, nodeClasses: []string{"team-analytics", "team-checkout"},
		placements: map[string]string{"analytics-jobs": "team-analytics", "checkout-api": "team-checkout"}},
	{dir: "spot-and-on-demand", poolsVars: true, nodePools: []string{"mixed"}, nodeClasses: []string{"default"}},
	{dir: "instance-type-exclusions", poolsVars: true, nodePools: []string{"graviton"}, nodeClasses: []string{"graviton"}, check: checkExclusions},
	{dir: "node-expiry", poolsVars: true, nodePools: []string{"general"}, nodeClasses: []string{"default"},
		placements: map[string]string{"web": "general"}},
	{dir: "gitops-install", bootstraps: true, check: checkGitOpsInstall},
	{dir: "quickstart", nodePools: []string{"default"}, nodeClasses: []string{"default"}, bootstraps: true, installs: true},
	{dir: "private-cluster", nodePools: []string{"default"}, nodeClasses: []string{"default"}, bootstraps: true, installs: true, vpcEndpoints: true, checkCluster: checkPrivateCluster},
}

func TestExamples(t *testing.T) {
	if testing.Short() {
		t.Skip("applies every example with terraform on the local stack and moto_server")
	}
	ctx := context.Background()
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	stack := testenv.StartStack(t)
	// The nodes a cluster runs its controller on: the provider waits for its rollout.
	testenv.AddSystemNodes(t, stack.Client, 2)
	moto := testenv.StartMoto(t)
	clients := testenv.AWSClients(t, moto, region)
	seeded := testenv.SeedAWS(t, ctx, clients, "seeded", "10.70", "us-west-2a", "us-west-2b")
	// The module makes the node role's access entry and the controller's Pod Identity
	// association: EKS APIs moto lacks, served in front of it, on the cluster EKS has.
	eksAPI, err := localstack.StartEKSAccess(moto)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(eksAPI.Stop)
	if _, err := clients.EKS.CreateCluster(ctx, &eks.CreateClusterInput{Name: aws.String(cluster), RoleArn: aws.String("arn:aws:iam::123456789012:role/eks"),
		ResourcesVpcConfig: &ekstypes.VpcConfigRequest{SubnetIds: slices.Collect(maps.Values(seeded.Subnets))}}); err != nil {
		t.Fatal(err)
	}

	work := t.TempDir()
	providerDir := filepath.Join(work, "provider")
	if err := localstack.BuildProvider(ctx, root, providerDir); err != nil {
		t.Fatal(err)
	}
	if err := localstack.CopyConfigurations(root, work); err != nil {
		t.Fatal(err)
	}
	awsEnv := []string{"AWS_ENDPOINT_URL=" + moto.Endpoint, "AWS_ENDPOINT_URL_EKS=" + eksAPI.URL, "AWS_ACCESS_KEY_ID=testing", "AWS_SECRET_ACCESS_KEY=testing",
		"AWS_REGION=" + region, "AWS_CONFIG_FILE=" + os.DevNull, "AWS_SHARED_CREDENTIALS_FILE=" + os.DevNull}

	var subnets []string
	for _, id := range seeded.Subnets {
		subnets = append(subnets, id)
	}
	for _, ex := range examples {
		t.Run(ex.dir, func(t *testing.T) {
			tf, err := localstack.NewTerraform(filepath.Join(work, "examples", ex.dir), providerDir, awsEnv...)
			if err != nil {
				t.Fatal(err)
			}
			vars := map[string]any{"cluster_name": cluster, "kubeconfig_path": stack.Kubeconfig}
			switch {
			case ex.poolsVars:
				vars["node_role_name"] = seeded.Role
			case ex.dir == "gitops-install":
				vars["oidc_provider_arn"] = "arn:aws:iam::123456789012:oidc-provider/oidc.eks.us-west-2.amazonaws.com/id/EXAMPLED539D4633E53DE1B71EXAMPLE"
				vars["subnet_ids"], vars["security_group_ids"] = subnets, []string{seeded.SecurityGroup}
				vars["tags"] = map[string]string{"cost-center": "platform"}
				vars["queue_kms_master_key_id"] = "alias/dovetail-queue"
				vars["ami_id_ssm_parameter_arns"] = []string{"arn:aws:ssm:us-west-2:123456789012:parameter/golden-ami/*"}
				vars["controller_additional_policies"] = map[string]string{"sqs_read": "arn:aws:iam::aws:policy/AmazonSQSReadOnlyAccess"}
				vars["audit_role_arn"] = "arn:aws:iam::123456789012:role/audit"
				delete(vars, "kubeconfig_path")
			case ex.vpcEndpoints:
				vars["vpc_id"], vars["subnet_ids"], vars["route_table_ids"], vars["security_group_ids"] = seeded.VPC, subnets, []string{seeded.RouteTable}, []string{seeded.SecurityGroup}
			default:
				vars["subnet_ids"], vars["security_group_ids"] = subnets, []string{seeded.SecurityGroup}
			}
			if ex.installs {
				// The provider here is built from source: it has no released image.
				vars["controller_image"] = testenv.ControllerImage
			}
			if err := tf.WriteVars(vars); err != nil {
				t.Fatal(err)
			}
			must(t, tf.Init(ctx))
			_, err = tf.Run(ctx, "validate", "-no-color")
			must(t, err)

			applied := false
			t.Cleanup(func() {
				if applied {
					if err := tf.Destroy(ctx); err != nil {
						t.Errorf("cleaning up: %v", err)
					}
				}
			})
			must(t, tf.Apply(ctx))
			applied = true
			if plan, err := tf.PlannedChanges(ctx); err != nil || plan != "" {
				t.Fatalf("a second plan right after apply should have no changes (err %v):\n%s", err, plan)
			}
			assertPresent(t, ctx, stack.Client, clients, seeded, ex, true)
			if ex.bootstraps {
				assertEKSAccess(t, eksAPI, ex, vars["oidc_provider_arn"] == nil, true)
			}
			if len(ex.placements) > 0 {
				checkPlacements(t, ctx, stack.Client, filepath.Join(tf.Dir, "workload.yaml"), ex.placements)
			}
			if ex.check != nil {
				ex.check(t, tf, clients)
			}
			if ex.checkCluster != nil {
				ex.checkCluster(t, stack.Client)
			}

			must(t, tf.Destroy(ctx))
			applied = false
			assertPresent(t, ctx, stack.Client, clients, seeded, ex, false)
			if ex.bootstraps {
				assertEKSAccess(t, eksAPI, ex, false, false)
			}
			if left, err := tf.StateResources(ctx); err != nil || len(left) > 0 {
				t.Errorf("state after destroy still holds %v (err %v)", left, err)
			}
		})
	}
}

// assertEKSAccess checks the node role's access entry (modules/dovetail makes it by
// default) and, with Pod Identity, the controller's association.
func assertEKSAccess(t *testing.T, eksAPI *localstack.EKSAccess, ex example, podIdentity, applied bool) {
	t.Helper()
	entries, assoc := eksAPI.AccessEntries(cluster), eksAPI.PodIdentityAssociations(cluster)
	if !applied {
		if len(entries)+len(assoc) > 0 {
			t.Errorf("after destroy EKS still has access entries %v and associations %v", entries, assoc)
		}
		return
	}
	var nodeRole string
	for arn, kind := range entries {
		if strings.HasSuffix(arn, "/DovetailNode-"+cluster) && kind == "EC2_LINUX" {
			nodeRole = arn
		}
	}
	if len(entries) != 1 || nodeRole == "" {
		t.Errorf("%s: access entries %v, want the node role's, EC2_LINUX", ex.dir, entries)
	}
	if podIdentity != (len(assoc) == 1 && strings.HasSuffix(assoc["dovetail/dovetail"], "/DovetailController-"+cluster)) {
		t.Errorf("%s: Pod Identity associations %v (Pod Identity %v)", ex.dir, assoc, podIdentity)
	}
}

// assertPresent checks, through the Kubernetes and AWS APIs, that what the example
// manages exists (applied) or is gone (after destroy).
func assertPresent(t *testing.T, ctx context.Context, kube client.Client, clients *dtaws.Clients, seeded *testenv.SeededAWS, ex example, applied bool) {
	t.Helper()
	state := func(err error) (bool, error) {
		// Without the CRDs (the bootstrap examples remove them) there are none either.
		if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
			return false, nil
		}
		return err == nil, err
	}
	expect := func(what string, exists bool, err error) {
		t.Helper()
		if err != nil {
			t.Errorf("looking up %s: %v", what, err)
			return
		}
		if exists != applied {
			t.Errorf("%s: exists=%v, want %v (applied=%v)", what, exists, applied, applied)
		}
	}
	for _, name := range ex.nodePools {
		exists, err := state(kube.Get(ctx, client.ObjectKey{Name: name}, &v1.NodePool{}))
		expect("NodePool "+name, exists, err)
	}
	for _, name := range ex.nodeClasses {
		exists, err := state(kube.Get(ctx, client.ObjectKey{Name: name}, &awsv1.EC2NodeClass{}))
		expect("EC2NodeClass "+name, exists, err)
	}
	if !ex.bootstraps {
		return
	}
	exists, err := state(kube.Get(ctx, client.ObjectKey{Namespace: "dovetail", Name: "dovetail"}, &appsv1.Deployment{}))
	if ex.installs {
		expect("Deployment dovetail/dovetail", exists, err)
	} else if exists || err != nil {
		t.Errorf("the controller is in the cluster though the example does not install it (err %v)", err)
	}
	for _, role := range []string{"DovetailNode-" + cluster, "DovetailController-" + cluster} {
		_, err := clients.IAM.GetRole(ctx, &iam.GetRoleInput{RoleName: aws.String(role)})
		expect("IAM role "+role, err == nil, ignoreNotFound(err))
	}
	profiles, err := clients.IAM.ListInstanceProfilesForRole(ctx, &iam.ListInstanceProfilesForRoleInput{RoleName: aws.String("DovetailNode-" + cluster)})
	expect("the node role's instance profile", err == nil && len(profiles.InstanceProfiles) == 1, ignoreNotFound(err))
	_, err = clients.SQS.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(cluster + "-dovetail")})
	expect("SQS queue "+cluster+"-dovetail", err == nil, ignoreNotFound(err))
	tagged, err := clients.EC2.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{Filters: []ec2types.Filter{
		{Name: aws.String("tag:karpenter.sh/discovery"), Values: []string{cluster}}}})
	expect("discovery tags on the subnets", err == nil && len(tagged.Subnets) == len(seeded.Subnets), err)
	if ex.vpcEndpoints {
		eps, err := clients.EC2.DescribeVpcEndpoints(ctx, &ec2.DescribeVpcEndpointsInput{Filters: []ec2types.Filter{
			{Name: aws.String("vpc-id"), Values: []string{seeded.VPC}}}})
		live := 0
		if err == nil {
			for _, ep := range eps.VpcEndpoints {
				if s := strings.ToLower(string(ep.State)); s != "deleted" && s != "deleting" {
					live++
				}
			}
		}
		// sts, ssm, ec2, sqs, ecr.api, ecr.dkr, eks and the s3 gateway.
		expect("the 8 VPC endpoints", err == nil && live == 8, err)
	}
}

// checkPlacements plans workload.yaml against the NodePools the example created in
// the cluster with the scheduling engine, and checks each Deployment's pods land on
// the pool meant for them.
func checkPlacements(t *testing.T, ctx context.Context, kube client.Client, workload string, want map[string]string) {
	t.Helper()
	in := &simulate.Inputs{}
	f, err := os.Open(workload)
	must(t, err)
	defer f.Close()
	must(t, in.Read(f, workload))
	var pools v1.NodePoolList
	must(t, kube.List(ctx, &pools))
	for i := range pools.Items {
		in.NodePools = append(in.NodePools, &pools.Items[i])
	}
	cat, err := catalog.EmbeddedAWS()
	must(t, err)
	plan, err := simulate.Run(in, cat, settings.Default(), clock.RealClock{})
	must(t, err)
	if len(plan.Unschedulable) > 0 {
		t.Errorf("workload.yaml does not fit the example's pools: %+v", plan.Unschedulable)
	}
	placed := 0
	for _, claim := range plan.NodeClaims {
		for _, pod := range claim.Pods {
			placed++
			deployment := strings.TrimPrefix(pod, "default/")
			deployment = deployment[:strings.LastIndex(deployment, "-")]
			if pool, ok := want[deployment]; !ok || pool != claim.NodePool {
				t.Errorf("pod %s planned onto NodePool %s (%s); want %q", pod, claim.NodePool, claim.InstanceType, pool)
			}
		}
	}
	if placed == 0 || placed != plan.Summary.Pods {
		t.Errorf("planned %d of %d pods of workload.yaml", placed, plan.Summary.Pods)
	}
}

// checkExclusions: the pool excludes exactly the region's Graviton types of 64 vCPUs.
func checkExclusions(t *testing.T, tf *localstack.Terraform, _ *dtaws.Clients) {
	out, err := tf.Run(context.Background(), "output", "-json", "excluded_instance_types")
	must(t, err)
	var excluded []string
	must(t, json.Unmarshal([]byte(out), &excluded))
	if len(excluded) == 0 {
		t.Fatal("no Graviton 16xlarge types found to exclude")
	}
	cat, err := catalog.EmbeddedAWS()
	must(t, err)
	for _, name := range excluded {
		e, ok := cat.Find(name)
		if !ok || e.Architecture != "arm64" || e.CPU != "64" {
			t.Errorf("excluded %s, which is not a 64-vCPU Graviton type (catalog: %+v)", name, e)
		}
	}
	if !slices.Contains(excluded, "m7g.16xlarge") {
		t.Errorf("m7g.16xlarge is not excluded: %v", excluded)
	}
}

// checkRenderCommand runs the command the example prints and checks the manifests
// carry the IRSA role and queue Terraform made.
// checkGitOpsInstall: the module's account settings reach AWS (the roles' path, tags
// and policies, the queue's key), and the render command prints the controller for
// the roles it made.
func checkGitOpsInstall(t *testing.T, tf *localstack.Terraform, clients *dtaws.Clients) {
	ctx := context.Background()
	role, err := clients.IAM.GetRole(ctx, &iam.GetRoleInput{RoleName: aws.String("DovetailController-demo")})
	must(t, err)
	tags := map[string]string{}
	for _, tag := range role.Role.Tags {
		tags[aws.ToString(tag.Key)] = aws.ToString(tag.Value)
	}
	if aws.ToString(role.Role.Path) != "/dovetail/" || tags["cost-center"] != "platform" || tags["component"] != "dovetail-controller" {
		t.Errorf("controller role path %s, tags %v", aws.ToString(role.Role.Path), tags)
	}
	policy, err := clients.IAM.GetRolePolicy(ctx, &iam.GetRolePolicyInput{RoleName: role.Role.RoleName, PolicyName: aws.String("DovetailController")})
	must(t, err)
	doc, err := url.QueryUnescape(aws.ToString(policy.PolicyDocument))
	must(t, err)
	for _, want := range []string{`"kms:Decrypt"`, `"kms:ResourceAliases":"alias/dovetail-queue"`, `"arn:aws:ssm:us-west-2:123456789012:parameter/golden-ami/*"`} {
		if !strings.Contains(strings.Join(strings.Fields(doc), ""), want) {
			t.Errorf("the controller policy lacks %s:\n%s", want, doc)
		}
	}
	attached, err := clients.IAM.ListAttachedRolePolicies(ctx, &iam.ListAttachedRolePoliciesInput{RoleName: aws.String("DovetailNode-demo")})
	must(t, err)
	var names []string
	for _, p := range attached.AttachedPolicies {
		names = append(names, aws.ToString(p.PolicyName))
	}
	sort.Strings(names)
	if got := strings.Join(names, ","); got != "AmazonEC2ContainerRegistryReadOnly,AmazonEKSWorkerNodePolicy,AmazonSSMManagedInstanceCore,CloudWatchAgentServerPolicy" {
		t.Errorf("node role policies %s", got)
	}
	queues, err := clients.SQS.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String("demo-dovetail")})
	must(t, err)
	attrs, err := clients.SQS.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: queues.QueueUrl, AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameAll}})
	must(t, err)
	if attrs.Attributes["KmsMasterKeyId"] != "alias/dovetail-queue" || attrs.Attributes["SqsManagedSseEnabled"] == "true" {
		t.Errorf("queue encryption %v", attrs.Attributes)
	}
	// queue_policy_statements in the queue's policy, after its own, scoped to it.
	var queuePolicy struct{ Statement []map[string]any }
	must(t, json.Unmarshal([]byte(attrs.Attributes["Policy"]), &queuePolicy))
	var sids []string
	for _, st := range queuePolicy.Statement {
		sids = append(sids, fmt.Sprint(st["Sid"]))
		if st["Sid"] == "AuditRead" && (fmt.Sprint(st["Principal"]) != "map[AWS:[arn:aws:iam::123456789012:role/audit]]" || st["Resource"] != attrs.Attributes["QueueArn"]) {
			t.Errorf("AuditRead statement %v", st)
		}
	}
	if strings.Join(sids, ",") != "EventBridgeAndSQS,DenyHTTP,AuditRead" {
		t.Errorf("queue policy statements %v", sids)
	}
	// iam_role_policies on the controller role.
	controllerPolicies, err := clients.IAM.ListAttachedRolePolicies(ctx, &iam.ListAttachedRolePoliciesInput{RoleName: role.Role.RoleName})
	must(t, err)
	if len(controllerPolicies.AttachedPolicies) != 1 || aws.ToString(controllerPolicies.AttachedPolicies[0].PolicyName) != "AmazonSQSReadOnlyAccess" {
		t.Errorf("controller role's managed policies %v", controllerPolicies.AttachedPolicies)
	}
	// The account can run spot: the module made EC2's service-linked role.
	slr, err := clients.IAM.ListRoles(ctx, &iam.ListRolesInput{PathPrefix: aws.String("/aws-service-role/spot.amazonaws.com/")})
	if err != nil || len(slr.Roles) != 1 {
		t.Errorf("no spot service-linked role (%v)", err)
	}
	checkRenderCommand(t, tf)
}

func checkRenderCommand(t *testing.T, tf *localstack.Terraform) {
	out, err := tf.Run(context.Background(), "output", "-raw", "render_command")
	must(t, err)
	args := strings.Fields(out)
	if len(args) < 2 || args[0] != "dovetail" {
		t.Fatalf("render_command is %q", out)
	}
	root, err := testenv.RepoRoot()
	must(t, err)
	// The CLI here is built from source: it has no released image to default to.
	cmd := exec.Command("go", append([]string{"run", "./controller/cmd/dovetail", args[1], "--image", testenv.ControllerImage}, args[2:]...)...)
	cmd.Dir = root
	manifests, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: %v", out, err)
	}
	for _, want := range []string{"eks.amazonaws.com/role-arn: arn:aws:iam::123456789012:role/dovetail/DovetailController-demo", "demo-dovetail", "kind: CustomResourceDefinition"} {
		if !strings.Contains(string(manifests), want) {
			t.Errorf("`%s` prints no %q", out, want)
		}
	}
}

// checkPrivateCluster: nothing in the cluster may need IAM or the Pricing API, which
// have no VPC endpoints.
func checkPrivateCluster(t *testing.T, kube client.Client) {
	ctx := context.Background()
	class := &awsv1.EC2NodeClass{}
	must(t, kube.Get(ctx, client.ObjectKey{Name: "default"}, class))
	if class.Spec.Role != "" || class.Spec.InstanceProfile == nil || *class.Spec.InstanceProfile == "" {
		t.Errorf("the private cluster's node class has role %q and instance profile %v; want only an instance profile", class.Spec.Role, class.Spec.InstanceProfile)
	}
	deployment := &appsv1.Deployment{}
	must(t, kube.Get(ctx, client.ObjectKey{Namespace: "dovetail", Name: "dovetail"}, deployment))
	isolated := false
	for _, env := range deployment.Spec.Template.Spec.Containers[0].Env {
		isolated = isolated || (env.Name == "ISOLATED_VPC" && env.Value == "true")
	}
	if !isolated {
		t.Errorf("the controller is not in isolated-VPC mode: env %v", deployment.Spec.Template.Spec.Containers[0].Env)
	}
}

func ignoreNotFound(err error) error {
	if err == nil || awserr.IsNotFound(err) || awserr.IsCode(err, "NoSuchEntity", "AWS.SimpleQueueService.NonExistentQueue") {
		return nil
	}
	return err
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
