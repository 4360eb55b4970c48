package status_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	iamtypes "github.com/aws/aws-sdk-go-v2/service/iam/types"
	"github.com/aws/smithy-go"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	awsv1 "github.com/dovetail-sh/dovetail/controller/apis/aws/v1"
	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/controller/cloudprovider/aws/nodeclass"
	"github.com/dovetail-sh/dovetail/controller/controllers/ec2nodeclass/status"
	"github.com/dovetail-sh/dovetail/tests/testenv"
)

// failingIAM is the emulator's IAM, except that AddRoleToInstanceProfile fails while
// failAdd is set, as IAM does when throttled or denied.
type failingIAM struct {
	nodeclass.IAMAPI
	failAdd atomic.Bool
}

func (f *failingIAM) AddRoleToInstanceProfile(ctx context.Context, in *iam.AddRoleToInstanceProfileInput, opts ...func(*iam.Options)) (*iam.AddRoleToInstanceProfileOutput, error) {
	if f.failAdd.Load() {
		return nil, &smithy.GenericAPIError{Code: "ServiceFailure", Message: "IAM is having a bad day"}
	}
	return f.IAMAPI.AddRoleToInstanceProfile(ctx, in, opts...)
}

// roles returns the profile's roles, or nil and false when it does not exist.
func roles(t *testing.T, api nodeclass.IAMAPI, name string) ([]string, bool) {
	t.Helper()
	p, err := nodeclass.GetInstanceProfile(context.Background(), api, name)
	if err != nil {
		t.Fatal(err)
	}
	if p == nil {
		return nil, false
	}
	return p.Roles, true
}

