package lifecycle

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/controller/cloudprovider"
)

// Retry bounds for a launch the cloud provider refused for a reason other than
// capacity (node class not ready, no image, permissions): the claim is tried again
// with backoff until the registration TTL, counted from its creation, runs out.
const (
	launchRetryInitial = time.Second
	launchRetryMax     = time.Minute
)

func (c *Controller) launch(ctx context.Context, nc *v1.NodeClaim) (reconcile.Result, error) {
	// The cache can lag our own status write; never launch twice for one claim.
	if launched, ok := c.launched.Load(nc.UID); ok {
		return c.recordLaunch(ctx, nc, launched.(*v1.NodeClaim))
	}
	if _, ok := c.refused.Load(nc.UID); ok {
		return reconcile.Result{}, nil
	}
	// Past the TTL the backoff no longer holds: one last attempt, then the claim goes.
	if now := c.clock.Now(); c.retries.IsInBackOffSinceUpdate(string(nc.UID), now) && c.clock.Since(nc.CreationTimestamp.Time) < c.registrationTTL {
		return reconcile.Result{RequeueAfter: c.untilRetry(nc, c.retries.Get(string(nc.UID)))}, nil
	}
	launched, err := c.cloud.Create(ctx, nc)
	if err != nil {
		if cloudprovider.IsInsufficientCapacity(err) {
			c.recorder.Eventf(nc, corev1.EventTypeWarning, "InsufficientCapacityError", "NodeClaim %s event: %v", nc.Name, err)
			log.FromContext(ctx).Error(err, "launch failed, deleting the nodeclaim so its pods are planned again")
			c.refused.Store(nc.UID, struct{}{})
			return reconcile.Result{}, c.deleteDisrupted(ctx, nc, "insufficient_capacity")
		}
		if cloudprovider.IsNodeClassNotReady(err) {
			// Retrying cannot help until the class is fixed; Karpenter deletes the
			// claim too, and its pods wait for a Ready pool.
			c.recorder.Eventf(nc, corev1.EventTypeWarning, "NodeClassNotReady", "NodeClaim %s event: %v", nc.Name, err)
			log.FromContext(ctx).Error(err, "launch failed, deleting the nodeclaim: its node class is not ready")
			c.refused.Store(nc.UID, struct{}{})
			return reconcile.Result{}, c.deleteDisrupted(ctx, nc, "nodeclass_not_ready")
		}
		return c.launchFailed(ctx, nc, err)
	}
	c.retries.DeleteEntry(string(nc.UID))
	c.retries.GC()
	c.launched.Store(nc.UID, launched)
	log.FromContext(ctx).Info("launched nodeclaim", "providerID", launched.Status.ProviderID, "instanceType", launched.Labels[v1.LabelInstanceType],
		"zone", launched.Labels[v1.LabelTopologyZone], "capacityType", launched.Labels[v1.LabelCapacityType])
	c.recorder.Eventf(nc, corev1.EventTypeNormal, "Launched", "Launched %s in %s (%s)", launched.Labels[v1.LabelInstanceType], launched.Labels[v1.LabelTopologyZone], launched.Labels[v1.LabelCapacityType])
	if cond := meta.FindStatusCondition(launched.Status.Conditions, v1.ConditionTypeLaunched); cond != nil && cond.Reason != "" && cond.Reason != "Launched" {
		c.recorder.Event(nc, corev1.EventTypeWarning, cond.Reason, cond.Message)
	}
	return c.recordLaunch(ctx, nc, launched)
}

// launchFailed records why the launch failed on the claim's Launched condition and
// retries with backoff; once the claim has existed for the registration TTL it is
// deleted, so that its pods are planned again, maybe on another pool or type,
// instead of waiting for a launch that may never succeed.
func (c *Controller) launchFailed(ctx context.Context, nc *v1.NodeClaim, launchErr error) (reconcile.Result, error) {
	age := c.clock.Since(nc.CreationTimestamp.Time)
	timedOut := age >= c.registrationTTL
	reason, message := "LaunchFailed", conditionMessage(launchErr.Error())
	if timedOut {
		reason = "LaunchTimeout"
		message = conditionMessage(fmt.Sprintf("no instance launched within %s; last error: %v", c.registrationTTL, launchErr))
	}
	patch := client.MergeFrom(nc.DeepCopy())
	if c.setCondition(nc, v1.ConditionTypeLaunched, metav1.ConditionFalse, reason, message) {
		if err := c.patchClaim(ctx, nc, patch, true); err != nil {
			if apierrors.IsNotFound(err) {
				return reconcile.Result{}, nil
			}
			return reconcile.Result{}, fmt.Errorf("recording launch failure, %w", err)
		}
	}
	if timedOut {
		c.recorder.Eventf(nc, corev1.EventTypeWarning, "LaunchTimeout", "No instance launched within %s; deleting the NodeClaim so its pods are planned again. Last error: %v", c.registrationTTL, launchErr)
		log.FromContext(ctx).Error(launchErr, "launch timed out, deleting nodeclaim", "age", age.String())
		c.forget(nc.UID)
		return reconcile.Result{}, c.deleteDisrupted(ctx, nc, "launch_timeout")
	}
	c.recorder.Eventf(nc, corev1.EventTypeWarning, "LaunchFailed", "Launching the NodeClaim failed, retrying: %v", launchErr)
	log.FromContext(ctx).Error(launchErr, "launch failed, retrying")
	c.retries.Next(string(nc.UID), c.clock.Now())
	return reconcile.Result{RequeueAfter: c.untilRetry(nc, c.retries.Get(string(nc.UID)))}, nil
}

