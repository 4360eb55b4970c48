package e2e

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	ebtypes "github.com/aws/aws-sdk-go-v2/service/eventbridge/types"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	iamtypes "github.com/aws/aws-sdk-go-v2/service/iam/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	awsv1 "github.com/dovetail-sh/dovetail/controller/apis/aws/v1"
	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/templates"
	"github.com/dovetail-sh/dovetail/tests/localstack"
	"github.com/dovetail-sh/dovetail/tests/testenv"
)

// TestSwitchFromKarpenterAndBack follows docs/guides/switch-from-karpenter.md and then
// docs/guides/rollback.md on a cluster as terraform-aws-eks//modules/karpenter and
// Karpenter's chart leave it: Karpenter's node role, controller role, Pod Identity
// association, queue and rules (that module's names), its Deployment in kube-system,
// a NodePool and EC2NodeClass, and NodeClaims, nodes and instances it launched, with
// pods on them. Each `dovetail.tf` of the guides is applied as written (cluster e2e,
// the moto account) with the real terraform and a provider stamped as a release; the
// Karpenter module's outputs are a module of outputs, and what its apply or Helm would
// do is done through the APIs. Dovetail's controller runs as its own process, as the
// installed Deployment's pod would.
//
// The switch ends with every original node, instance and pod where it was, Dovetail
// judging the claims (re-stamped, none drifted), no launch or termination, and a
// second plan empty. The rollback ends with the same nodes, no instance terminated,
// the claims as Karpenter reads them, and nothing of Dovetail's in the cluster, the
// state or the account.
func TestSwitchFromKarpenterAndBack(t *testing.T) {
	ctx := context.Background()
	cluster, proc, ec2Calls := startAWSClusterProcess(t)
	c, clients := cluster.client, cluster.clients
	// Until now Karpenter ran the cluster: no Dovetail while its objects are made.
	proc.Kill()

	eksAPI, err := localstack.StartEKSAccess(cluster.moto)
	must(t, err)
	t.Cleanup(eksAPI.Stop)
	eksClient := eks.New(eks.Options{Region: cluster.region, BaseEndpoint: aws.String(eksAPI.URL), Credentials: credentials.NewStaticCredentialsProvider("testing", "testing", "")})
	// Karpenter's EC2NodeClass names the node role Karpenter's module made.
	class := &awsv1.EC2NodeClass{}
	must(t, c.Get(ctx, client.ObjectKey{Name: "default"}, class))
	nodeRole := class.Spec.Role
	nodeRoleARN := "arn:aws:iam::" + motoAccount + ":role/" + nodeRole
	karpenterModule := applyKarpenterModule(t, cluster, eksClient, nodeRoleARN)
	karpenterChart := installKarpenterChart(t, c)
	karpenterProfile := karpenterInstanceProfile(t, cluster, class)
	pool, instances := karpenterNodes(t, cluster, class, 3)
	must(t, c.Create(ctx, localstack.Deployment("web", 3, "1500m", "1Gi")))
	// kube-scheduler runs the pods on Karpenter's nodes, one each (two do not fit).
	web := placements(allRunning(t, c, "web", 3, 60*time.Second))
	if pool.Hash() != karpenterPoolHash {
		t.Fatalf("the pool hashes to %s, not the %s Karpenter computed for it", pool.Hash(), karpenterPoolHash)
	}
	// The nodes Dovetail's controller Deployment runs on, as Karpenter's ran on.
	testenv.AddSystemNodes(t, c, 2)

	root, err := testenv.RepoRoot()
	must(t, err)
	work := t.TempDir()
	providerDir := filepath.Join(work, "provider")
	must(t, localstack.BuildReleasedProvider(ctx, root, providerDir, "0.0.0-e2e"))
	must(t, localstack.CopyConfigurations(root, work))
	dir := filepath.Join(work, "cluster")
	writeFiles(t, dir, map[string]string{
		"provider.tf": fmt.Sprintf(`terraform {
  required_providers {
    dovetail = { source = "dovetail-sh/dovetail" }
  }
}

provider "dovetail" {
  aws {
    region = %q
  }
  kubernetes {
    config_path = %q
  }
}
`, cluster.region, cluster.kubeconfig),
		// terraform-aws-eks's modules as far as the guides read them: their outputs.
		"eks.tf":                `module "eks" { source = "./eks" }`,
		"eks/outputs.tf":        `output "cluster_name" { value = "e2e" }`,
		"karpenter.tf":          `module "karpenter" { source = "./karpenter" }`,
		"karpenter/outputs.tf":  fmt.Sprintf(`output "node_iam_role_arn" { value = %q }`, nodeRoleARN),
		"karpenter/versions.tf": `terraform {}`,
	})
	tf, err := localstack.NewTerraform(dir, providerDir, "AWS_ENDPOINT_URL="+cluster.moto.Endpoint, "AWS_ENDPOINT_URL_EKS="+eksAPI.URL,
		"AWS_ACCESS_KEY_ID=testing", "AWS_SECRET_ACCESS_KEY=testing", "AWS_REGION="+cluster.region, "AWS_CONFIG_FILE="+os.DevNull, "AWS_SHARED_CREDENTIALS_FILE="+os.DevNull)
	must(t, err)
	must(t, tf.Init(ctx))
	apply := func(t *testing.T, page, step string) {
		t.Helper()
		writeFiles(t, dir, map[string]string{"dovetail.tf": guideStep(t, root, page, step)})
		must(t, tf.Init(ctx))
		must(t, tf.Apply(ctx))
		if plan, err := tf.PlannedChanges(ctx); err != nil || plan != "" {
			t.Fatalf("%s, %s: a second plan should have no changes (err %v):\n%s", page, step, err, plan)
		}
	}
	// What must hold at every step: the nodes, instances and pods Karpenter left are
	// where they were, and nothing launched or terminated an instance.
	untouched := func(t *testing.T) {
		t.Helper()
		if got := placements(allRunning(t, c, "web", 3, 30*time.Second)); !maps.Equal(got, web) {
			t.Fatalf("pods (uid → node) %v, want them where they were, %v: a pod was evicted or moved", got, web)
		}
		for name, id := range instances {
			out, err := clients.EC2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{id}})
			must(t, err)
			if s := out.Reservations[0].Instances[0].State.Name; s != ec2types.InstanceStateNameRunning {
				t.Fatalf("instance %s of %s is %s", id, name, s)
			}
			nc := &v1.NodeClaim{}
			must(t, c.Get(ctx, client.ObjectKey{Name: name}, nc))
			if nc.DeletionTimestamp != nil || meta.IsStatusConditionTrue(nc.Status.Conditions, v1.ConditionTypeDrifted) {
				t.Fatalf("claim %s: deleting %v, conditions %+v", name, nc.DeletionTimestamp != nil, nc.Status.Conditions)
			}
			// Karpenter's hash of the pool as it is (TestNodePoolHashIsKarpenters):
			// what Karpenter, after the rollback, compares it with.
			must(t, c.Get(ctx, client.ObjectKeyFromObject(pool), pool))
			if got := nc.Annotations[v1.NodePoolHashAnnotationKey]; got != pool.Hash() {
				t.Fatalf("claim %s's %s is %q, want the pool's %s", name, v1.NodePoolHashAnnotationKey, got, pool.Hash())
			}
		}
		for _, call := range []string{"CreateFleet", "RunInstances", "TerminateInstances"} {
			if n := len(ec2Calls.Calls(call)); n != 0 {
				t.Fatalf("%d %s calls; want none", n, call)
			}
		}
	}

	switched := t.Run("switch-from-karpenter.md", func(t *testing.T) {
		// 1. Keep the CRDs through a karpenter-crd uninstall.
		for _, name := range karpenterCRDs {
			crd := &apiextensionsv1.CustomResourceDefinition{}
			must(t, c.Get(ctx, client.ObjectKey{Name: name}, crd))
			patch := client.MergeFrom(crd.DeepCopy())
			metav1.SetMetaDataAnnotation(&crd.ObjectMeta, "helm.sh/resource-policy", "keep")
			must(t, c.Patch(ctx, crd, patch))
		}
		// 2. helm uninstall karpenter: its objects go, the CRDs and what they hold stay.
		karpenterChart.uninstall(t)
		untouched(t)

		// 3. modules/dovetail beside module.karpenter; the controller's pod starts.
		apply(t, "switch-from-karpenter.md", "step 3")
		proc.Start()
		eventually(t, 90*time.Second, "every claim Karpenter launched judged by Dovetail and re-stamped", func() error {
			for name := range instances {
				nc := &v1.NodeClaim{}
				if err := c.Get(ctx, client.ObjectKey{Name: name}, nc); err != nil {
					return err
				}
				if nc.Annotations[awsv1.AnnotationEC2NodeClassHashVersion] != awsv1.EC2NodeClassHashVersion {
					return fmt.Errorf("%s not re-stamped yet", name)
				}
				if !meta.IsStatusConditionTrue(nc.Status.Conditions, v1.ConditionTypeConsolidatable) {
					return fmt.Errorf("%s not judged by a disruption pass yet", name)
				}
			}
			return nil
		})
		untouched(t)
		sameProfiles(t, cluster, c, nodeRole, karpenterProfile)
		if got := eksAPI.PodIdentityAssociations("e2e"); !strings.HasSuffix(got["dovetail/dovetail"], "/DovetailController-e2e") || got["kube-system/karpenter"] == "" {
			t.Errorf("Pod Identity associations %v: want Dovetail's beside Karpenter's (removed in step 5)", got)
		}
		if got := eksAPI.AccessEntries("e2e"); len(got) != 1 || got[nodeRoleARN] != "EC2_LINUX" {
			t.Errorf("access entries %v, want the node role's only", got)
		}

		// 5. module.karpenter goes: its apply destroys all but the node role and the
		// access entry, which module.dovetail imports.
		must(t, os.RemoveAll(filepath.Join(dir, "karpenter")))
		must(t, os.Remove(filepath.Join(dir, "karpenter.tf")))
		karpenterModule.destroyAllButTheNodeRole(t)
		apply(t, "switch-from-karpenter.md", "step 5")
		state, err := tf.StateResources(ctx)
		must(t, err)
		if !slices.Contains(state, "module.dovetail.dovetail_node_access_entry.this[0]") {
			t.Errorf("the state holds %v: the node role's access entry was not imported", state)
		}
		if got := eksAPI.AccessEntries("e2e"); len(got) != 1 || got[nodeRoleARN] != "EC2_LINUX" {
			t.Errorf("access entries %v, want the node role's only", got)
		}
		untouched(t)
	})
	if !switched {
		t.Fatal("the switch failed; the rollback starts from its end")
	}

	t.Run("rollback.md", func(t *testing.T) {
		// While Dovetail ran, the pool's template gained a label: Dovetail applied it
		// in place, keeping its own record of the template's keys on each claim.
		must(t, c.Get(ctx, client.ObjectKeyFromObject(pool), pool))
		patch := client.MergeFrom(pool.DeepCopy())
		pool.Spec.Template.Labels = map[string]string{"team": "web"}
		must(t, c.Patch(ctx, pool, patch))
		eventually(t, 60*time.Second, "the template's label applied in place to every claim", func() error {
			for name := range instances {
				nc := &v1.NodeClaim{}
				if err := c.Get(ctx, client.ObjectKey{Name: name}, nc); err != nil {
					return err
				}
				if nc.Labels["team"] != "web" || nc.Annotations["dovetail.sh/template-labels"] != "team" {
					return fmt.Errorf("claim %s: labels %v, annotations %v", name, nc.Labels, nc.Annotations)
				}
			}
			return nil
		})
		untouched(t)

		// 1. keep_crds_on_destroy.
		apply(t, "rollback.md", "rollback step 1")

		// 2. module.dovetail goes. The controller's pod stops when its Deployment is
		// deleted, and its object goes once the process has exited, as a kubelet's.
		stopped, early := stopWithItsPods(t, c, proc)
		apply(t, "rollback.md", "rollback step 2")
		select {
		case <-stopped:
		default:
			t.Fatal("the destroy ended with the controller's pods still there")
		}
		for e := range early {
			t.Error(e)
		}
		untouched(t)
		if state, err := tf.StateResources(ctx); err != nil || len(state) > 0 {
			t.Errorf("the state still holds %v (err %v)", state, err)
		}
		dovetailLeftInCluster(t, c)
		dovetailLeftInAWS(t, cluster, eksAPI, nodeRoleARN)

		// 3. Karpenter's module and chart again.
		applyKarpenterModule(t, cluster, eksClient, nodeRoleARN)
		installKarpenterChart(t, c)

		// The class keeps the profile its nodes launched with, which Karpenter
		// reuses while it holds the class's role.
		sameProfiles(t, cluster, c, nodeRole, karpenterProfile)
		untouched(t)
	})
}

