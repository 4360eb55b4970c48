// Package provreq is what a ProvisioningRequest (autoscaling.x-k8s.io/v1) means to
// the engine: the pods it stands for before they exist, the capacity booked for
// them, and the pods that consume it. It does no I/O: the provisioningrequest
// controller decides with it, the provisioner and disruption hold its bookings,
// and `dovetail simulate` plans requests with it.
package provreq

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"

	autoscalingv1 "github.com/dovetail-sh/dovetail/controller/apis/autoscaling/v1"
	dovetailv1alpha1 "github.com/dovetail-sh/dovetail/controller/apis/dovetail/v1alpha1"
	"github.com/dovetail-sh/dovetail/controller/scheduling"
)

// Condition reasons, as Cluster Autoscaler writes them (Kueue shows them to users).
const (
	ReasonAccepted                       = "Accepted"
	ReasonCapacityIsFound                = "CapacityIsFound"
	ReasonCapacityIsProvisioned          = "CapacityIsProvisioned"
	ReasonCapacityIsNotFound             = "CapacityIsNotFound"
	ReasonFailedToCreatePods             = "FailedToCreatePods"
	ReasonCapacityReservationTimeExpired = "CapacityReservationTimeExpired"
	ReasonCapacityBookingConsumed        = "CapacityBookingConsumed"
	ReasonExpired                        = "Expired"
)

const (
	// BookingTime is how long capacity found or launched for a request is held for
	// its pods, as Cluster Autoscaler books it.
	BookingTime = 10 * time.Minute
	// ExpiryTime is how long a request that never got its capacity is tried before
	// it fails (Expired).
	ExpiryTime = 7 * 24 * time.Hour
	// NoRetryParameter set to "true" makes a check that finds no capacity fail
	// (Kueue then retries with a new request) instead of checking again.
	NoRetryParameter = "noRetry"
)

// VirtualPodAnnotation marks a pod that stands for one of a request's pods; its
// value is the request's key. TemplateAnnotation names the PodTemplate it was made
// from, whose pod set a consuming pod is matched to.
const (
	VirtualPodAnnotation = "dovetail.sh/provisioning-request-pod"
	TemplateAnnotation   = "dovetail.sh/provisioning-request-template"
)

// KueuePodSetLabel names the pod set of a workload's pod, as Kueue labels it; its
// PodTemplates are named after the pod set.
const KueuePodSetLabel = "kueue.x-k8s.io/podset"

// Key names a request: namespace/name.
func Key(namespace, name string) string { return namespace + "/" + name }

// Supported reports whether Dovetail serves the class.
func Supported(class string) bool {
	return class == autoscalingv1.ProvisioningClassCheckCapacity || class == autoscalingv1.ProvisioningClassBestEffortAtomicScaleUp
}

// IsVirtual reports whether a pod stands for a request's pod.
func IsVirtual(p *corev1.Pod) bool { return p.Annotations[VirtualPodAnnotation] != "" }

// Consumes is the key of the request whose capacity the pod consumes, or "".
func Consumes(p *corev1.Pod) string {
	name := p.Annotations[autoscalingv1.ConsumeAnnotationKey]
	if name == "" {
		name = p.Annotations[autoscalingv1.LegacyConsumeAnnotation]
	}
	if name == "" {
		return ""
	}
	return Key(p.Namespace, name)
}

// MissingTemplatesError names the PodTemplates a request refers to that do not exist.
type MissingTemplatesError struct{ Names []string }

func (e *MissingTemplatesError) Error() string {
	return fmt.Sprintf("missing pod templates: %s", strings.Join(e.Names, ", "))
}

