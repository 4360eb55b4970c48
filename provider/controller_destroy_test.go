package provider_test

import (
	"context"
	"fmt"
	"regexp"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	appsv1 "k8s.io/api/apps/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	awsv1 "github.com/dovetail-sh/dovetail/controller/apis/aws/v1"
	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/tests/testenv"
)

// Destroying the controller deletes the CRDs, which would delete every NodePool and
// EC2NodeClass in the cluster. Those of the same state go first (they depend on the
// controller); one made outside Terraform stops the destroy before anything of the
// controller is deleted, and the error names it and says what to do. Once it is
// deleted, the destroy goes through.
func TestAccControllerDestroyRefusedWhileNodePoolsExist(t *testing.T) {
	acceptance(t)
	ctx := context.Background()
	stack := testenv.StartStackWithoutCRDs(t)
	kube := stack.Client
	testenv.AddSystemNodes(t, kube, 1)
	config := controllerConfig(stack.Kubeconfig, 1, "info", "2m")
	theirClass := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass", "metadata": map[string]any{"name": "theirs"},
		"spec": map[string]any{
			"role":                       "KarpenterNodeRole-demo",
			"amiSelectorTerms":           []any{map[string]any{"alias": "al2023@latest"}},
			"subnetSelectorTerms":        []any{map[string]any{"tags": map[string]any{"karpenter.sh/discovery": "demo"}}},
			"securityGroupSelectorTerms": []any{map[string]any{"tags": map[string]any{"karpenter.sh/discovery": "demo"}}},
		},
	}}
	theirPool := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": map[string]any{"name": "theirs"},
		"spec": map[string]any{"template": map[string]any{"spec": map[string]any{
			"nodeClassRef": map[string]any{"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "theirs"},
			"requirements": []any{map[string]any{"key": "kubernetes.io/arch", "operator": "In", "values": []any{"arm64"}}},
		}}},
	}}
	exists := func(obj client.Object) (bool, error) {
		err := kube.Get(ctx, client.ObjectKeyFromObject(obj), obj)
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil, err
	}
	crds := []client.Object{
		&apiextensionsv1.CustomResourceDefinition{ObjectMeta: metaName("", "nodepools.karpenter.sh")},
		&apiextensionsv1.CustomResourceDefinition{ObjectMeta: metaName("", "nodeclaims.karpenter.sh")},
		&apiextensionsv1.CustomResourceDefinition{ObjectMeta: metaName("", "ec2nodeclasses.karpenter.k8s.aws")},
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: factories,
		CheckDestroy: func(*terraform.State) error {
			for _, obj := range append(crds, &appsv1.Deployment{ObjectMeta: metaName("dovetail", "dovetail")}) {
				if ok, err := exists(obj); ok || err != nil {
					return fmt.Errorf("%T %s is still there (%v)", obj, obj.GetName(), err)
				}
			}
			return nil
		},
		Steps: []resource.TestStep{
			{Config: config},
			{
				PreConfig: func() {
					for _, obj := range []client.Object{theirClass, theirPool} {
						if err := kube.Create(ctx, obj); err != nil {
							t.Fatal(err)
						}
					}
				},
				Config:      config,
				Destroy:     true,
				ExpectError: regexp.MustCompile(`NodePools or EC2NodeClasses still exist(.|\n)*NodePool\s+theirs,\s+EC2NodeClass\s+theirs\.(.|\n)*kubectl\s+delete\s+nodepool\s+NAME`),
			},
			{
				PreConfig: func() {
					// The refused destroy deleted nothing of the controller's, nor theirs...
					for _, obj := range append(crds, theirPool, theirClass, &appsv1.Deployment{ObjectMeta: metaName("dovetail", "dovetail")}) {
						if ok, err := exists(obj); !ok {
							t.Fatalf("%T %s is gone after the refused destroy (%v)", obj, obj.GetName(), err)
						}
					}
					// ...while the state's own pool and class, which depend on the
					// controller, went first.
					for _, obj := range []client.Object{&v1.NodePool{ObjectMeta: metaName("", "general")}, &awsv1.EC2NodeClass{ObjectMeta: metaName("", "default")}} {
						if ok, err := exists(obj); ok || err != nil {
							t.Fatalf("%T %s is still there (%v); the destroy should have deleted it before the controller", obj, obj.GetName(), err)
						}
					}
					for _, obj := range []client.Object{theirPool, theirClass} {
						if err := kube.Delete(ctx, obj); err != nil {
							t.Fatal(err)
						}
					}
				},
				Config:  config,
				Destroy: true,
			},
		},
	})
}