// karpenterInstanceProfile makes the profile Karpenter v1.15 makes for a class's
// role (its path, its tags) and puts it in the class's status, as Karpenter does
// (with its class hash annotations),
// in place of the one Dovetail made when the harness started: this cluster never ran
// Dovetail. The nodes Karpenter launches next run with it.
func karpenterInstanceProfile(t *testing.T, cluster *awsCluster, class *awsv1.EC2NodeClass) string {
	t.Helper()
	ctx := context.Background()
	api := cluster.clients.IAM
	if old := class.Status.InstanceProfile; old != "" {
		_, err := api.RemoveRoleFromInstanceProfile(ctx, &iam.RemoveRoleFromInstanceProfileInput{InstanceProfileName: aws.String(old), RoleName: aws.String(class.Spec.Role)})
		must(t, err)
		_, err = api.DeleteInstanceProfile(ctx, &iam.DeleteInstanceProfileInput{InstanceProfileName: aws.String(old)})
		must(t, err)
	}
	name := "e2e_4207359223418932017"
	var tags []iamtypes.Tag
	for k, v := range map[string]string{"kubernetes.io/cluster/e2e": "owned", "eks:eks-cluster-name": "e2e", "karpenter.k8s.aws/ec2nodeclass": class.Name, v1.LabelTopologyRegion: cluster.region} {
		tags = append(tags, iamtypes.Tag{Key: aws.String(k), Value: aws.String(v)})
	}
	_, err := api.CreateInstanceProfile(ctx, &iam.CreateInstanceProfileInput{InstanceProfileName: aws.String(name),
		Path: aws.String("/karpenter/" + cluster.region + "/e2e/" + string(class.UID) + "/"), Tags: tags})
	must(t, err)
	_, err = api.AddRoleToInstanceProfile(ctx, &iam.AddRoleToInstanceProfileInput{InstanceProfileName: aws.String(name), RoleName: aws.String(class.Spec.Role)})
	must(t, err)
	patch := client.MergeFrom(class.DeepCopy())
	class.Status.InstanceProfile = name
	must(t, cluster.client.Status().Patch(ctx, class, patch))
	// Karpenter stamps its class hash on the class too.
	patch = client.MergeFrom(class.DeepCopy())
	metav1.SetMetaDataAnnotation(&class.ObjectMeta, awsv1.AnnotationEC2NodeClassHash, "9467862354421516513")
	metav1.SetMetaDataAnnotation(&class.ObjectMeta, awsv1.AnnotationEC2NodeClassHashVersion, karpenterClassHashVersion)
	must(t, cluster.client.Patch(ctx, class, patch))
	return name
}

