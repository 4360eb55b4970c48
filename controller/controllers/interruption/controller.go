// Package interruption consumes the SQS queue that EventBridge fills with EC2 and AWS
// Health events (spot interruption warnings, rebalance recommendations, instance
// state changes, scheduled maintenance, capacity-reservation interruptions), and
// moves the affected nodes' pods before the instances go: replacements are launched
// first, the node is cordoned and drained, and a reclaimed spot offering is kept out
// of plans for a while.
package interruption

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/controller/controllers/provisioning"
	"github.com/dovetail-sh/dovetail/controller/metrics"
	"github.com/dovetail-sh/dovetail/controller/state"
)

// SQSAPI is the part of SQS the controller uses.
type SQSAPI interface {
	GetQueueUrl(context.Context, *sqs.GetQueueUrlInput, ...func(*sqs.Options)) (*sqs.GetQueueUrlOutput, error)
	ReceiveMessage(context.Context, *sqs.ReceiveMessageInput, ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error)
	DeleteMessage(context.Context, *sqs.DeleteMessageInput, ...func(*sqs.Options)) (*sqs.DeleteMessageOutput, error)
}

// OfferingMarker takes a reclaimed spot offering out of plans.
type OfferingMarker interface {
	Mark(instanceType, zone, capacityType string)
}

// Controller is the interruption queue consumer.
type Controller struct {
	kube        client.Client
	cluster     *state.Cluster
	sqs         SQSAPI
	queue       string
	provisioner *provisioning.Provisioner
	offerings   OfferingMarker
	recorder    record.EventRecorder
	clock       clock.Clock
	// WaitTime is the long-poll wait of each receive, in seconds (at most 20).
	WaitTime int32

	// acting holds the claims being acted on, and since when. EventBridge delivers
	// at least once, and one instance often gets a spot warning and a state change
	// together: until the cache shows the claim deleting, a second message would
	// launch a second set of replacements. After a restart the claim's deletion
	// timestamp, in the API, does the same job.
	// Planning also leaves out every claim and node acted on: until the cache shows
	// one deleting, the next message's plan would count its node as room.
	mu     sync.Mutex
	acting map[types.UID]actedOn
	// planning serializes the messages that act (see handle).
	planning sync.Mutex
}

// actingTTL is how long a claim acted on is remembered; its deletion reaches the
// cache in far less.
const actingTTL = 10 * time.Minute

// actedOn is a claim acted on, since when, and its node.
type actedOn struct {
	at          time.Time
	claim, node string
}

// startActing reports whether nothing is acting on the claim yet, and marks it.
func (c *Controller) startActing(nc *v1.NodeClaim) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.clock.Now()
	for uid, a := range c.acting {
		if now.Sub(a.at) > actingTTL {
			delete(c.acting, uid)
		}
	}
	if _, ok := c.acting[nc.UID]; ok {
		return false
	}
	if c.acting == nil {
		c.acting = map[types.UID]actedOn{}
	}
	c.acting[nc.UID] = actedOn{at: now, claim: nc.Name, node: nc.Status.NodeName}
	return true
}

// leaving names the claims and nodes acted on: they are going, whatever the
// cache shows yet.
func (c *Controller) leaving() sets.Set[string] {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := sets.New[string]()
	for _, a := range c.acting {
		out.Insert(a.claim)
		if a.node != "" {
			out.Insert(a.node)
		}
	}
	return out
}

// NewController wires the controller for the named queue.
func NewController(kube client.Client, api SQSAPI, queue string, provisioner *provisioning.Provisioner, offerings OfferingMarker, recorder record.EventRecorder, clk clock.Clock) *Controller {
	cluster := state.NewCluster(kube, clk)
	if provisioner != nil {
		cluster = provisioner.Cluster()
	}
	return &Controller{kube: kube, cluster: cluster, sqs: api, queue: queue, provisioner: provisioner, offerings: offerings, recorder: recorder, clock: clk, WaitTime: 20}
}