// Changing a class's role gives its new nodes a new profile, and leaves the profile
// the running nodes have (and its role) alone until none uses it.
func TestRoleChangeKeepsRunningNodesCredentials(t *testing.T) {
	if testing.Short() {
		t.Skip("starts kube-apiserver and moto_server")
	}
	api := testenv.StartAPIServer(t)
	clients := testenv.AWSClients(t, testenv.StartMoto(t), "us-west-2")
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	seeded := testenv.SeedAWS(t, ctx, clients, "demo", "10.30", "us-west-2a", "us-west-2b")
	const oldRole, newRole = "KarpenterNodeRole-demo", "NodeRole-next"
	if _, err := clients.IAM.CreateRole(ctx, &iam.CreateRoleInput{RoleName: aws.String(newRole),
		AssumeRolePolicyDocument: aws.String(`{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"Service":"ec2.amazonaws.com"},"Action":"sts:AssumeRole"}]}`)}); err != nil {
		t.Fatal(err)
	}
	iamAPI := &failingIAM{IAMAPI: clients.IAM}
	clk := clocktesting.NewFakeClock(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC))
	amis := &nodeclass.AMIResolver{EC2: clients.EC2, SSM: clients.SSM, SSMPrefix: testenv.SSMPrefix, KubernetesVersion: "1.33"}
	ctrl := status.NewController(api.Client, clients.EC2, amis, iamAPI, "demo", "us-west-2", clk)
	kube := api.Client
	reconcile := func(nc *awsv1.EC2NodeClass) {
		t.Helper()
		if err := kube.Get(ctx, client.ObjectKeyFromObject(nc), nc); err != nil {
			t.Fatal(err)
		}
		if _, err := ctrl.Reconcile(ctx, nc); err != nil {
			t.Fatal(err)
		}
		if err := kube.Get(ctx, client.ObjectKeyFromObject(nc), nc); err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
	}

	nc := class("default", nil)
	if err := kube.Create(ctx, nc); err != nil {
		t.Fatal(err)
	}
	reconcile(nc)
	oldProfile := nc.Status.InstanceProfile
	if got, _ := roles(t, clients.IAM, oldProfile); oldProfile == "" || len(got) != 1 || got[0] != oldRole {
		t.Fatalf("profile %q holds %v; want the class's role", oldProfile, got)
	}
	// A node of the class, launched with the profile.
	run, err := clients.EC2.RunInstances(ctx, &ec2.RunInstancesInput{ImageId: aws.String(seeded.Images["x86_64"]), MinCount: aws.Int32(1), MaxCount: aws.Int32(1),
		SubnetId: aws.String(seeded.Subnets["us-west-2a"]), IamInstanceProfile: &ec2types.IamInstanceProfileSpecification{Name: aws.String(oldProfile)},
		TagSpecifications: []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeInstance, Tags: []ec2types.Tag{
			{Key: aws.String("kubernetes.io/cluster/demo"), Value: aws.String("owned")}, {Key: aws.String(v1.LabelEC2NodeClass), Value: aws.String("default")}}}}})
	if err != nil {
		t.Fatal(err)
	}
	node := aws.ToString(run.Instances[0].InstanceId)

	// The new role cannot be added: the nodes keep their profile and role, the class
	// keeps launching with them, and says why it is not ready.
	iamAPI.failAdd.Store(true)
	patch := client.MergeFrom(nc.DeepCopy())
	nc.Spec.Role = newRole
	if err := kube.Patch(ctx, nc, patch); err != nil {
		t.Fatal(err)
	}
	reconcile(nc)
	if got, _ := roles(t, clients.IAM, oldProfile); len(got) != 1 || got[0] != oldRole {
		t.Errorf("after a failed role change the nodes' profile %s holds %v; want %s still (the nodes would lose their credentials)", oldProfile, got, oldRole)
	}
	if nc.Status.InstanceProfile != oldProfile {
		t.Errorf("status.instanceProfile = %q after a failed role change, want %q kept", nc.Status.InstanceProfile, oldProfile)
	}
	cond := meta.FindStatusCondition(nc.Status.Conditions, awsv1.ConditionTypeInstanceProfileReady)
	if cond == nil || cond.Status != metav1.ConditionFalse || !strings.Contains(cond.Message, "adding role "+newRole) {
		t.Errorf("InstanceProfileReady = %+v; want False saying the role could not be added", cond)
	}
	newProfile := nodeclass.InstanceProfileName("demo", "us-west-2", "default", newRole)
	if _, exists := roles(t, clients.IAM, newProfile); exists {
		t.Errorf("the failed change left the empty profile %s behind", newProfile)
	}

	// IAM recovers: new launches get a new profile with the new role; the running
	// node's profile stays as it is.
	iamAPI.failAdd.Store(false)
	reconcile(nc)
	if nc.Status.InstanceProfile != newProfile || !meta.IsStatusConditionTrue(nc.Status.Conditions, awsv1.ConditionTypeReady) {
		t.Fatalf("status.instanceProfile = %q (want %q), conditions %+v", nc.Status.InstanceProfile, newProfile, nc.Status.Conditions)
	}
	if got, _ := roles(t, clients.IAM, newProfile); len(got) != 1 || got[0] != newRole {
		t.Errorf("the new profile holds %v, want %s", got, newRole)
	}
	if got, _ := roles(t, clients.IAM, oldProfile); len(got) != 1 || got[0] != oldRole {
		t.Errorf("the old profile holds %v while a node uses it; want %s", got, oldRole)
	}
	if !strings.Contains(nc.Annotations[status.AnnotationRetiringInstanceProfiles], oldProfile) {
		t.Errorf("the old profile is not recorded as retiring: %v", nc.Annotations)
	}
	clk.Step(status.RetireAfter)
	reconcile(nc)
	if got, _ := roles(t, clients.IAM, oldProfile); len(got) != 1 || got[0] != oldRole {
		t.Errorf("the old profile holds %v while a node still uses it; want %s", got, oldRole)
	}

	// The node goes: so does its profile, at the class's next refresh.
	if _, err := clients.EC2.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: []string{node}}); err != nil {
		t.Fatal(err)
	}
	clk.Step(status.DefaultRefresh)
	reconcile(nc)
	if _, exists := roles(t, clients.IAM, oldProfile); exists {
		t.Errorf("the old profile %s is still there with no node using it", oldProfile)
	}
	if _, ok := nc.Annotations[status.AnnotationRetiringInstanceProfiles]; ok {
		t.Errorf("retiring profiles still recorded: %v", nc.Annotations)
	}

	// A class whose profile predates role-named profiles keeps it while it holds
	// the role.
	legacyName := nodeclass.LegacyInstanceProfileName("demo", "us-west-2", "legacy")
	var tags []iamtypes.Tag
	for k, v := range nodeclass.InstanceProfileTags("demo", "us-west-2", "legacy") {
		tags = append(tags, iamtypes.Tag{Key: aws.String(k), Value: aws.String(v)})
	}
	if _, err := clients.IAM.CreateInstanceProfile(ctx, &iam.CreateInstanceProfileInput{InstanceProfileName: aws.String(legacyName), Tags: tags}); err != nil {
		t.Fatal(err)
	}
	if _, err := clients.IAM.AddRoleToInstanceProfile(ctx, &iam.AddRoleToInstanceProfileInput{InstanceProfileName: aws.String(legacyName), RoleName: aws.String(oldRole)}); err != nil {
		t.Fatal(err)
	}
	legacy := class("legacy", nil)
	if err := kube.Create(ctx, legacy); err != nil {
		t.Fatal(err)
	}
	statusPatch := client.MergeFrom(legacy.DeepCopy())
	legacy.Status.InstanceProfile = legacyName
	if err := kube.Status().Patch(ctx, legacy, statusPatch); err != nil {
		t.Fatal(err)
	}
	reconcile(legacy)
	if legacy.Status.InstanceProfile != legacyName {
		t.Errorf("a class on a profile from before role names moved to %q; want %q kept", legacy.Status.InstanceProfile, legacyName)
	}
	if _, exists := roles(t, clients.IAM, nodeclass.InstanceProfileName("demo", "us-west-2", "legacy", oldRole)); exists {
		t.Error("a second profile was made for a role the class's profile already holds")
	}

	// Deleting the classes removes every profile made for them.
	for _, c := range []*awsv1.EC2NodeClass{nc, legacy} {
		if err := kube.Delete(ctx, c); err != nil {
			t.Fatal(err)
		}
		reconcile(c)
	}
	for _, name := range []string{newProfile, legacyName} {
		if _, exists := roles(t, clients.IAM, name); exists {
			t.Errorf("profile %s is left after its class was deleted", name)
		}
	}
}