// sameProfiles checks the class still launches with Karpenter's profile and that the
// node role is in no other: Dovetail reuses a profile that holds the class's role
// rather than make one of its own, so there is none to clean up after a rollback.
func sameProfiles(t *testing.T, cluster *awsCluster, c client.Client, role, profile string) {
	t.Helper()
	ctx := context.Background()
	class := &awsv1.EC2NodeClass{}
	must(t, c.Get(ctx, client.ObjectKey{Name: "default"}, class))
	if class.Status.InstanceProfile != profile {
		t.Errorf("the class launches with instance profile %q, want Karpenter's %s", class.Status.InstanceProfile, profile)
	}
	out, err := cluster.clients.IAM.ListInstanceProfilesForRole(ctx, &iam.ListInstanceProfilesForRoleInput{RoleName: aws.String(role)})
	must(t, err)
	var names []string
	for _, p := range out.InstanceProfiles {
		names = append(names, aws.ToString(p.InstanceProfileName))
	}
	if len(names) != 1 || names[0] != profile {
		t.Errorf("the node role is in instance profiles %v, want Karpenter's %s only", names, profile)
	}
}

// karpenterCRDs are the CRDs of Karpenter v1.15's karpenter-crd chart.
var karpenterCRDs = []string{"nodepools.karpenter.sh", "nodeclaims.karpenter.sh", "ec2nodeclasses.karpenter.k8s.aws",
	"nodeoverlays.karpenter.sh", "capacitybuffers.autoscaling.x-k8s.io"}

