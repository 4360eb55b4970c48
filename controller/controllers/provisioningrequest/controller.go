// Package provisioningrequest serves the ProvisioningRequest API (autoscaling.x-k8s.io/v1)
// Kueue's admission check talks to: check-capacity says whether a gang's pods fit
// on the capacity there is; best-effort-atomic-scale-up launches the nodes for all
// of them or keeps none. Capacity found or launched is booked for the request's
// pods (the provisioner and consolidation leave it to them) until they are all
// scheduled or the booking expires, and the conditions say so as Cluster
// Autoscaler writes them.
package provisioningrequest

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	autoscalingv1 "github.com/dovetail-sh/dovetail/controller/apis/autoscaling/v1"
	dovetailv1alpha1 "github.com/dovetail-sh/dovetail/controller/apis/dovetail/v1alpha1"
	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/controller/provreq"
	"github.com/dovetail-sh/dovetail/controller/scheduling"
	"github.com/dovetail-sh/dovetail/controller/state"
)

const (
	// launchRecheck is how often a gang whose nodes are launching is looked at.
	launchRecheck = time.Second
	// bookingRecheck is how often a booking is looked at for pods that consumed it.
	bookingRecheck = 5 * time.Second
	// createReason labels the NodeClaims created metric for a gang's claims.
	createReason = "provisioning_request"
)

// Provisioner is what the controller plans and launches with.
type Provisioner interface {
	Cluster() *state.Cluster
	SnapshotOf(context.Context, *state.View) (*scheduling.Snapshot, error)
	LaunchMarked(ctx context.Context, np *v1.NodePool, plan *scheduling.NodeClaimPlan, reason string, mark func(*v1.NodeClaim)) (*v1.NodeClaim, error)
	Trigger()
}

// Options are the retry bounds of a request whose capacity was not found, as
// Cluster Autoscaler's --provisioning-request-{initial,max}-backoff-time.
type Options struct {
	InitialBackoff, MaxBackoff time.Duration
}

// Controller serves ProvisioningRequests of the classes Dovetail supports.
type Controller struct {
	kube        client.Client
	reader      client.Reader
	provisioner Provisioner
	bookings    *provreq.Cache
	clock       clock.Clock
	recorder    record.EventRecorder
	opts        Options
	// retries are the requests waiting to be tried again: when, and how many
	// times they were. Cluster Autoscaler keeps them in memory too: a restart
	// tries again at once.
	retries map[types.UID]retry
	// launching is the batch of claims each request is launching, also written to
	// its status (provreq.BatchDetail) for a restarted controller; uids are the requests'
	// UIDs by key, to forget a request that is gone.
	launching map[types.UID]string
	uids      map[string]types.UID
}

type retry struct {
	at       time.Time
	attempts int
}

// NewController builds the controller; reader reads what the cache may not have
// seen yet (a PodTemplate Kueue created a moment before its request).
func NewController(kube client.Client, reader client.Reader, provisioner Provisioner, bookings *provreq.Cache, clk clock.Clock, recorder record.EventRecorder, opts Options) *Controller {
	// Unset, Cluster Autoscaler's defaults.
	if opts.InitialBackoff <= 0 {
		opts.InitialBackoff = time.Minute
	}
	if opts.MaxBackoff < opts.InitialBackoff {
		opts.MaxBackoff = max(10*time.Minute, opts.InitialBackoff)
	}
	return &Controller{kube: kube, reader: reader, provisioner: provisioner, bookings: bookings, clock: clk, recorder: recorder, opts: opts,
		retries: map[types.UID]retry{}, launching: map[types.UID]string{}, uids: map[string]types.UID{}}
}

func (c *Controller) Name() string { return "provisioningrequest" }

