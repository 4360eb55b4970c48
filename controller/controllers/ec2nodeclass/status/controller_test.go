package status_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	awsv1 "github.com/dovetail-sh/dovetail/controller/apis/aws/v1"
	"github.com/dovetail-sh/dovetail/controller/cloudprovider/aws/nodeclass"
	"github.com/dovetail-sh/dovetail/controller/controllers/ec2nodeclass/status"
	"github.com/dovetail-sh/dovetail/controller/operator"
	"github.com/dovetail-sh/dovetail/tests/testenv"
)

func class(name string, mutate func(*awsv1.EC2NodeClassSpec)) *awsv1.EC2NodeClass {
	nc := &awsv1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: awsv1.EC2NodeClassSpec{
		Role:                       "KarpenterNodeRole-demo",
		AMISelectorTerms:           []awsv1.AMISelectorTerm{{Alias: "al2023@latest"}},
		SubnetSelectorTerms:        []awsv1.SubnetSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": "demo"}}},
		SecurityGroupSelectorTerms: []awsv1.SecurityGroupSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": "demo"}}},
	}}
	if mutate != nil {
		mutate(&nc.Spec)
	}
	return nc
}

func TestEC2NodeClassStatus(t *testing.T) {
	if testing.Short() {
		t.Skip("starts kube-apiserver and moto_server")
	}
	api := testenv.StartAPIServer(t)
	clients := testenv.AWSClients(t, testenv.StartMoto(t), "us-west-2")
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	testenv.SeedAWS(t, ctx, clients, "demo", "10.30", "us-west-2a", "us-west-2b")
	skip := true
	mgr, err := ctrl.NewManager(api.Config, ctrl.Options{Scheme: operator.Scheme(), Metrics: metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0", Controller: ctrlconfig.Controller{SkipNameValidation: &skip}})
	if err != nil {
		t.Fatal(err)
	}
	amis := &nodeclass.AMIResolver{EC2: clients.EC2, SSM: clients.SSM, SSMPrefix: testenv.SSMPrefix, KubernetesVersion: "1.33"}
	if err := status.NewController(mgr.GetClient(), clients.EC2, amis, clients.IAM, "demo", "us-west-2", clock.RealClock{}).Register(ctx, mgr); err != nil {
		t.Fatal(err)
	}
	go func() { _ = mgr.Start(ctx) }()
	c := api.Client

	good := class("default", nil)
	if err := c.Create(ctx, good); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, "the class becomes Ready", func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(good), good); err != nil {
			return err
		}
		if !meta.IsStatusConditionTrue(good.Status.Conditions, awsv1.ConditionTypeReady) {
			return fmt.Errorf("conditions %+v", good.Status.Conditions)
		}
		return nil
	})
	if len(good.Status.Subnets) != 2 || len(good.Status.SecurityGroups) != 1 || len(good.Status.AMIs) != 2 {
		t.Errorf("status = %d subnets, %d security groups, %d AMIs; want 2, 1, 2 (an image per architecture)", len(good.Status.Subnets), len(good.Status.SecurityGroups), len(good.Status.AMIs))
	}
	profileName := nodeclass.InstanceProfileName("demo", "us-west-2", "default", "KarpenterNodeRole-demo")
	if good.Status.InstanceProfile != profileName {
		t.Errorf("status.instanceProfile = %q, want %q", good.Status.InstanceProfile, profileName)
	}
	profile, err := clients.IAM.GetInstanceProfile(ctx, &iam.GetInstanceProfileInput{InstanceProfileName: aws.String(profileName)})
	if err != nil || len(profile.InstanceProfile.Roles) != 1 || aws.ToString(profile.InstanceProfile.Roles[0].RoleName) != "KarpenterNodeRole-demo" {
		t.Errorf("instance profile in IAM = %+v, %v; want it holding the node role", profile, err)
	}

	bad := class("bad", func(s *awsv1.EC2NodeClassSpec) {
		s.SubnetSelectorTerms = []awsv1.SubnetSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": "elsewhere"}}}
		s.Role = "NoSuchRole"
	})
	if err := c.Create(ctx, bad); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, "the bad class reports why", func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(bad), bad); err != nil {
			return err
		}
		subnets := meta.FindStatusCondition(bad.Status.Conditions, awsv1.ConditionTypeSubnetsReady)
		profile := meta.FindStatusCondition(bad.Status.Conditions, awsv1.ConditionTypeInstanceProfileReady)
		if subnets == nil || subnets.Status != metav1.ConditionFalse || !strings.Contains(subnets.Message, "no subnet matches subnetSelectorTerms [tags {karpenter.sh/discovery=elsewhere}]") {
			return fmt.Errorf("SubnetsReady = %+v", subnets)
		}
		if profile == nil || profile.Status != metav1.ConditionFalse || !strings.Contains(profile.Message, `role "NoSuchRole" does not exist`) {
			return fmt.Errorf("InstanceProfileReady = %+v", profile)
		}
		if !meta.IsStatusConditionFalse(bad.Status.Conditions, awsv1.ConditionTypeReady) || !meta.IsStatusConditionTrue(bad.Status.Conditions, awsv1.ConditionTypeSecurityGroupsReady) {
			return fmt.Errorf("conditions %+v", bad.Status.Conditions)
		}
		return nil
	})

	// Karpenter v1.14's settings are carried out: a class with them is valid and
	// Ready (placement groups, which moto lacks, are TestPlacementGroup's).
	prefixes := int32(2)
	enabled := "enabled"
	recent := class("recent", func(s *awsv1.EC2NodeClassSpec) {
		s.IPPrefixCount = &prefixes
		s.CPUOptions = &awsv1.CPUOptions{NestedVirtualization: &enabled}
		s.NetworkInterfaces = []*awsv1.NetworkInterface{{NetworkCardIndex: 0, DeviceIndex: 0, InterfaceType: "interface"}}
	})
	if err := c.Create(ctx, recent); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, "a class with Karpenter v1.14's settings Ready", func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(recent), recent); err != nil {
			return err
		}
		if !meta.IsStatusConditionTrue(recent.Status.Conditions, awsv1.ConditionTypeValidationSucceeded) || !meta.IsStatusConditionTrue(recent.Status.Conditions, awsv1.ConditionTypeReady) {
			return fmt.Errorf("conditions %+v", recent.Status.Conditions)
		}
		return nil
	})
	// v1.15's free-form kubelet: the API server keeps fields the typed ones lack; an
	// upstream field is valid on AL2023, one upstream does not have is refused.
	for name, want := range map[string]string{"kubelet-upstream": "", "kubelet-unknown": "InvalidKubeletConfiguration"} {
		field := `"shutdownGracePeriod":"30s"`
		if want != "" {
			field = `"notAField":1`
		}
		obj := &unstructured.Unstructured{}
		raw := `{"apiVersion":"karpenter.k8s.aws/v1","kind":"EC2NodeClass","metadata":{"name":"` + name + `"},"spec":{"role":"KarpenterNodeRole-demo",` +
			`"amiSelectorTerms":[{"alias":"al2023@latest"}],"subnetSelectorTerms":[{"tags":{"karpenter.sh/discovery":"demo"}}],` +
			`"securityGroupSelectorTerms":[{"tags":{"karpenter.sh/discovery":"demo"}}],"kubelet":{"maxPods":40,` + field + `}}}`
		if err := obj.UnmarshalJSON([]byte(raw)); err != nil {
			t.Fatal(err)
		}
		if err := c.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
		free := &awsv1.EC2NodeClass{}
		testenv.Eventually(t, 30*time.Second, "class "+name+" validated", func() error {
			if err := c.Get(ctx, client.ObjectKey{Name: name}, free); err != nil {
				return err
			}
			v := meta.FindStatusCondition(free.Status.Conditions, awsv1.ConditionTypeValidationSucceeded)
			switch {
			case v == nil:
				return fmt.Errorf("no ValidationSucceeded yet")
			case want == "" && v.Status != metav1.ConditionTrue:
				return fmt.Errorf("ValidationSucceeded %+v", v)
			case want != "" && (v.Status != metav1.ConditionFalse || v.Reason != want):
				return fmt.Errorf("ValidationSucceeded %+v, want reason %s", v, want)
			}
			return nil
		})
		if k := free.Spec.Kubelet; k == nil || k.MaxPods == nil || *k.MaxPods != 40 || len(k.Unmanaged) != 1 {
			t.Errorf("%s: kubelet read back as %+v; want maxPods 40 and the other field kept", name, k)
		}
	}
	if !meta.IsStatusConditionTrue(good.Status.Conditions, awsv1.ConditionTypeValidationSucceeded) {
		t.Errorf("the good class's ValidationSucceeded is not True: %+v", good.Status.Conditions)
	}

	given := class("given", func(s *awsv1.EC2NodeClassSpec) { s.Role = ""; s.InstanceProfile = aws.String("platform-nodes") })
	if err := c.Create(ctx, given); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, "a given instance profile is used as is", func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(given), given); err != nil {
			return err
		}
		if given.Status.InstanceProfile != "platform-nodes" || !meta.IsStatusConditionTrue(given.Status.Conditions, awsv1.ConditionTypeInstanceProfileReady) {
			return fmt.Errorf("instanceProfile %q, conditions %+v", given.Status.InstanceProfile, given.Status.Conditions)
		}
		return nil
	})

	if err := c.Delete(ctx, good); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, "the class and its instance profile are gone", func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(good), good); !apierrors.IsNotFound(err) {
			return fmt.Errorf("class still there (%v)", err)
		}
		if _, err := clients.IAM.GetInstanceProfile(ctx, &iam.GetInstanceProfileInput{InstanceProfileName: aws.String(profileName)}); err == nil {
			return fmt.Errorf("instance profile %s still exists", profileName)
		}
		return nil
	})
}