// guideStep is the `dovetail.tf` of a step of a page under docs/guides, as a user
// copies it, for this cluster: e2e in the emulator's account, the module from this
// tree.
func guideStep(t *testing.T, root, page, step string) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(root, "docs", "guides", page))
	must(t, err)
	m := regexp.MustCompile("(?s)```terraform\n(# dovetail\\.tf, " + regexp.QuoteMeta(step) + "\n.*?)```").FindSubmatch(raw)
	if m == nil {
		t.Fatalf("docs/guides/%s has no terraform block starting \"# dovetail.tf, %s\"", page, step)
	}
	return strings.NewReplacer("my-cluster", "e2e", "111122223333", motoAccount,
		"github.com/dovetail-sh/dovetail//modules/dovetail", "../modules/dovetail").Replace(string(m[1]))
}

func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		path := filepath.Join(dir, name)
		must(t, os.MkdirAll(filepath.Dir(path), 0o755))
		must(t, os.WriteFile(path, []byte(content+"\n"), 0o644))
	}
}

// placements are pods by UID, with their nodes.
func placements(pods []corev1.Pod) map[string]string {
	out := map[string]string{}
	for _, p := range pods {
		out[string(p.UID)] = p.Spec.NodeName
	}
	return out
}

// karpenterModuleResources is what terraform-aws-eks//modules/karpenter (v21) makes
// besides the node role: its controller role, Pod Identity association, queue and
// EventBridge rules, and the node role's access entry.
type karpenterModuleResources struct {
	cluster     *awsCluster
	eks         *eks.Client
	role        string
	association string
	queueURL    string
	rules       []string
}

