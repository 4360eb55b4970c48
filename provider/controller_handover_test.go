package provider_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	awsv1 "github.com/dovetail-sh/dovetail/controller/apis/aws/v1"
	"github.com/dovetail-sh/dovetail/controller/apis/dovetail/v1alpha1"
	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/tests/localstack"
	"github.com/dovetail-sh/dovetail/tests/testenv"
)

// keep_crds_on_destroy hands the cluster to the next controller: the destroy goes
// through while NodePools and NodeClaims exist, removes the controller's objects,
// keeps the Karpenter CRDs and every object they hold as it was, and takes Dovetail's
// own annotations off the claims. Dovetail's Commitment CRD goes with it only when
// no Commitment would go with the CRD.
func TestAccControllerHandsOverOnDestroy(t *testing.T) {
	acceptance(t)
	ctx := context.Background()
	stack := testenv.StartStackWithoutCRDs(t)
	kube := stack.Client
	testenv.AddSystemNodes(t, kube, 1)
	config := kubeProvider(stack.Kubeconfig) + fmt.Sprintf(`
resource "dovetail_controller" "this" {
  cluster_name         = "demo"
  aws_region           = "us-west-2"
  image                = %q
  replicas             = 1
  keep_crds_on_destroy = true
}
`, testenv.ControllerImage)

	class := localstack.NodeClass("default")
	// Karpenter's class hash (which Dovetail never rewrites) and Dovetail's retiring profiles.
	class.Annotations = map[string]string{"karpenter.k8s.aws/ec2nodeclass-hash": "123", "karpenter.k8s.aws/ec2nodeclass-hash-version": "v6",
		"karpenter.k8s.aws/retiring-instance-profiles": `{"demo_1":"2026-11-29T00:00:00Z"}`, "team": "platform"}
	pool := localstack.NodePool("default", localstack.Requirement(v1.LabelCapacityType, v1.OpIn, v1.CapacityTypeOnDemand))
	ref := pool.Spec.Template.Spec.NodeClassRef
	karpenters := map[string]string{awsv1.AnnotationEC2NodeClassHash: "4920190224545436312", awsv1.AnnotationEC2NodeClassHashVersion: awsv1.EC2NodeClassHashVersion}
	claim := func() *v1.NodeClaim {
		ann := map[string]string{"dovetail.sh/template-labels": "team", "dovetail.sh/planned-price": "0.096"}
		for k, v := range karpenters {
			ann[k] = v
		}
		return &v1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "default-abcde", Labels: map[string]string{v1.LabelNodePool: "default"}, Annotations: ann},
			Spec: v1.NodeClaimSpec{NodeClassRef: ref, Requirements: []v1.NodeSelectorRequirementWithMinValues{{Key: v1.LabelCapacityType,
				RequirementBody: v1.RequirementBody{Operator: v1.OpIn, Values: []string{v1.CapacityTypeOnDemand}}}}}}
	}
	commitment := &v1alpha1.Commitment{ObjectMeta: metav1.ObjectMeta{Name: "ri-m5"}, Spec: v1alpha1.CommitmentSpec{
		ReservedInstances: []v1alpha1.ReservedInstance{{InstanceType: "m5.large", Zone: "us-west-2a", Count: 1}}}}
	gone := func(obj client.Object) error {
		if err := kube.Get(ctx, client.ObjectKeyFromObject(obj), obj); !apierrors.IsNotFound(err) {
			return fmt.Errorf("%T %s is still there (%v)", obj, obj.GetName(), err)
		}
		return nil
	}
	commitmentCRD := &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metaName("", "commitments.dovetail.sh")}
	handedOver := func(withCommitment bool) func(*terraform.State) error {
		return func(*terraform.State) error {
			for _, obj := range []client.Object{&appsv1.Deployment{ObjectMeta: metaName("dovetail", "dovetail")}, &rbacv1.ClusterRole{ObjectMeta: metaName("", "dovetail")},
				&rbacv1.ClusterRoleBinding{ObjectMeta: metaName("", "dovetail")}} {
				if err := gone(obj); err != nil {
					return err
				}
			}
			for _, obj := range []client.Object{&apiextensionsv1.CustomResourceDefinition{ObjectMeta: metaName("", "nodepools.karpenter.sh")},
				&apiextensionsv1.CustomResourceDefinition{ObjectMeta: metaName("", "nodeclaims.karpenter.sh")},
				&apiextensionsv1.CustomResourceDefinition{ObjectMeta: metaName("", "ec2nodeclasses.karpenter.k8s.aws")},
				&awsv1.EC2NodeClass{ObjectMeta: metaName("", "default")}, &v1.NodePool{ObjectMeta: metaName("", "default")}} {
				if err := kube.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
					return fmt.Errorf("%T %s: %v; the hand-over must keep it", obj, obj.GetName(), err)
				}
			}
			if err := kube.Get(ctx, client.ObjectKeyFromObject(class), class); err != nil {
				return err
			}
			if len(class.Annotations) != 1 || class.Annotations["team"] != "platform" {
				return fmt.Errorf("the EC2NodeClass has annotations %v; want only the user's team=platform (Karpenter re-stamps its hashes when they are gone)", class.Annotations)
			}
			node := &corev1.Node{}
			if err := kube.Get(ctx, client.ObjectKey{Name: "system-0"}, node); err != nil {
				return err
			}
			if _, ok := node.Annotations["dovetail.sh/planned-price"]; ok {
				return fmt.Errorf("the Node keeps Dovetail's annotations: %v", node.Annotations)
			}
			got := &v1.NodeClaim{}
			if err := kube.Get(ctx, client.ObjectKey{Name: "default-abcde"}, got); err != nil {
				return fmt.Errorf("the NodeClaim: %v; the hand-over must keep it", err)
			}
			if got.DeletionTimestamp != nil || len(got.Annotations) != len(karpenters) {
				return fmt.Errorf("the NodeClaim has annotations %v (deleting: %v); want Karpenter's only, %v", got.Annotations, got.DeletionTimestamp != nil, karpenters)
			}
			for k, v := range karpenters {
				if got.Annotations[k] != v {
					return fmt.Errorf("the NodeClaim's %s is %q, want %q", k, got.Annotations[k], v)
				}
			}
			if !withCommitment {
				return gone(commitmentCRD)
			}
			// Deleting the CRD would have deleted the Commitment: both stay.
			return kube.Get(ctx, client.ObjectKeyFromObject(commitment), &v1alpha1.Commitment{})
		}
	}
	create := func(objs ...client.Object) func() {
		return func() {
			for _, obj := range objs {
				if err := kube.Create(ctx, obj); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: factories,
		CheckDestroy:             handedOver(true),
		Steps: []resource.TestStep{
			{Config: config},
			{PreConfig: func() {
				create(class, pool, claim(), commitment)()
				// Registration copies a claim's annotations onto its Node.
				node := &corev1.Node{}
				if err := kube.Get(ctx, client.ObjectKey{Name: "system-0"}, node); err != nil {
					t.Fatal(err)
				}
				patch := client.MergeFrom(node.DeepCopy())
				metav1.SetMetaDataAnnotation(&node.ObjectMeta, "dovetail.sh/planned-price", "0.096")
				if err := kube.Patch(ctx, node, patch); err != nil {
					t.Fatal(err)
				}
			}, Config: config, Destroy: true},
		},
	})
	// Without a Commitment, the CRD that only Dovetail reads goes too.
	if err := kube.Delete(ctx, commitment); err != nil {
		t.Fatal(err)
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: factories,
		CheckDestroy:             handedOver(false),
		Steps: []resource.TestStep{
			{PreConfig: func() {
				c := claim()
				if err := kube.Get(ctx, client.ObjectKeyFromObject(c), c); err != nil {
					t.Fatal(err)
				}
				c.Annotations["dovetail.sh/disruption"] = `{"id":"x"}`
				if err := kube.Update(ctx, c); err != nil {
					t.Fatal(err)
				}
			}, Config: config},
			{Config: config, Destroy: true},
		},
	})
}