func (c *Controller) Name() string { return "interruption" }

// Register consumes the queue on the elected leader until the manager stops.
func (c *Controller) Register(_ context.Context, mgr manager.Manager) error {
	return mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		ctx = log.IntoContext(ctx, log.FromContext(ctx).WithName(c.Name()))
		// Failures back off exponentially with jitter up to a minute, so a queue
		// that is gone or denied is neither hammered nor logged every second, and
		// replicas do not retry in step; a success starts over.
		backoff := receiveBackoff()
		url, err := c.queueURL(ctx)
		for err != nil {
			log.FromContext(ctx).Error(err, "finding the interruption queue; retrying")
			if !c.sleep(ctx, backoff.Step()) {
				return nil
			}
			url, err = c.queueURL(ctx)
		}
		backoff = receiveBackoff()
		for ctx.Err() == nil {
			if err := c.Poll(ctx, url); err != nil && ctx.Err() == nil {
				delay := backoff.Step()
				log.FromContext(ctx).Error(err, "reading the interruption queue", "retryIn", delay.String())
				c.sleep(ctx, delay)
				continue
			}
			backoff = receiveBackoff()
		}
		return nil
	}))
}

func receiveBackoff() *wait.Backoff {
	return &wait.Backoff{Duration: time.Second, Factor: 2, Jitter: 0.5, Steps: math.MaxInt32, Cap: time.Minute}
}

// sleep waits d on the controller's clock, or less if ctx ends first, which it
// reports as false.
func (c *Controller) sleep(ctx context.Context, d time.Duration) bool {
	select {
	case <-ctx.Done():
		return false
	case <-c.clock.After(d):
		return true
	}
}

func (c *Controller) queueURL(ctx context.Context) (string, error) {
	out, err := c.sqs.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(c.queue)})
	if err != nil {
		return "", fmt.Errorf("getting the URL of queue %q (--interruption-queue), %w", c.queue, err)
	}
	return aws.ToString(out.QueueUrl), nil
}

// Poll receives one batch and handles its messages in parallel. A message is deleted
// once handled, and also when it cannot be understood: retrying those would only
// fail again.
func (c *Controller) Poll(ctx context.Context, url string) error {
	out, err := c.sqs.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), MaxNumberOfMessages: 10, WaitTimeSeconds: c.WaitTime,
		MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{sqstypes.MessageSystemAttributeNameSentTimestamp}})
	if err != nil {
		return err
	}
	var wg sync.WaitGroup
	for _, m := range out.Messages {
		wg.Add(1)
		go func(m sqstypes.Message) {
			defer wg.Done()
			if err := c.handle(ctx, aws.ToString(m.Body)); err != nil {
				// Left in the queue: it comes back after its visibility timeout.
				log.FromContext(ctx).Error(err, "handling an interruption message; it will be retried", "messageID", aws.ToString(m.MessageId))
				return
			}
			if _, err := c.sqs.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(url), ReceiptHandle: m.ReceiptHandle}); err != nil {
				log.FromContext(ctx).Error(err, "deleting an interruption message", "messageID", aws.ToString(m.MessageId))
				return
			}
			metrics.InterruptionDeletedMessages.Inc()
			if sent, err := strconv.ParseInt(m.Attributes[string(sqstypes.MessageSystemAttributeNameSentTimestamp)], 10, 64); err == nil {
				metrics.InterruptionQueueDuration.Observe(c.clock.Since(time.UnixMilli(sent)).Seconds())
			}
		}(m)
	}
	wg.Wait()
	return nil
}

// handle acts on one message; an error means it should be retried.
func (c *Controller) handle(ctx context.Context, body string) error {
	msg, err := Parse(body)
	if err != nil {
		metrics.InterruptionReceivedMessages.WithLabelValues("malformed").Inc()
		log.FromContext(ctx).Info("deleting a malformed interruption message", "error", err.Error())
		return nil
	}
	metrics.InterruptionReceivedMessages.WithLabelValues(string(msg.Kind)).Inc()
	return c.handleMessage(ctx, msg)
}