func applyKarpenterModule(t *testing.T, cluster *awsCluster, eksClient *eks.Client, nodeRoleARN string) *karpenterModuleResources {
	t.Helper()
	ctx := context.Background()
	k := &karpenterModuleResources{cluster: cluster, eks: eksClient, role: "KarpenterController-20261129000000000000000001"}
	_, err := cluster.clients.IAM.CreateRole(ctx, &iam.CreateRoleInput{RoleName: aws.String(k.role),
		AssumeRolePolicyDocument: aws.String(`{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"Service":"pods.eks.amazonaws.com"},"Action":["sts:AssumeRole","sts:TagSession"]}]}`)})
	must(t, err)
	_, err = cluster.clients.IAM.PutRolePolicy(ctx, &iam.PutRolePolicyInput{RoleName: aws.String(k.role), PolicyName: aws.String("KarpenterController"),
		PolicyDocument: aws.String(`{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":"ec2:Describe*","Resource":"*"}]}`)})
	must(t, err)
	assoc, err := eksClient.CreatePodIdentityAssociation(ctx, &eks.CreatePodIdentityAssociationInput{ClusterName: aws.String("e2e"), Namespace: aws.String("kube-system"),
		ServiceAccount: aws.String("karpenter"), RoleArn: aws.String("arn:aws:iam::" + motoAccount + ":role/" + k.role)})
	must(t, err)
	k.association = aws.ToString(assoc.Association.AssociationId)
	// The rollback finds the node role's entry kept: the module imports it.
	if !hasAccessEntry(eksClient, nodeRoleARN) {
		_, err = eksClient.CreateAccessEntry(ctx, &eks.CreateAccessEntryInput{ClusterName: aws.String("e2e"), PrincipalArn: aws.String(nodeRoleARN), Type: aws.String("EC2_LINUX")})
		must(t, err)
	}
	queue, err := cluster.clients.SQS.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("Karpenter-e2e")})
	must(t, err)
	k.queueURL = aws.ToString(queue.QueueUrl)
	attrs, err := cluster.clients.SQS.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: queue.QueueUrl, AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn}})
	must(t, err)
	for name, pattern := range map[string]string{
		"KarpenterSpotInterrupt-":       `{"source":["aws.ec2"],"detail-type":["EC2 Spot Instance Interruption Warning"]}`,
		"KarpenterInstanceRebalance-":   `{"source":["aws.ec2"],"detail-type":["EC2 Instance Rebalance Recommendation"]}`,
		"KarpenterInstanceStateChange-": `{"source":["aws.ec2"],"detail-type":["EC2 Instance State-change Notification"]}`,
		"KarpenterHealthEvent-":         `{"source":["aws.health"],"detail-type":["AWS Health Event"]}`,
	} {
		name += "20261129000000000000000001"
		_, err := cluster.events.PutRule(ctx, &eventbridge.PutRuleInput{Name: aws.String(name), EventPattern: aws.String(pattern)})
		must(t, err)
		_, err = cluster.events.PutTargets(ctx, &eventbridge.PutTargetsInput{Rule: aws.String(name), Targets: []ebtypes.Target{{Id: aws.String("KarpenterInterruptionQueueTarget"), Arn: aws.String(attrs.Attributes["QueueArn"])}}})
		must(t, err)
		k.rules = append(k.rules, name)
	}
	return k
}