// Register watches requests, the PodTemplates they name and the claims launched
// for them.
func (c *Controller) Register(ctx context.Context, mgr manager.Manager) error {
	if _, err := mgr.GetRESTMapper().RESTMapping(autoscalingv1.SchemeGroupVersion.WithKind("ProvisioningRequest").GroupKind(), autoscalingv1.SchemeGroupVersion.Version); err != nil {
		if meta.IsNoMatchError(err) {
			// An upgrade by `helm upgrade` installs no new CRD: the controller runs
			// without this one rather than not at all.
			log.FromContext(ctx).Info("not serving ProvisioningRequests: the CRD provisioningrequests.autoscaling.x-k8s.io is not installed (apply the chart's crds/ to serve Kueue's requests)")
			return nil
		}
		return fmt.Errorf("looking up the ProvisioningRequest API, %w", err)
	}
	return builder.ControllerManagedBy(mgr).Named(c.Name()).
		For(&autoscalingv1.ProvisioningRequest{}).
		Watches(&corev1.PodTemplate{}, handler.EnqueueRequestsFromMapFunc(c.requestsNaming)).
		Watches(&v1.NodeClaim{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			ns, name, ok := strings.Cut(o.GetAnnotations()[dovetailv1alpha1.ProvisioningRequestAnnotationKey], "/")
			if !ok {
				return nil
			}
			return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: ns, Name: name}}}
		})).
		Complete(c)
}

// NeedLeaderElection: only the leader plans and launches.
func (c *Controller) NeedLeaderElection() bool { return true }

func (c *Controller) requestsNaming(ctx context.Context, o client.Object) []reconcile.Request {
	var list autoscalingv1.ProvisioningRequestList
	if err := c.kube.List(ctx, &list, client.InNamespace(o.GetNamespace())); err != nil {
		return nil
	}
	var out []reconcile.Request
	for _, pr := range list.Items {
		for _, set := range pr.Spec.PodSets {
			if set.PodTemplateRef.Name == o.GetName() {
				out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&pr)})
				break
			}
		}
	}
	return out
}

// Reconcile moves a request along: accepted, its capacity found or launched
// (or not, and tried again later), booked, and the booking consumed or expired.
func (c *Controller) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	key := provreq.Key(req.Namespace, req.Name)
	pr := &autoscalingv1.ProvisioningRequest{}
	if err := c.kube.Get(ctx, req.NamespacedName, pr); err != nil {
		if apierrors.IsNotFound(err) {
			c.release(key)
			c.forget(c.uids[key])
			delete(c.uids, key)
			return reconcile.Result{}, c.abandon(ctx, key)
		}
		return reconcile.Result{}, err
	}
	if !provreq.Supported(pr.Spec.ProvisioningClassName) {
		return reconcile.Result{}, nil
	}
	c.uids[key] = pr.UID
	ctx = log.IntoContext(ctx, log.FromContext(ctx).WithValues("provisioningRequest", key, "class", pr.Spec.ProvisioningClassName))
	stored := pr.DeepCopy()
	result, err := c.reconcile(ctx, pr)
	c.bookings.Resolved(key)
	if !equality.Semantic.DeepEqual(stored.Status, pr.Status) {
		// Locked: a decision made on a stale read is not written over a newer one.
		if perr := c.kube.Status().Patch(ctx, pr, client.MergeFromWithOptions(stored, client.MergeFromWithOptimisticLock{})); perr != nil {
			if apierrors.IsNotFound(perr) || apierrors.IsConflict(perr) {
				return reconcile.Result{RequeueAfter: time.Second}, nil
			}
			return reconcile.Result{}, errors.Join(err, fmt.Errorf("writing the status of provisioningrequest %s, %w", key, perr))
		}
	}
	return result, err
}

