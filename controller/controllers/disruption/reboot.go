package disruption

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
)

// commitReboot hands the candidate to the reboot controller
// (controllers/nodeclaim/reboot), as Karpenter v1.15's repair commits a
// RebootNode action: the drain bound in an annotation, Rebooting=True with reason
// RebootRequested and the DisruptionReason Unhealthy on the claim, and the reboot
// counted toward the claim's history. Nothing is launched and nothing deleted; the
// node stays, fenced and drained, and comes back.
func (c *Controller) commitReboot(ctx context.Context, cmd *command) error {
	cand := cmd.candidates[0]
	current := &v1.NodeClaim{}
	if err := c.kube.Get(ctx, client.ObjectKeyFromObject(cand.Claim), current); err != nil {
		return client.IgnoreNotFound(err)
	}
	if current.Rebooting() || current.DeletionTimestamp != nil {
		return nil
	}
	patch := client.MergeFromWithOptions(current.DeepCopy(), client.MergeFromWithOptimisticLock{})
	if cmd.drainBound != nil {
		if current.Annotations == nil {
			current.Annotations = map[string]string{}
		}
		current.Annotations[v1.RebootTerminationGracePeriodAnnotationKey] = cmd.drainBound.String()
	} else {
		delete(current.Annotations, v1.RebootTerminationGracePeriodAnnotationKey)
	}
	delete(current.Annotations, v1.RebootPreBootIDAnnotationKey)
	if err := c.kube.Patch(ctx, current, patch); err != nil {
		return fmt.Errorf("committing the reboot of nodeclaim %s, %w", current.Name, err)
	}
	now := c.clock.Now()
	patch = client.MergeFromWithOptions(current.DeepCopy(), client.MergeFromWithOptimisticLock{})
	current.SetDisruptionReason(string(v1.DisruptionReasonUnhealthy), now)
	meta.SetStatusCondition(&current.Status.Conditions, metav1.Condition{Type: v1.ConditionTypeRebooting, Status: metav1.ConditionTrue,
		Reason: v1.RebootRequested, Message: cmd.explanation, ObservedGeneration: current.Generation, LastTransitionTime: metav1.NewTime(now)})
	if err := c.kube.Status().Patch(ctx, current, patch); err != nil {
		return fmt.Errorf("committing the reboot of nodeclaim %s, %w", current.Name, err)
	}
	c.reboots.Record(current.UID, now)
	cmd.recordDecision()
	cmd.recordDisrupted(cand, current)
	message := fmt.Sprintf("Rebooting in place (repair): %s", cmd.explanation)
	c.recorder.Event(current, corev1.EventTypeNormal, "DisruptionRebooting", message)
	c.recorder.Event(cand.Node, corev1.EventTypeNormal, "DisruptionRebooting", message)
	log.FromContext(ctx).Info("committed node reboot", "nodeclaim", current.Name, "node", cand.Node.Name)
	return nil
}