// untilRetry caps a retry delay so that the launch timeout is checked on time.
func (c *Controller) untilRetry(nc *v1.NodeClaim, delay time.Duration) time.Duration {
	if left := c.registrationTTL - c.clock.Since(nc.CreationTimestamp.Time); left < delay {
		delay = max(left, time.Second)
	}
	return delay
}

// maxConditionMessage keeps a cloud error that quotes a whole request out of the
// claim's status.
const maxConditionMessage = 1024

func conditionMessage(s string) string {
	if len(s) > maxConditionMessage {
		return s[:maxConditionMessage-3] + "..."
	}
	return s
}

// launchLabels are what a launch adds to a claim and every launched claim has.
var launchLabels = []string{v1.LabelInstanceType, v1.LabelTopologyZone, v1.LabelCapacityType}

func hasLaunchLabels(nc *v1.NodeClaim) bool {
	for _, k := range launchLabels {
		if nc.Labels[k] == "" {
			return false
		}
	}
	return true
}

// recordLaunch writes the launch to the claim: status first, so that once anything
// is written the providerID is, and a restart can never launch the claim again;
// then the labels, which completeLaunch re-derives if this process dies before.
func (c *Controller) recordLaunch(ctx context.Context, nc, launched *v1.NodeClaim) (reconcile.Result, error) {
	statusPatch := lockedPatch(nc)
	nc.Status.ProviderID = launched.Status.ProviderID
	nc.Status.ImageID = launched.Status.ImageID
	nc.Status.Capacity = launched.Status.Capacity
	nc.Status.Allocatable = launched.Status.Allocatable
	// A provider that launched other than as planned (on-demand for a spot claim)
	// says why on its Launched condition.
	reason, message := "Launched", ""
	if cond := meta.FindStatusCondition(launched.Status.Conditions, v1.ConditionTypeLaunched); cond != nil && cond.Reason != "" {
		reason, message = cond.Reason, conditionMessage(cond.Message)
	}
	c.setCondition(nc, v1.ConditionTypeLaunched, metav1.ConditionTrue, reason, message)
	c.setCondition(nc, v1.ConditionTypeRegistered, metav1.ConditionUnknown, "AwaitingRegistration", "waiting for the node to register")
	if err := c.patchClaim(ctx, nc, statusPatch, true); err != nil {
		if apierrors.IsNotFound(err) {
			// Deleted while launching: termination had nothing to terminate by
			// providerID, so the instance goes now rather than bill until garbage
			// collection finds it.
			c.terminateUnrecorded(ctx, launched)
			c.forget(nc.UID)
			return reconcile.Result{}, nil
		}
		return requeueOnConflict(fmt.Errorf("recording launch, %w", err))
	}
	if err := c.label(ctx, nc, launched); err != nil {
		return reconcile.Result{}, err
	}
	// The guard stays until a Reconcile reads the providerID from the cache.
	return reconcile.Result{RequeueAfter: time.Second}, nil
}

// completeLaunch gives a launched claim the labels of its instance when it lacks
// them: they come from this process's record of the launch or, after a restart,
// from the cloud provider. The claim then no longer needs the launch guard.
func (c *Controller) completeLaunch(ctx context.Context, nc *v1.NodeClaim) error {
	if hasLaunchLabels(nc) {
		c.launched.Delete(nc.UID)
		return nil
	}
	var from *v1.NodeClaim
	if l, ok := c.launched.Load(nc.UID); ok && l.(*v1.NodeClaim).Status.ProviderID == nc.Status.ProviderID {
		from = l.(*v1.NodeClaim)
	} else {
		inst, err := c.cloud.Get(ctx, nc.Status.ProviderID)
		if cloudprovider.IsNodeClaimNotFound(err) {
			// Nothing to learn the labels from; garbage collection deletes a claim
			// whose instance is gone.
			log.FromContext(ctx).Info("launched nodeclaim has no instance labels and its instance is not found", "providerID", nc.Status.ProviderID)
			return nil
		}
		if err != nil {
			return fmt.Errorf("getting the instance of nodeclaim, %w", err)
		}
		from = inst
	}
	if err := c.label(ctx, nc, from); err != nil {
		return err
	}
	c.launched.Delete(nc.UID)
	return nil
}

// label adds the launched instance's labels and annotations the claim lacks.
func (c *Controller) label(ctx context.Context, nc, launched *v1.NodeClaim) error {
	patch := client.MergeFrom(nc.DeepCopy())
	changed := false
	for k, v := range launched.Labels {
		if _, ok := nc.Labels[k]; !ok {
			if nc.Labels == nil {
				nc.Labels = map[string]string{}
			}
			nc.Labels[k], changed = v, true
		}
	}
	for k, v := range launched.Annotations {
		if _, ok := nc.Annotations[k]; !ok {
			if nc.Annotations == nil {
				nc.Annotations = map[string]string{}
			}
			nc.Annotations[k], changed = v, true
		}
	}
	if !changed {
		return nil
	}
	if err := c.patchClaim(ctx, nc, patch, false); err != nil {
		return fmt.Errorf("labelling launched nodeclaim, %w", err)
	}
	return nil
}

// terminateUnrecorded terminates an instance launched for a claim that was deleted
// before the launch was recorded on it (a gang rolled back, a claim deleted by hand
// mid-launch): its termination found no providerID to terminate. Garbage
// collection remains the net if this fails.
func (c *Controller) terminateUnrecorded(ctx context.Context, launched *v1.NodeClaim) {
	if err := c.cloud.Delete(ctx, launched); err != nil && !cloudprovider.IsNodeClaimNotFound(err) {
		log.FromContext(ctx).Error(err, "terminating the instance of a nodeclaim deleted while it launched; garbage collection will", "providerID", launched.Status.ProviderID)
		return
	}
	log.FromContext(ctx).Info("terminated the instance of a nodeclaim deleted while it launched", "providerID", launched.Status.ProviderID)
}