// handleMessage acts on what a message announces for its instances' claims.
func (c *Controller) handleMessage(ctx context.Context, msg Message) error {
	_, err := c.actOnClaims(ctx, msg)
	return err
}

// actOnClaims acts on the claims of the message's instances and reports whether
// it found any.
func (c *Controller) actOnClaims(ctx context.Context, msg Message) (bool, error) {
	if msg.Kind == Unknown || len(msg.InstanceIDs) == 0 {
		return false, nil
	}
	// One message acts at a time: each plans its node's pods onto the cluster, and
	// two planning at once would each count the other's node as room and hold a
	// whole solve's memory apiece.
	if msg.Acts() {
		c.planning.Lock()
		defer c.planning.Unlock()
	}
	view, err := c.cluster.Read(ctx, state.ReadOnly)
	if err != nil {
		return false, err
	}
	claims := view.ClaimsOfInstances(msg.InstanceIDs...)
	for _, nc := range claims {
		// The view is the cache itself: act gets its own copy of what it acts on.
		if err := c.act(ctx, msg, nc.DeepCopy(), view); err != nil {
			return true, err
		}
	}
	return len(claims) > 0, nil
}

// annotateTerminationNow sets the claim's karpenter.sh/nodeclaim-termination-timestamp
// to now, unless it has one: termination then drains no longer.
func (c *Controller) annotateTerminationNow(ctx context.Context, nc *v1.NodeClaim) error {
	if _, ok := nc.Annotations[v1.NodeClaimTerminationTimestampAnnotationKey]; ok {
		return nil
	}
	patch := client.MergeFrom(nc.DeepCopy())
	if nc.Annotations == nil {
		nc.Annotations = map[string]string{}
	}
	nc.Annotations[v1.NodeClaimTerminationTimestampAnnotationKey] = c.clock.Now().UTC().Format(time.RFC3339)
	if err := c.kube.Patch(ctx, nc, patch); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("setting the termination timestamp of nodeclaim %s, %w", nc.Name, err)
	}
	return nil
}

func (c *Controller) act(ctx context.Context, msg Message, nc *v1.NodeClaim, view *state.View) error {
	logger := log.FromContext(ctx).WithValues("nodeclaim", nc.Name, "kind", string(msg.Kind), "providerID", nc.Status.ProviderID)
	if !msg.Acts() {
		c.recorder.Eventf(nc, corev1.EventTypeNormal, eventReason(msg.Kind), "%s for the instance; no action taken", describe(msg))
		return nil
	}
	if nc.DeletionTimestamp != nil {
		return nil
	}
	if !c.startActing(nc) {
		// A duplicate, or the retry of a message whose delete failed: the
		// replacements are launched already; only the delete may be missing.
		if err := c.kube.Delete(ctx, nc); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting interrupted nodeclaim %s, %w", nc.Name, err)
		}
		logger.V(1).Info("already acted on the claim")
		return nil
	}
	if msg.Kind == SpotInterruption && c.offerings != nil {
		c.offerings.Mark(nc.Labels[v1.LabelInstanceType], nc.Labels[v1.LabelTopologyZone], v1.CapacityTypeSpot)
	}
	launched, err := c.launchReplacements(ctx, nc, view)
	if err != nil {
		// The instance goes regardless; draining it now still beats waiting.
		logger.Error(err, "launching replacements; draining anyway")
	}
	if msg.Forceful() {
		// An instance that fails its status checks cannot drain: like Karpenter,
		// its pods get no grace beyond now.
		if err := c.annotateTerminationNow(ctx, nc); err != nil {
			return err
		}
	}
	patch := client.MergeFrom(nc.DeepCopy())
	if nc.SetDisruptionReason("Interrupted", c.clock.Now()) {
		if err := c.kube.Status().Patch(ctx, nc, patch); client.IgnoreNotFound(err) != nil {
			logger.V(1).Info("recording the disruption reason", "error", err.Error())
		}
	}
	if err := c.kube.Delete(ctx, nc); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("deleting interrupted nodeclaim %s, %w", nc.Name, err)
	}
	c.recorder.Eventf(nc, corev1.EventTypeWarning, eventReason(msg.Kind), "%s; draining the node and launching %d replacement(s)", describe(msg), launched)
	metrics.Disruption{Reason: msg.disruptedReason(), NodePool: nc.Labels[v1.LabelNodePool], CapacityType: nc.Labels[v1.LabelCapacityType],
		TerminationMode: metrics.TerminationMode(nc.Spec.TerminationGracePeriod)}.Record(-1)
	logger.Info("interrupted: draining", "replacements", launched)
	return nil
}