func hasAccessEntry(eksClient *eks.Client, principal string) bool {
	_, err := eksClient.DescribeAccessEntry(context.Background(), &eks.DescribeAccessEntryInput{ClusterName: aws.String("e2e"), PrincipalArn: aws.String(principal)})
	return err == nil
}

// destroyAllButTheNodeRole is what applying the switch's step 5 does to
// module.karpenter: everything but what its removed blocks keep goes.
func (k *karpenterModuleResources) destroyAllButTheNodeRole(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	for _, rule := range k.rules {
		_, err := k.cluster.events.RemoveTargets(ctx, &eventbridge.RemoveTargetsInput{Rule: aws.String(rule), Ids: []string{"KarpenterInterruptionQueueTarget"}})
		must(t, err)
		_, err = k.cluster.events.DeleteRule(ctx, &eventbridge.DeleteRuleInput{Name: aws.String(rule)})
		must(t, err)
	}
	_, err := k.cluster.clients.SQS.DeleteQueue(ctx, &sqs.DeleteQueueInput{QueueUrl: aws.String(k.queueURL)})
	must(t, err)
	_, err = k.eks.DeletePodIdentityAssociation(ctx, &eks.DeletePodIdentityAssociationInput{ClusterName: aws.String("e2e"), AssociationId: aws.String(k.association)})
	must(t, err)
	_, err = k.cluster.clients.IAM.DeleteRolePolicy(ctx, &iam.DeleteRolePolicyInput{RoleName: aws.String(k.role), PolicyName: aws.String("KarpenterController")})
	must(t, err)
	_, err = k.cluster.clients.IAM.DeleteRole(ctx, &iam.DeleteRoleInput{RoleName: aws.String(k.role)})
	must(t, err)
}

// karpenterChart is what Karpenter's Helm release runs in kube-system: its
// ServiceAccount and Deployment (its controller does nothing here).
type karpenterChart struct {
	objs []client.Object
	c    client.Client
}

func installKarpenterChart(t *testing.T, c client.Client) *karpenterChart {
	t.Helper()
	labels := map[string]string{"app.kubernetes.io/name": "karpenter", "app.kubernetes.io/instance": "karpenter", "app.kubernetes.io/managed-by": "Helm"}
	one := int32(1)
	deploy := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "karpenter", Labels: labels},
		Spec: appsv1.DeploymentSpec{Replicas: &one, Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{ServiceAccountName: "karpenter",
				Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
					NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: v1.LabelNodePool, Operator: corev1.NodeSelectorOpDoesNotExist}}}}}}},
				Containers: []corev1.Container{{Name: "controller", Image: "public.ecr.aws/karpenter/controller:1.15.1"}}}}}}
	k := &karpenterChart{c: c, objs: []client.Object{&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "karpenter", Labels: labels}}, deploy}}
	for _, o := range k.objs {
		must(t, c.Create(context.Background(), o))
	}
	return k
}