func (c *Controller) reconcile(ctx context.Context, pr *autoscalingv1.ProvisioningRequest) (reconcile.Result, error) {
	key, now := provreq.Key(pr.Namespace, pr.Name), c.clock.Now()
	if pr.DeletionTimestamp != nil || isTrue(pr, autoscalingv1.ConditionFailed) || isTrue(pr, autoscalingv1.ConditionBookingExpired) {
		c.release(key)
		c.forget(pr.UID)
		if !isTrue(pr, autoscalingv1.ConditionProvisioned) {
			// A gang still launching is launched for nothing now.
			return reconcile.Result{}, c.abandon(ctx, key)
		}
		return reconcile.Result{}, nil
	}
	pods, err := c.virtualPods(ctx, pr)
	if err != nil {
		var missing *provreq.MissingTemplatesError
		if errors.As(err, &missing) {
			c.release(key)
			if isTrue(pr, autoscalingv1.ConditionProvisioned) {
				// The workload is gone with its templates: nothing is left to book for.
				return reconcile.Result{}, nil
			}
			c.setCondition(pr, autoscalingv1.ConditionFailed, metav1.ConditionTrue, provreq.ReasonFailedToCreatePods, "Failed to create pods, "+err.Error())
			c.endLaunch(pr)
			return reconcile.Result{}, c.abandon(ctx, key)
		}
		return reconcile.Result{}, err
	}
	if isTrue(pr, autoscalingv1.ConditionProvisioned) {
		return c.book(ctx, pr, pods, now)
	}
	if now.Sub(pr.CreationTimestamp.Time) >= provreq.ExpiryTime {
		c.release(key)
		c.setCondition(pr, autoscalingv1.ConditionFailed, metav1.ConditionTrue, provreq.ReasonExpired, "Provisioning Request is expired")
		c.endLaunch(pr)
		return reconcile.Result{}, c.abandon(ctx, key)
	}
	if !isTrue(pr, autoscalingv1.ConditionAccepted) {
		c.setCondition(pr, autoscalingv1.ConditionAccepted, metav1.ConditionTrue, provreq.ReasonAccepted, "Provisioning Request was accepted")
	}
	view, err := c.provisioner.Cluster().Read(ctx, state.ReadOnly)
	if err != nil {
		return reconcile.Result{}, err
	}
	if pr.Spec.ProvisioningClassName == autoscalingv1.ProvisioningClassBestEffortAtomicScaleUp {
		if done, result, err := c.followLaunch(ctx, pr, pods, view); done {
			return result, err
		}
	}
	if r, ok := c.retries[pr.UID]; ok && now.Before(r.at) {
		return reconcile.Result{RequeueAfter: r.at.Sub(now)}, nil
	}
	// Planned without its own booking (left by a status write that failed, or a
	// stale read): its pods would take the room they look for.
	c.bookings.Delete(key)
	snap, err := c.provisioner.SnapshotOf(ctx, view)
	if err != nil {
		return reconcile.Result{}, err
	}
	launch := pr.Spec.ProvisioningClassName == autoscalingv1.ProvisioningClassBestEffortAtomicScaleUp
	plan := snap.Plan(nil, pods, launch)
	if len(plan.Unschedulable) > 0 {
		return c.notFound(ctx, pr, provreq.NotFoundMessage(plan, len(pods), launch))
	}
	if len(plan.NodeClaims) == 0 {
		c.bookings.Set(provreq.Booking{Key: key, UID: pr.UID, Pods: pods})
		c.provisioner.Trigger()
		c.forget(pr.UID)
		c.setCondition(pr, autoscalingv1.ConditionProvisioned, metav1.ConditionTrue, provreq.ReasonCapacityIsFound, "Capacity is found in the cluster")
		c.recorder.Eventf(pr, corev1.EventTypeNormal, "CapacityIsFound", "All %d pods fit on capacity in the cluster; it is booked for them for %s", len(pods), provreq.BookingTime)
		return reconcile.Result{RequeueAfter: bookingRecheck}, nil
	}
	return c.launch(ctx, pr, pods, snap, plan)
}