// launchReplacements plans the node's pods onto the rest of the cluster and launches
// what they need, before the drain makes them pending. The pods of nodes acted on
// before, still draining, are planned again with them: they go to the
// replacements launched for them, which would otherwise look empty and take this
// node's pods.
func (c *Controller) launchReplacements(ctx context.Context, nc *v1.NodeClaim, view *state.View) (int, error) {
	if c.provisioner == nil || nc.Status.NodeName == "" {
		return 0, nil
	}
	snap, err := c.provisioner.SnapshotOf(ctx, view)
	if err != nil {
		return 0, err
	}
	leaving := c.leaving().Insert(nc.Status.NodeName, nc.Name)
	var moving []*corev1.Pod
	own := 0
	// Sorted, so that the plan is the same whatever order the names were kept in.
	for _, name := range sets.List(leaving) {
		for _, p := range view.PodsOn(name) {
			owner := metaControllerKind(p)
			if owner == "DaemonSet" || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
				continue
			}
			moving = append(moving, p)
			if name == nc.Status.NodeName {
				own++
			}
		}
	}
	if own == 0 {
		return 0, nil
	}
	results := snap.PlanWithout(leaving, moving)
	launched := 0
	for _, plan := range results.NodeClaims {
		np := snap.Pool(plan.NodePool)
		if np == nil {
			continue
		}
		if _, err := c.provisioner.LaunchReplacing(ctx, np, plan, "interruption", leaving); err != nil {
			return launched, err
		}
		launched++
	}
	return launched, nil
}

func metaControllerKind(p *corev1.Pod) string {
	for _, o := range p.OwnerReferences {
		if o.Controller != nil && *o.Controller {
			return o.Kind
		}
	}
	return ""
}

func eventReason(k Kind) string {
	switch k {
	case SpotInterruption:
		return "SpotInterrupted"
	case RebalanceRecommendation:
		return "SpotRebalanceRecommendation"
	case StateChange:
		return "InstanceStateChange"
	case ScheduledChange:
		return "InstanceScheduledChange"
	case CapacityReservationInterruption:
		return "CapacityReservationInterrupted"
	case InstanceStatusFailed, SystemStatusFailed, ScheduledEvent:
		return "InstanceUnhealthy"
	}
	return "Interruption"
}

func describe(m Message) string {
	switch m.Kind {
	case SpotInterruption:
		return "EC2 is reclaiming the spot instance in two minutes"
	case RebalanceRecommendation:
		return "EC2 recommends rebalancing: the spot instance is at elevated risk of interruption"
	case StateChange:
		return "the instance is " + m.State
	case ScheduledChange:
		return "AWS Health scheduled maintenance affects the instance"
	case CapacityReservationInterruption:
		return "the capacity reservation is reclaiming the instance"
	case InstanceStatusFailed:
		return "EC2 reports the instance's status check failed"
	case SystemStatusFailed:
		return "EC2 reports the instance's system status check failed"
	case ScheduledEvent:
		return "EC2 has scheduled an event (reboot, maintenance, retirement or stop) for the instance"
	}
	return string(m.Kind)
}
