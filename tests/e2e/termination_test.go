package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/tests/localstack"
)

// A PodDisruptionBudget that never allows an eviction holds a drain only until the
// NodeClaim's terminationGracePeriod: then the controller deletes the pod itself.
// That delete is what the shipped ClusterRole must allow, and the controller here
// runs as the installed ServiceAccount with nothing else.
func TestTerminationGracePeriodBoundsABlockedDrain(t *testing.T) {
	c := startCluster(t)
	ctx := context.Background()
	np := consolidatingPool("default", "Never")
	np.Spec.Template.Spec.TerminationGracePeriod = &metav1.Duration{Duration: 10 * time.Second}
	must(t, c.Create(ctx, np))
	d := localstack.Deployment("guarded", 1, "1", "1Gi")
	must(t, c.Create(ctx, d))
	pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "guarded"},
		Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr(intstr.FromInt32(1)),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "guarded"}}}}
	must(t, c.Create(ctx, pdb))
	pods := allRunning(t, c, "guarded", 1, 60*time.Second)
	claim := claimOfNode(t, c, pods[0].Spec.NodeName)
	eventually(t, 30*time.Second, "the PDB allows no disruption", func() error {
		must(t, c.Get(ctx, client.ObjectKeyFromObject(pdb), pdb))
		if pdb.Status.ObservedGeneration != pdb.Generation || pdb.Status.CurrentHealthy != 1 {
			return fmt.Errorf("PDB status not current yet: %+v", pdb.Status)
		}
		return nil
	})

	must(t, c.Delete(ctx, claim))
	deleted := time.Now()
	eventually(t, 90*time.Second, "the claim and its node are gone", func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(claim), &v1.NodeClaim{}); err == nil {
			return fmt.Errorf("nodeclaim %s still exists", claim.Name)
		}
		if err := c.Get(ctx, client.ObjectKey{Name: pods[0].Spec.NodeName}, &corev1.Node{}); err == nil {
			return fmt.Errorf("node %s still exists", pods[0].Spec.NodeName)
		}
		return nil
	})
	if gone := time.Since(deleted); gone < 10*time.Second {
		t.Errorf("the node went after %s, before its terminationGracePeriod: the PDB was not respected", gone.Round(time.Second))
	}
	running := allRunning(t, c, "guarded", 1, 60*time.Second)
	if running[0].Spec.NodeName == pods[0].Spec.NodeName {
		t.Errorf("the pod runs on the terminated node %s", running[0].Spec.NodeName)
	}
}