// launch creates every NodeClaim of the gang's plan, marked as one batch. The
// booking goes first, so that the provisioner holds the claims' room for the
// gang from the moment it sees them.
func (c *Controller) launch(ctx context.Context, pr *autoscalingv1.ProvisioningRequest, pods []*corev1.Pod, snap *scheduling.Snapshot, plan *scheduling.Results) (reconcile.Result, error) {
	key := provreq.Key(pr.Namespace, pr.Name)
	batch := fmt.Sprintf("%d/%d", c.clock.Now().UnixNano(), len(plan.NodeClaims))
	c.bookings.Set(provreq.Booking{Key: key, UID: pr.UID, Pods: pods})
	c.launching[pr.UID] = batch
	if pr.Status.ProvisioningClassDetails == nil {
		pr.Status.ProvisioningClassDetails = map[string]autoscalingv1.Detail{}
	}
	pr.Status.ProvisioningClassDetails[provreq.BatchDetail] = autoscalingv1.Detail(batch)
	mark := func(nc *v1.NodeClaim) {
		nc.Labels[dovetailv1alpha1.ProvisioningRequestLabelKey] = string(pr.UID)
		nc.Annotations[dovetailv1alpha1.ProvisioningRequestAnnotationKey] = key
		nc.Annotations[dovetailv1alpha1.ProvisioningRequestBatchAnnotationKey] = batch
	}
	var created []*v1.NodeClaim
	for _, p := range plan.NodeClaims {
		nc, err := c.provisioner.LaunchMarked(ctx, snap.Pool(p.NodePool), p, createReason, mark)
		if err != nil {
			// A part of a gang is no gang: what was created goes.
			c.rollBack(ctx, created)
			c.endLaunch(pr)
			return c.notFound(ctx, pr, fmt.Sprintf("Capacity is not found: creating the NodeClaims for the pods failed (%v); the %d created were deleted", err, len(created)))
		}
		created = append(created, nc)
	}
	names := make([]string, 0, len(created))
	for _, nc := range created {
		names = append(names, nc.Name)
	}
	log.FromContext(ctx).Info("launching the nodes of a provisioning request", "nodeclaims", names, "pods", len(pods), "pricePerHour", fmt.Sprintf("%.4f", plan.PricePerHour()))
	c.recorder.Eventf(pr, corev1.EventTypeNormal, "Launching", "Launching %d node(s) for %d pods: %s", len(created), len(pods), strings.Join(names, ", "))
	return reconcile.Result{RequeueAfter: launchRecheck}, nil
}

// followLaunch follows the batch of claims the request is launching: all
// launched makes it Provisioned; one refused (its claim deleted) or missing (a
// restart cut the batch short, or every claim went before it was seen) rolls the
// batch back and the request waits to be tried again; otherwise it keeps waiting.
// Claims of earlier batches still alive are deleted. It reports done when a
// batch is in flight.
func (c *Controller) followLaunch(ctx context.Context, pr *autoscalingv1.ProvisioningRequest, pods []*corev1.Pod, view *state.View) (bool, reconcile.Result, error) {
	current := c.launching[pr.UID]
	if current == "" {
		current = string(pr.Status.ProvisioningClassDetails[provreq.BatchDetail])
	}
	var claims []*v1.NodeClaim
	for i := range view.Claims {
		nc := &view.Claims[i]
		if nc.Labels[dovetailv1alpha1.ProvisioningRequestLabelKey] != string(pr.UID) {
			continue
		}
		if nc.Annotations[dovetailv1alpha1.ProvisioningRequestBatchAnnotationKey] == current {
			claims = append(claims, nc)
			continue
		}
		if current != "" || !meta.IsStatusConditionTrue(nc.Status.Conditions, v1.ConditionTypeInitialized) {
			// A batch rolled back before a restart finished its rollback, or one
			// whose record was lost: nothing will come for it.
			c.rollBack(ctx, []*v1.NodeClaim{nc})
		}
	}
	if current == "" {
		return false, reconcile.Result{}, nil
	}
	want := batchSize(current)
	var launched int
	var refused []string
	for _, nc := range claims {
		switch {
		case nc.DeletionTimestamp != nil:
			refused = append(refused, nc.Name)
		case meta.IsStatusConditionTrue(nc.Status.Conditions, v1.ConditionTypeLaunched):
			launched++
		}
	}
	key := provreq.Key(pr.Namespace, pr.Name)
	switch {
	case len(refused) > 0 || len(claims) < want:
		c.rollBack(ctx, claims)
		c.endLaunch(pr)
		why := fmt.Sprintf("%d of %d node(s) could not be launched (NodeClaim %s)", len(refused), want, strings.Join(refused, ", "))
		if len(refused) == 0 {
			why = fmt.Sprintf("%d of the %d NodeClaims planned are gone", want-len(claims), want)
		}
		result, err := c.notFound(ctx, pr, fmt.Sprintf("Capacity is not found: %s; all %d were released (%d had launched) so none bills", why, want, launched))
		return true, result, err
	case launched == want:
		c.endLaunch(pr)
		c.bookings.Set(provreq.Booking{Key: key, UID: pr.UID, Pods: pods})
		c.provisioner.Trigger()
		c.forget(pr.UID)
		c.setCondition(pr, autoscalingv1.ConditionProvisioned, metav1.ConditionTrue, provreq.ReasonCapacityIsProvisioned, "Capacity is found in the cluster")
		c.recorder.Eventf(pr, corev1.EventTypeNormal, "CapacityIsProvisioned", "All %d node(s) launched for %d pods; they are booked for them for %s", want, len(pods), provreq.BookingTime)
		return true, reconcile.Result{RequeueAfter: bookingRecheck}, nil
	}
	// Still launching: the booking holds their room (again, after a restart).
	c.bookings.Set(provreq.Booking{Key: key, UID: pr.UID, Pods: pods})
	return true, reconcile.Result{RequeueAfter: launchRecheck}, nil
}