// VirtualPods are the pods the request stands for: count copies of each pod
// set's template, named provreq-NAME-SET-I with deterministic UIDs, carrying the
// template's labels (spreads and affinities count them) and Kueue's annotations,
// pending and never bound. templates are the request's namespace's PodTemplates by
// name.
func VirtualPods(pr *autoscalingv1.ProvisioningRequest, templates map[string]*corev1.PodTemplate) ([]*corev1.Pod, error) {
	var missing []string
	for _, set := range pr.Spec.PodSets {
		if templates[set.PodTemplateRef.Name] == nil {
			missing = append(missing, set.PodTemplateRef.Name)
		}
	}
	if len(missing) > 0 {
		return nil, &MissingTemplatesError{Names: missing}
	}
	key := Key(pr.Namespace, pr.Name)
	var out []*corev1.Pod
	for s, set := range pr.Spec.PodSets {
		template := templates[set.PodTemplateRef.Name].Template
		spec := scheduling.TemplatePodSpec(template)
		for i := range set.Count {
			annotations := map[string]string{VirtualPodAnnotation: key, TemplateAnnotation: set.PodTemplateRef.Name,
				autoscalingv1.ConsumeAnnotationKey: pr.Name, autoscalingv1.ClassAnnotationKey: pr.Spec.ProvisioningClassName}
			out = append(out, &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{
					Name: fmt.Sprintf("provreq-%s-%d-%d", pr.Name, s, i), Namespace: pr.Namespace, UID: types.UID(fmt.Sprintf("%s-%d-%d", pr.UID, s, i)),
					Labels: template.Labels, Annotations: annotations,
				},
				Spec:   *spec.DeepCopy(),
				Status: corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable}}},
			})
		}
	}
	return out, nil
}

// NotFoundMessage says how many of a request's total pods the plan could not
// place, and, where it may launch, why the first could not.
func NotFoundMessage(plan *scheduling.Results, total int, launch bool) string {
	if !launch {
		return fmt.Sprintf("Capacity is not found: %d of %d pods fit on no node or NodeClaim in the cluster", len(plan.Unschedulable), total)
	}
	u := plan.Unschedulable[0]
	return fmt.Sprintf("Capacity is not found: %d of %d pods fit nowhere on the capacity in the cluster or on any node a NodePool may launch; %s: %s", len(plan.Unschedulable), total, u.Pod.Name, u.Reason)
}

// Booking is the capacity held for a request's pods: its virtual pods, placed on
// the nodes launched for it (labeled with its UID) first, then anywhere they fit.
type Booking struct {
	Key  string
	UID  types.UID
	Pods []*corev1.Pod
}

// Hold places every booking's pods, less one for each pod that consumes the
// booking already (bound, nominated or pending), onto the snapshot's nodes as if
// they were bound there: the provisioner then plans no other pod into their room,
// and a consuming pod finds it free. Each booking is placed on the nodes launched
// for it first, all of them before any goes elsewhere, and never on another
// booking's own nodes. It returns the keys of the bookings each node holds. Pods
// that fit nowhere any more are not held (the capacity was taken).
func Hold(s *scheduling.Snapshot, bookings []Booking) map[string][]string {
	held := map[string][]string{}
	if len(bookings) == 0 {
		return held
	}
	consumers := map[string][]*corev1.Pod{}
	for _, n := range s.Nodes {
		for _, p := range n.Pods {
			if k := Consumes(p); k != "" && !IsVirtual(p) {
				consumers[k] = append(consumers[k], p)
			}
		}
	}
	for _, p := range s.Pending {
		if k := Consumes(p); k != "" {
			consumers[k] = append(consumers[k], p)
		}
	}
	sorted := slices.Clone(bookings)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Key < sorted[j].Key })
	owners := map[string]bool{}
	for _, b := range sorted {
		owners[string(b.UID)] = true
	}
	place := func(b Booking, nodes []*scheduling.ExistingNode, pods []*corev1.Pod) []*corev1.Pod {
		if len(nodes) == 0 || len(pods) == 0 {
			return pods
		}
		res := s.PlanOn(nodes, nil, pods, false)
		for _, e := range res.Existing {
			e.Node.Pods = append(e.Node.Pods[:len(e.Node.Pods):len(e.Node.Pods)], e.Pods...)
			held[e.Node.Name] = append(held[e.Node.Name], b.Key)
		}
		left := make([]*corev1.Pod, 0, len(res.Unschedulable))
		for _, u := range res.Unschedulable {
			left = append(left, u.Pod)
		}
		return left
	}
	leftovers := make([][]*corev1.Pod, len(sorted))
	for i, b := range sorted {
		var own []*scheduling.ExistingNode
		for _, n := range s.Nodes {
			if n.Labels[dovetailv1alpha1.ProvisioningRequestLabelKey] == string(b.UID) {
				own = append(own, n)
			}
		}
		leftovers[i] = place(b, own, Unconsumed(b.Pods, consumers[b.Key]))
	}
	var anyones []*scheduling.ExistingNode
	for _, n := range s.Nodes {
		if !owners[n.Labels[dovetailv1alpha1.ProvisioningRequestLabelKey]] {
			anyones = append(anyones, n)
		}
	}
	for i, b := range sorted {
		place(b, anyones, leftovers[i])
	}
	return held
}