// uninstall is `helm uninstall karpenter -n kube-system`: the release's objects go;
// the CRDs of its crds/ directory stay.
func (k *karpenterChart) uninstall(t *testing.T) {
	t.Helper()
	for _, o := range k.objs {
		must(t, k.c.Delete(context.Background(), o, client.PropagationPolicy(metav1.DeletePropagationForeground)))
	}
	eventually(t, 30*time.Second, "Karpenter's Deployment gone", func() error {
		for _, o := range k.objs {
			if err := k.c.Get(context.Background(), client.ObjectKeyFromObject(o), o); !apierrors.IsNotFound(err) {
				return fmt.Errorf("%s %s still there (%v)", o.GetObjectKind().GroupVersionKind().Kind, o.GetName(), err)
			}
		}
		return nil
	})
}

// stopWithItsPods stops proc, the process that stands for the controller
// Deployment's pod, when the pods are deleted, and deletes the pod objects only once
// it has exited, as a kubelet does (kwok leaves pods annotated e2e.dovetail.sh/kubelet
// to the test); until then they hold the foreground deletion of the Deployment. The
// first channel closes when it is done; the second says what the destroy removed
// before the process had exited.
func stopWithItsPods(t *testing.T, c client.Client, proc *testenv.ControllerProcess) (<-chan struct{}, <-chan string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	selector := client.MatchingLabels{"app.kubernetes.io/name": "dovetail"}
	var pods corev1.PodList
	must(t, c.List(ctx, &pods, client.InNamespace("dovetail"), selector))
	if len(pods.Items) == 0 {
		t.Fatal("the controller Deployment has no pods")
	}
	for i := range pods.Items {
		patch := client.MergeFrom(pods.Items[i].DeepCopy())
		metav1.SetMetaDataAnnotation(&pods.Items[i].ObjectMeta, "e2e.dovetail.sh/kubelet", "test")
		must(t, c.Patch(ctx, &pods.Items[i], patch))
	}
	done := make(chan struct{})
	early := make(chan string, 16)
	go func() {
		defer close(done)
		defer close(early)
		for ctx.Err() == nil {
			var now corev1.PodList
			if err := c.List(ctx, &now, client.InNamespace("dovetail"), selector); err == nil &&
				slices.ContainsFunc(now.Items, func(p corev1.Pod) bool { return p.DeletionTimestamp != nil }) {
				proc.Terminate()
				// Until the pods go, the hand-over must have removed nothing the
				// process needs or writes.
				if err := c.Get(ctx, client.ObjectKey{Name: "dovetail"}, &rbacv1.ClusterRole{}); err != nil {
					early <- fmt.Sprintf("the controller's ClusterRole before its pods were gone: %v", err)
				}
				var claims v1.NodeClaimList
				if err := c.List(ctx, &claims); err != nil || !slices.ContainsFunc(claims.Items, func(nc v1.NodeClaim) bool { return nc.Annotations["dovetail.sh/template-labels"] != "" }) {
					early <- fmt.Sprintf("Dovetail's annotations were stripped from the claims before its pods were gone (%v)", err)
				}
				for i := range now.Items {
					if err := c.Delete(ctx, &now.Items[i], client.GracePeriodSeconds(0)); err != nil && !apierrors.IsNotFound(err) {
						early <- fmt.Sprintf("deleting pod %s: %v", now.Items[i].Name, err)
					}
				}
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()
	return done, early
}

// dovetailLeftInCluster fails on anything of Dovetail's the rollback should have
// removed from the cluster, and on anything of Karpenter's it should have kept.
func dovetailLeftInCluster(t *testing.T, c client.Client) {
	t.Helper()
	ctx := context.Background()
	values := templates.DefaultValues()
	values.Image, values.Settings.ClusterName = testenv.ControllerImage, "e2e"
	objs, err := templates.Manifests(values)
	must(t, err)
	for _, o := range objs {
		live := &unstructured.Unstructured{}
		live.SetGroupVersionKind(o.GroupVersionKind())
		err := c.Get(ctx, client.ObjectKeyFromObject(o), live)
		if apierrors.IsNotFound(err) || (o.GetKind() == "Namespace" && err == nil && live.GetDeletionTimestamp() != nil) {
			continue
		}
		t.Errorf("%s %s is left (%v)", o.GetKind(), o.GetName(), err)
	}
	for name, kept := range map[string]bool{"commitments.dovetail.sh": false, "nodepools.karpenter.sh": true, "nodeclaims.karpenter.sh": true, "ec2nodeclasses.karpenter.k8s.aws": true} {
		err := c.Get(ctx, client.ObjectKey{Name: name}, &apiextensionsv1.CustomResourceDefinition{})
		if kept != (err == nil) {
			t.Errorf("CRD %s: %v; want it kept %v", name, err, kept)
		}
	}
	class := &awsv1.EC2NodeClass{}
	must(t, c.Get(ctx, client.ObjectKey{Name: "default"}, class))
	for _, k := range []string{awsv1.AnnotationEC2NodeClassHash, awsv1.AnnotationEC2NodeClassHashVersion, "karpenter.k8s.aws/retiring-instance-profiles"} {
		if v, ok := class.Annotations[k]; ok {
			t.Errorf("the class keeps %s=%s: Karpenter would not re-stamp the claims' class hashes", k, v)
		}
	}
	var nodes corev1.NodeList
	must(t, c.List(ctx, &nodes))
	for _, n := range nodes.Items {
		noDovetailAnnotations(t, "node "+n.Name, n.Annotations)
	}
	var claims v1.NodeClaimList
	must(t, c.List(ctx, &claims))
	for _, nc := range claims.Items {
		noDovetailAnnotations(t, "claim "+nc.Name, nc.Annotations)
		// Karpenter re-stamps the class hash of a claim without a Drifted condition
		// (the class's hash annotations being gone, above).
		if nc.Labels["team"] != "web" {
			t.Errorf("claim %s lost the template's label team=web: %v", nc.Name, nc.Labels)
		}
		if meta.FindStatusCondition(nc.Status.Conditions, v1.ConditionTypeDrifted) != nil {
			t.Errorf("claim %s has a Drifted condition: Karpenter would keep Dovetail's class hash and find it drifted", nc.Name)
		}
	}
}

func noDovetailAnnotations(t *testing.T, what string, annotations map[string]string) {
	t.Helper()
	for k := range annotations {
		if strings.HasPrefix(k, "dovetail.sh/") {
			t.Errorf("%s keeps Dovetail's annotation %s", what, k)
		}
	}
}

// dovetailLeftInAWS fails on anything of modules/dovetail's left in the account, and
// on the loss of the node role's access entry, which Karpenter's module takes back.
func dovetailLeftInAWS(t *testing.T, cluster *awsCluster, eksAPI *localstack.EKSAccess, nodeRoleARN string) {
	t.Helper()
	ctx := context.Background()
	if _, err := cluster.clients.SQS.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String("e2e-dovetail")}); err == nil {
		t.Error("Dovetail's interruption queue e2e-dovetail is left")
	}
	rules, err := cluster.events.ListRules(ctx, &eventbridge.ListRulesInput{NamePrefix: aws.String("e2e-dovetail")})
	must(t, err)
	for _, r := range rules.Rules {
		t.Errorf("Dovetail's EventBridge rule %s is left", aws.ToString(r.Name))
	}
	_, err = cluster.clients.IAM.GetRole(ctx, &iam.GetRoleInput{RoleName: aws.String("DovetailController-e2e")})
	var missing *iamtypes.NoSuchEntityException
	if !errors.As(err, &missing) {
		t.Errorf("Dovetail's controller role: %v; want it deleted", err)
	}
	if got := eksAPI.PodIdentityAssociations("e2e"); got["dovetail/dovetail"] != "" {
		t.Errorf("Pod Identity associations %v: Dovetail's is left", got)
	}
	if got := eksAPI.AccessEntries("e2e"); len(got) != 1 || got[nodeRoleARN] != "EC2_LINUX" {
		t.Errorf("access entries %v, want the node role's, kept", got)
	}
}
