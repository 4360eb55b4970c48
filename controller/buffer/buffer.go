// Package buffer turns CapacityBuffers (autoscaling.x-k8s.io/v1beta1, gate
// CapacityBuffer) into virtual pods: copies of a pod template that the provisioner
// plans like pending pods and never binds, so that their room is kept free as
// spare capacity, and consolidation keeps room for them. It does no I/O.
package buffer

import (
	"fmt"
	"math"
	"slices"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	resourcehelper "k8s.io/component-helpers/resource"

	"github.com/dovetail-sh/dovetail/controller/apis/autoscaling/v1beta1"
	"github.com/dovetail-sh/dovetail/controller/scheduling"
)

// Karpenter's annotations on a virtual pod.
const (
	VirtualPodAnnotation = "karpenter.sh/capacity-buffer-fake-pod"
	NameAnnotation       = "karpenter.sh/capacity-buffer-name"
	NamespaceAnnotation  = "karpenter.sh/capacity-buffer-namespace"
)

// Condition types and reasons of a CapacityBuffer, as Karpenter writes them.
const (
	ConditionReadyForProvisioning = "ReadyForProvisioning"
	ConditionProvisioning         = "Provisioning"

	ReasonResolved                = "Resolved"
	ReasonPodTemplateNotFound     = "PodTemplateNotFound"
	ReasonScalableRefNotFound     = "ScalableRefNotFound"
	ReasonResolutionFailed        = "ResolutionFailed"
	ReasonFitsExistingCapacity    = "FitsExistingCapacity"
	ReasonRequiresNewCapacity     = "RequiresNewCapacity"
	ReasonNotReadyForProvisioning = "NotReadyForProvisioning"
	ReasonBufferEmpty             = "BufferEmpty"
)

// IsVirtual reports whether a pod is a buffer's, not a real one.
func IsVirtual(p *corev1.Pod) bool { return p.Annotations[VirtualPodAnnotation] == "true" }

// Key names a buffer: namespace/name.
func Key(namespace, name string) string { return namespace + "/" + name }

// Replicas is how many copies of the template the buffer keeps room for, as
// Karpenter computes it: the larger of spec.replicas and spec.percentage of the
// scalable's replicas (rounded up, at least 1; percentage applies only to a
// scalableRef), then no more than fit in spec.limits (the fewest over the limited
// resources the template requests). With limits alone, as many as fit; with
// nothing, 0.
func Replicas(spec v1beta1.CapacityBufferSpec, scalableReplicas *int32, template corev1.PodTemplateSpec) int32 {
	var candidates []int32
	if spec.Percentage != nil && spec.ScalableRef != nil && scalableReplicas != nil && *scalableReplicas > 0 {
		pct := int32(math.Ceil(float64(*scalableReplicas) * float64(*spec.Percentage) / 100))
		if *spec.Percentage > 0 {
			pct = max(pct, 1)
		}
		candidates = append(candidates, pct)
	}
	if spec.Replicas != nil {
		candidates = append(candidates, *spec.Replicas)
	}
	limited, ok := limitReplicas(spec.Limits, template)
	switch {
	case ok && len(candidates) > 0:
		return min(slices.Max(candidates), limited)
	case ok:
		return limited
	case len(candidates) > 0:
		return slices.Max(candidates)
	}
	return 0
}

func limitReplicas(limits corev1.ResourceList, template corev1.PodTemplateSpec) (int32, bool) {
	if len(limits) == 0 {
		return 0, false
	}
	requests := resourcehelper.PodRequests(&corev1.Pod{Spec: scheduling.WithRequestsFromLimits(template.Spec)}, resourcehelper.PodResourcesOptions{})
	out, ok := int32(math.MaxInt32), false
	for name, limit := range limits {
		req, has := requests[name]
		if !has || req.IsZero() {
			continue
		}
		ok = true
		out = min(out, int32(min(limit.MilliValue()/req.MilliValue(), math.MaxInt32)))
	}
	return out, ok
}

// VirtualPods are the buffer's n copies of the template: named
// capacity-buffer-NAME-i with deterministic UIDs, the template's labels (so
// spreads and affinities count them), no claims to volumes (a copy cannot mount
// them), and Karpenter's annotations. They are pending and never bound.
func VirtualPods(cb *v1beta1.CapacityBuffer, template corev1.PodTemplateSpec, n int32) []*corev1.Pod {
	spec := scheduling.TemplatePodSpec(template)
	out := make([]*corev1.Pod, 0, n)
	for i := int32(1); i <= n; i++ {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{
				Name: fmt.Sprintf("capacity-buffer-%s-%d", cb.Name, i), Namespace: cb.Namespace, UID: types.UID(fmt.Sprintf("%s-%d", cb.UID, i)),
				Labels:      template.Labels,
				Annotations: map[string]string{VirtualPodAnnotation: "true", NameAnnotation: cb.Name, NamespaceAnnotation: cb.Namespace},
			},
			Spec:   *spec.DeepCopy(),
			Status: corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable}}},
		}
		out = append(out, p)
	}
	return out
}