// Unconsumed are the virtual pods left once each consumer has taken one: one of
// its pod set (Kueue's label, matched to the PodTemplate the pod was made from),
// else the smallest it fits into (a sidecar or a LimitRange may have added to
// what the template asks), else the largest.
func Unconsumed(virtual, consumers []*corev1.Pod) []*corev1.Pod {
	left := slices.Clone(virtual)
	for _, c := range consumers {
		if len(left) == 0 {
			break
		}
		i := consumedBy(left, c)
		left = slices.Delete(left, i, i+1)
	}
	return left
}

func consumedBy(left []*corev1.Pod, c *corev1.Pod) int {
	if set := c.Labels[KueuePodSetLabel]; set != "" {
		if i := slices.IndexFunc(left, func(v *corev1.Pod) bool {
			t := v.Annotations[TemplateAnnotation]
			return t == set || strings.HasSuffix(t, "-"+set)
		}); i >= 0 {
			return i
		}
	}
	want := scheduling.PodRequests(c)
	best, largest := -1, 0
	for i, v := range left {
		r := scheduling.PodRequests(v)
		if smaller(scheduling.PodRequests(left[largest]), r) {
			largest = i
		}
		if want.Fits(r) && (best < 0 || smaller(r, scheduling.PodRequests(left[best]))) {
			best = i
		}
	}
	if best >= 0 {
		return best
	}
	return largest
}

// smaller orders requests by cpu, then memory.
func smaller(a, b scheduling.Resources) bool {
	if a.MilliCPU != b.MilliCPU {
		return a.MilliCPU < b.MilliCPU
	}
	return a.Memory < b.Memory
}

// BatchDetail is the provisioningClassDetails entry naming the batch of NodeClaims
// a request is launching ("ID/N"), until it is provisioned or rolled back.
const BatchDetail = "dovetail.sh/launching-batch"

// HoldsCapacity reports whether the request books capacity: one of a class
// Dovetail serves, in force, provisioned or with a batch launching.
func HoldsCapacity(pr *autoscalingv1.ProvisioningRequest) bool {
	c := pr.Status.Conditions
	if !Supported(pr.Spec.ProvisioningClassName) || pr.DeletionTimestamp != nil ||
		meta.IsStatusConditionTrue(c, autoscalingv1.ConditionFailed) || meta.IsStatusConditionTrue(c, autoscalingv1.ConditionBookingExpired) {
		return false
	}
	return meta.IsStatusConditionTrue(c, autoscalingv1.ConditionProvisioned) || pr.Status.ProvisioningClassDetails[BatchDetail] != ""
}

// Cache holds the bookings in force, for the provisioner and disruption, and
// which requests the controller has looked at since it started.
type Cache struct {
	mu       sync.RWMutex
	bookings map[string]Booking
	resolved sets.Set[string]
}

// NewCache makes an empty cache.
func NewCache() *Cache { return &Cache{bookings: map[string]Booking{}, resolved: sets.New[string]()} }

// Resolved records that the controller has looked at the request (booked or not).
func (c *Cache) Resolved(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.resolved.Insert(key)
}

// Unresolved are the keys given that the controller has not looked at yet: a
// plan made now would not hold their bookings.
func (c *Cache) Unresolved(keys []string) []string {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return sets.List(sets.New(keys...).Difference(c.resolved))
}

// Set books (or books again) capacity for a request.
func (c *Cache) Set(b Booking) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.bookings[b.Key] = b
}

// Delete releases a request's booking.
func (c *Cache) Delete(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.bookings, key)
}

// Hold holds every booking on the snapshot (see Hold). A nil cache holds nothing.
func (c *Cache) Hold(s *scheduling.Snapshot) {
	if c == nil {
		return
	}
	c.mu.RLock()
	bookings := make([]Booking, 0, len(c.bookings))
	for _, b := range c.bookings {
		bookings = append(bookings, b)
	}
	c.mu.RUnlock()
	Hold(s, bookings)
}

// BookedOn are the keys of the requests whose virtual pods a node of a held
// snapshot holds.
func BookedOn(n *scheduling.ExistingNode) []string {
	var out []string
	for _, p := range n.Pods {
		if k := p.Annotations[VirtualPodAnnotation]; k != "" && !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	return out
}
