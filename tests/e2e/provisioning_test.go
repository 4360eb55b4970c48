// Package e2e runs Dovetail against the whole local stack: etcd, kube-apiserver,
// kube-scheduler, kube-controller-manager and kwok, with the controller and the kwok
// cloud provider. Pods really go Pending, get nodes, and run.
package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/tests/localstack"
)

func TestProvisioningEndToEnd(t *testing.T) {
	c := startCluster(t)
	ctx := context.Background()
	general := localstack.GeneralNodePool("default")
	// The general pool is preferred; pods that need a team's pool say so.
	general.Spec.Weight = ptr(int32(10))
	gpu := localstack.NodePool("gpu", localstack.Requirement(v1.LabelInstanceFamily, v1.OpIn, "g4dn", "g5"))
	gpu.Spec.Template.Spec.Taints = []corev1.Taint{{Key: "nvidia.com/gpu", Value: "true", Effect: corev1.TaintEffectNoSchedule}}
	billing := localstack.NodePool("billing",
		localstack.Requirement(v1.LabelCapacityType, v1.OpIn, v1.CapacityTypeSpot, v1.CapacityTypeOnDemand),
		localstack.Requirement(v1.LabelInstanceCategory, v1.OpIn, "c", "m"))
	billing.Spec.Template.Labels = map[string]string{"billing-team": "my-team"}
	billing.Spec.Template.Annotations = map[string]string{"example.com/cost-center": "billing-42"}
	for _, np := range []*v1.NodePool{general, gpu, billing} {
		must(t, c.Create(ctx, np))
	}

	must(t, c.Create(ctx, localstack.Deployment("inflate", 0, "1", "1Gi")))

	t.Run("scale inflate to 3", func(t *testing.T) {
		scale(t, c, "inflate", 3)
		verifyPlacement(t, c, allRunning(t, c, "inflate", 3, 60*time.Second), "default")
	})

	t.Run("scale inflate to 100", func(t *testing.T) {
		scale(t, c, "inflate", 100)
		verifyPlacement(t, c, allRunning(t, c, "inflate", 100, 120*time.Second), "default")
	})

	t.Run("GPU pods land only on the GPU pool", func(t *testing.T) {
		must(t, c.Create(ctx, localstack.Deployment("gpu-job", 2, "1", "2Gi", func(s *corev1.PodSpec) {
			s.Containers[0].Resources.Requests["nvidia.com/gpu"] = resource.MustParse("1")
			s.Containers[0].Resources.Limits = corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}
			s.Tolerations = []corev1.Toleration{{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}
		})))
		pods := allRunning(t, c, "gpu-job", 2, 60*time.Second)
		verifyPlacement(t, c, pods, "gpu")
		for _, p := range pods {
			node := &corev1.Node{}
			must(t, c.Get(ctx, client.ObjectKey{Name: p.Spec.NodeName}, node))
			if q := node.Status.Allocatable["nvidia.com/gpu"]; q.Value() < 1 {
				t.Errorf("gpu pod %s runs on %s without a GPU", p.Name, node.Labels[v1.LabelInstanceType])
			}
		}
	})

	t.Run("billing-team affinity lands only on the billing pool", func(t *testing.T) {
		must(t, c.Create(ctx, localstack.Deployment("billing", 4, "500m", "512Mi", func(s *corev1.PodSpec) {
			s.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
				NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "billing-team", Operator: corev1.NodeSelectorOpIn, Values: []string{"my-team"}}}}},
			}}}
			s.NodeSelector = map[string]string{v1.LabelArch: v1.ArchitectureArm64}
		})))
		pods := allRunning(t, c, "billing", 4, 60*time.Second)
		verifyPlacement(t, c, pods, "billing")
		// The pool template's annotations reach the Node, as its labels do.
		for _, p := range pods {
			node := &corev1.Node{}
			must(t, c.Get(ctx, client.ObjectKey{Name: p.Spec.NodeName}, node))
			if got := node.Annotations["example.com/cost-center"]; got != "billing-42" {
				t.Errorf("node %s has annotation example.com/cost-center=%q, the template says billing-42", node.Name, got)
			}
		}
	})

	t.Run("nodepool status counts its nodes", func(t *testing.T) {
		eventually(t, 30*time.Second, "default nodepool status", func() error {
			np := &v1.NodePool{}
			if err := c.Get(ctx, client.ObjectKey{Name: "default"}, np); err != nil {
				return err
			}
			var claims v1.NodeClaimList
			if err := c.List(ctx, &claims, client.MatchingLabels{v1.LabelNodePool: "default"}); err != nil {
				return err
			}
			if np.Status.Nodes == nil || *np.Status.Nodes != int64(len(claims.Items)) || np.Status.Resources.Cpu().Value() < 100 {
				return fmt.Errorf("status nodes=%v cpu=%s, %d nodeclaims", np.Status.Nodes, np.Status.Resources.Cpu(), len(claims.Items))
			}
			return nil
		})
	})

	t.Run("a PodDisruptionBudget blocks the drain until it allows it", func(t *testing.T) {
		pods, err := podsOf(c, "billing")
		must(t, err)
		pdb := &policyv1.PodDisruptionBudget{
			ObjectMeta: metav1.ObjectMeta{Name: "billing", Namespace: "default"},
			Spec:       policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr(intstr.FromInt32(4)), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "billing"}}},
		}
		must(t, c.Create(ctx, pdb))
		eventually(t, 30*time.Second, "PDB observed", func() error {
			must(t, c.Get(ctx, client.ObjectKeyFromObject(pdb), pdb))
			if pdb.Status.ObservedGeneration == 0 && pdb.Status.ExpectedPods == 0 {
				return fmt.Errorf("disruption controller has not computed the PDB")
			}
			return nil
		})
		claim := claimOfNode(t, c, pods[0].Spec.NodeName)
		must(t, c.Delete(ctx, claim))
		time.Sleep(3 * time.Second)
		if err := c.Get(ctx, client.ObjectKeyFromObject(claim), claim); err != nil {
			t.Fatalf("nodeclaim went away while the PDB forbade evicting its pods: %v", err)
		}
		if running := allRunning(t, c, "billing", 4, 5*time.Second); len(running) != 4 {
			t.Fatalf("pods were evicted despite the PDB")
		}
		must(t, c.Delete(ctx, pdb))
		eventually(t, 60*time.Second, "nodeclaim terminated after the PDB was removed", func() error {
			if err := c.Get(ctx, client.ObjectKeyFromObject(claim), claim); err == nil {
				return fmt.Errorf("nodeclaim %s still exists", claim.Name)
			}
			return nil
		})
		verifyPlacement(t, c, allRunning(t, c, "billing", 4, 60*time.Second), "billing")
	})

	t.Run("scale to zero and terminate every node", func(t *testing.T) {
		scale(t, c, "inflate", 0)
		for _, name := range []string{"gpu-job", "billing"} {
			must(t, c.Delete(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}}))
		}
		eventually(t, 60*time.Second, "all workload pods gone", func() error {
			var pods corev1.PodList
			if err := c.List(ctx, &pods, client.InNamespace("default")); err != nil {
				return err
			}
			if len(pods.Items) > 0 {
				return fmt.Errorf("%d pods remain", len(pods.Items))
			}
			return nil
		})
		must(t, c.DeleteAllOf(ctx, &v1.NodeClaim{}))
		eventually(t, 60*time.Second, "every nodeclaim and node terminated", func() error {
			claims, nodes, err := claimsAndNodes(c)
			if err == nil && claims+nodes > 0 {
				err = fmt.Errorf("%d nodeclaims and %d nodes remain", claims, nodes)
			}
			return err
		})
	})
}

// claimsAndNodes counts the cluster's NodeClaims and Nodes.
func claimsAndNodes(c client.Client) (claims, nodes int, err error) {
	var claimList v1.NodeClaimList
	var nodeList corev1.NodeList
	if err := c.List(context.Background(), &claimList); err != nil {
		return 0, 0, err
	}
	if err := c.List(context.Background(), &nodeList); err != nil {
		return 0, 0, err
	}
	return len(claimList.Items), len(nodeList.Items), nil
}

func claimOfNode(t *testing.T, c client.Client, nodeName string) *v1.NodeClaim {
	t.Helper()
	var claims v1.NodeClaimList
	must(t, c.List(context.Background(), &claims))
	for i := range claims.Items {
		if claims.Items[i].Status.NodeName == nodeName {
			return &claims.Items[i]
		}
	}
	t.Fatalf("no nodeclaim for node %s", nodeName)
	return nil
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