// endLaunch records that the request launches no batch any more.
func (c *Controller) endLaunch(pr *autoscalingv1.ProvisioningRequest) {
	delete(c.launching, pr.UID)
	delete(pr.Status.ProvisioningClassDetails, provreq.BatchDetail)
}

// rollBack deletes claims of a batch: their instances are terminated, as any
// claim's, so nothing of a gang that did not launch whole keeps billing. A delete
// that fails is tried again from the next reconcile (the claim is of no batch in
// flight then).
func (c *Controller) rollBack(ctx context.Context, claims []*v1.NodeClaim) {
	for _, nc := range claims {
		if nc.DeletionTimestamp != nil {
			continue
		}
		if err := c.kube.Delete(ctx, nc); err != nil && !apierrors.IsNotFound(err) {
			log.FromContext(ctx).Error(err, "rolling back a nodeclaim of a provisioning request", "nodeclaim", nc.Name)
		}
	}
}

// abandon deletes the claims still launching for a request that is gone or
// failed (Kueue deletes a request when its workload goes, or when it makes the
// next attempt): no pod will come for them. Nodes that are up stay, as any
// capacity, for consolidation to judge.
func (c *Controller) abandon(ctx context.Context, key string) error {
	view, err := c.provisioner.Cluster().Read(ctx, state.ReadOnly)
	if err != nil {
		return err
	}
	for i := range view.Claims {
		nc := &view.Claims[i]
		if nc.Annotations[dovetailv1alpha1.ProvisioningRequestAnnotationKey] != key || nc.DeletionTimestamp != nil ||
			meta.IsStatusConditionTrue(nc.Status.Conditions, v1.ConditionTypeInitialized) {
			continue
		}
		log.FromContext(ctx).Info("deleting a nodeclaim launched for a provisioning request that is gone or failed", "provisioningRequest", key, "nodeclaim", nc.Name)
		if err := c.kube.Delete(ctx, nc); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting nodeclaim %s of provisioning request %s, %w", nc.Name, key, err)
		}
	}
	return nil
}

// notFound records that the capacity is not there: the request is tried again
// after a backoff, or fails at once when its noRetry parameter asks so (Kueue then
// retries with a new request).
func (c *Controller) notFound(ctx context.Context, pr *autoscalingv1.ProvisioningRequest, message string) (reconcile.Result, error) {
	c.release(provreq.Key(pr.Namespace, pr.Name))
	c.recorder.Event(pr, corev1.EventTypeWarning, provreq.ReasonCapacityIsNotFound, message)
	log.FromContext(ctx).Info("capacity not found for a provisioning request", "why", message)
	if pr.Spec.Parameters[provreq.NoRetryParameter] == "true" {
		c.setCondition(pr, autoscalingv1.ConditionFailed, metav1.ConditionTrue, provreq.ReasonCapacityIsNotFound, message)
		return reconcile.Result{}, nil
	}
	r := c.retries[pr.UID]
	r.attempts++
	backoff := c.opts.InitialBackoff << min(r.attempts-1, 20)
	if backoff > c.opts.MaxBackoff {
		backoff = c.opts.MaxBackoff
	}
	r.at = c.clock.Now().Add(backoff)
	c.retries[pr.UID] = r
	c.setCondition(pr, autoscalingv1.ConditionProvisioned, metav1.ConditionFalse, provreq.ReasonCapacityIsNotFound, fmt.Sprintf("%s; trying again in %s", message, backoff))
	return reconcile.Result{RequeueAfter: backoff}, nil
}

