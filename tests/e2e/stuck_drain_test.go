package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/tests/localstack"
	"github.com/dovetail-sh/dovetail/tests/testenv"
)

// A node whose kubelet died cannot finish deleting its pods: they stay listed,
// terminating, for ever. The drain waits for them only until the NodeClaim's
// terminationGracePeriod; then the instance is terminated and the claim goes.
// kwok is every node's kubelet here, so stopping it kills them all.
func TestTerminationGracePeriodBoundsADrainOnADeadKubelet(t *testing.T) {
	stack := startClusterOn(t, testenv.StartStack)
	c := stack.Client
	ctx := context.Background()
	tgp := 15 * time.Second
	np := consolidatingPool("default", "Never")
	np.Spec.Template.Spec.TerminationGracePeriod = &metav1.Duration{Duration: tgp}
	must(t, c.Create(ctx, np))
	// The pod asks for five minutes to shut down: far longer than the node's grace.
	must(t, c.Create(ctx, localstack.Deployment("stranded", 1, "1", "1Gi", func(spec *corev1.PodSpec) {
		spec.TerminationGracePeriodSeconds = ptr(int64(300))
	})))
	pods := allRunning(t, c, "stranded", 1, 60*time.Second)
	claim := claimOfNode(t, c, pods[0].Spec.NodeName)

	stopped := false
	for _, p := range stack.Processes() {
		if p.Name == "kwok" {
			p.Stop()
			stopped = true
		}
	}
	if !stopped {
		t.Fatalf("no kwok process to stop")
	}
	must(t, c.Delete(ctx, claim))
	deleted := time.Now()
	eventually(t, 90*time.Second, "the claim and its node are gone", func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(claim), &v1.NodeClaim{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("nodeclaim %s still exists (%v)", claim.Name, err)
		}
		if err := c.Get(ctx, client.ObjectKey{Name: pods[0].Spec.NodeName}, &corev1.Node{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("node %s still exists (%v)", pods[0].Spec.NodeName, err)
		}
		return nil
	})
	if gone := time.Since(deleted); gone < tgp {
		t.Errorf("the node went after %s, before its terminationGracePeriod", gone.Round(time.Second))
	}
	// The pod was deleted, and with no kubelet to finish it, it is still there:
	// the drain did not wait for it.
	p := &corev1.Pod{}
	must(t, c.Get(ctx, client.ObjectKeyFromObject(&pods[0]), p))
	if p.DeletionTimestamp == nil {
		t.Errorf("the pod of the terminated node was never deleted")
	}
}