// Placement counts where the last plan put a buffer's virtual pods.
type Placement struct {
	// Existing are on nodes there already (or launching), New on nodes the plan
	// launches, Failed nowhere.
	Existing, New, Failed int
}

// Classify counts, per buffer key, where the plan put its virtual pods.
func Classify(r *scheduling.Results) map[string]Placement {
	out := map[string]Placement{}
	add := func(p *corev1.Pod, f func(*Placement)) {
		if !IsVirtual(p) {
			return
		}
		k := Key(p.Annotations[NamespaceAnnotation], p.Annotations[NameAnnotation])
		c := out[k]
		f(&c)
		out[k] = c
	}
	for _, e := range r.Existing {
		for _, p := range e.Pods {
			add(p, func(c *Placement) { c.Existing++ })
		}
	}
	for _, nc := range r.NodeClaims {
		for _, p := range nc.Pods {
			add(p, func(c *Placement) { c.New++ })
		}
	}
	for _, u := range r.Unschedulable {
		add(u.Pod, func(c *Placement) { c.Failed++ })
	}
	return out
}

// ProvisioningCondition is Karpenter's Provisioning condition for a buffer whose
// ReadyForProvisioning is ready, with desired replicas, given where the last plan
// put its pods; nil leaves the condition as it is.
func ProvisioningCondition(ready bool, desired int32, placed Placement, planned bool) *metav1.Condition {
	switch {
	case !ready:
		return &metav1.Condition{Type: ConditionProvisioning, Status: metav1.ConditionFalse, Reason: ReasonNotReadyForProvisioning, Message: "Buffer is not ReadyForProvisioning"}
	case desired == 0:
		return &metav1.Condition{Type: ConditionProvisioning, Status: metav1.ConditionFalse, Reason: ReasonBufferEmpty, Message: "Buffer has zero desired replicas"}
	case !planned:
		return nil
	case placed.New > 0 || placed.Failed > 0:
		return &metav1.Condition{Type: ConditionProvisioning, Status: metav1.ConditionFalse, Reason: ReasonRequiresNewCapacity,
			Message: fmt.Sprintf("%d/%d virtual pods required new capacity, %d failed", placed.New, desired, placed.Failed)}
	case int32(placed.Existing) == desired:
		return &metav1.Condition{Type: ConditionProvisioning, Status: metav1.ConditionTrue, Reason: ReasonFitsExistingCapacity,
			Message: fmt.Sprintf("All %d virtual pods fit on existing capacity", desired)}
	}
	return nil
}

// Cache holds every ready buffer's virtual pods, for the provisioner and
// disruption to plan with, and where the last plan put them, for the buffers'
// status.
type Cache struct {
	mu      sync.RWMutex
	pods    map[string][]*corev1.Pod
	placed  map[string]Placement
	planned bool
	// resolved are the buffers Set has been called for, with pods or none.
	resolved sets.Set[string]
}

// NewCache makes an empty cache.
func NewCache() *Cache {
	return &Cache{pods: map[string][]*corev1.Pod{}, placed: map[string]Placement{}, resolved: sets.New[string]()}
}

// Set replaces the buffer's virtual pods; none removes it.
func (c *Cache) Set(key string, pods []*corev1.Pod) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.resolved.Insert(key)
	if len(pods) == 0 {
		delete(c.pods, key)
		return
	}
	c.pods[key] = pods
}

// Unresolved are the keys of the buffers given that Set was never called for: a
// plan made now would leave out their room, as if they did not exist.
func (c *Cache) Unresolved(keys []string) []string {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return sets.List(sets.New(keys...).Difference(c.resolved))
}

// Pods are every buffer's virtual pods, in a stable order. The pods are shared:
// the engine reads them and writes nothing.
func (c *Cache) Pods() []*corev1.Pod {
	c.mu.RLock()
	defer c.mu.RUnlock()
	keys := make([]string, 0, len(c.pods))
	for k := range c.pods {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var out []*corev1.Pod
	for _, k := range keys {
		out = append(out, c.pods[k]...)
	}
	return out
}

// Record keeps where the plan put the virtual pods.
func (c *Cache) Record(r *scheduling.Results) {
	placed := Classify(r)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.placed, c.planned = placed, true
}

// Placed is where the last plan put the buffer's pods, and whether a plan has
// counted them at all.
func (c *Cache) Placed(key string) (Placement, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	p, ok := c.placed[key]
	return p, c.planned && ok
}