// book keeps the capacity of a provisioned request for its pods until they are
// all scheduled or BookingTime has passed since it was provisioned.
func (c *Controller) book(ctx context.Context, pr *autoscalingv1.ProvisioningRequest, pods []*corev1.Pod, now time.Time) (reconcile.Result, error) {
	key := provreq.Key(pr.Namespace, pr.Name)
	var list corev1.PodList
	if err := c.kube.List(ctx, &list, client.InNamespace(pr.Namespace), client.UnsafeDisableDeepCopy); err != nil {
		return reconcile.Result{}, fmt.Errorf("listing the pods of provisioning request %s, %w", key, err)
	}
	scheduled := 0
	for i := range list.Items {
		p := &list.Items[i]
		if p.Spec.NodeName != "" && provreq.Consumes(p) == key && p.Status.Phase != corev1.PodFailed {
			scheduled++
		}
	}
	if scheduled >= len(pods) {
		c.release(key)
		c.setCondition(pr, autoscalingv1.ConditionBookingExpired, metav1.ConditionTrue, provreq.ReasonCapacityBookingConsumed, "Capacity booking consumed: all pods scheduled")
		return reconcile.Result{}, nil
	}
	provisioned := meta.FindStatusCondition(pr.Status.Conditions, autoscalingv1.ConditionProvisioned)
	expires := provisioned.LastTransitionTime.Add(provreq.BookingTime)
	if !now.Before(expires) {
		c.release(key)
		c.setCondition(pr, autoscalingv1.ConditionBookingExpired, metav1.ConditionTrue, provreq.ReasonCapacityReservationTimeExpired,
			fmt.Sprintf("Capacity reservation time is expired: %d of %d pods were scheduled in %s", scheduled, len(pods), provreq.BookingTime))
		return reconcile.Result{}, nil
	}
	c.bookings.Set(provreq.Booking{Key: key, UID: pr.UID, Pods: pods})
	return reconcile.Result{RequeueAfter: min(bookingRecheck, expires.Sub(now))}, nil
}

// virtualPods reads the request's PodTemplates, from the API server where the
// cache has not seen one yet, and makes its pods.
func (c *Controller) virtualPods(ctx context.Context, pr *autoscalingv1.ProvisioningRequest) ([]*corev1.Pod, error) {
	templates := map[string]*corev1.PodTemplate{}
	for _, set := range pr.Spec.PodSets {
		name := set.PodTemplateRef.Name
		if _, ok := templates[name]; ok {
			continue
		}
		pt := &corev1.PodTemplate{}
		err := c.kube.Get(ctx, client.ObjectKey{Namespace: pr.Namespace, Name: name}, pt)
		if apierrors.IsNotFound(err) {
			err = c.reader.Get(ctx, client.ObjectKey{Namespace: pr.Namespace, Name: name}, pt)
		}
		switch {
		case apierrors.IsNotFound(err):
			templates[name] = nil
		case err != nil:
			return nil, fmt.Errorf("reading podtemplate %s/%s, %w", pr.Namespace, name, err)
		default:
			templates[name] = pt
		}
	}
	return provreq.VirtualPods(pr, templates)
}

func (c *Controller) release(key string) {
	c.bookings.Delete(key)
	c.provisioner.Trigger()
}

func (c *Controller) forget(uid types.UID) {
	delete(c.retries, uid)
	delete(c.launching, uid)
}

func (c *Controller) setCondition(pr *autoscalingv1.ProvisioningRequest, kind string, status metav1.ConditionStatus, reason, message string) {
	meta.SetStatusCondition(&pr.Status.Conditions, metav1.Condition{Type: kind, Status: status, Reason: reason, Message: conditionMessage(message),
		ObservedGeneration: pr.Generation, LastTransitionTime: metav1.NewTime(c.clock.Now())})
}

// conditionMessage fits the API's limit on a condition's message.
func conditionMessage(s string) string {
	const limit = 32768
	if len(s) > limit {
		return s[:limit-3] + "..."
	}
	return s
}

func isTrue(pr *autoscalingv1.ProvisioningRequest, kind string) bool {
	return meta.IsStatusConditionTrue(pr.Status.Conditions, kind)
}

// batchSize reads the N of a batch's "ID/N".
func batchSize(b string) int {
	_, n, _ := strings.Cut(b, "/")
	size, _ := strconv.Atoi(n)
	return size
}
