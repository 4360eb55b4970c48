package metrics

import (
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// The provisioner tells the pod metrics which pods it provisions for (Karpenter's
// karpenter_pods_provisioning_* family) and when it decided about each.

type provisioningPod struct {
	seen    time.Time
	decided bool
	// bound and started: observed once in the provisioning histograms.
	bound, started bool
}

var provisioning = struct {
	mu   sync.Mutex
	pods map[types.UID]*provisioningPod
}{pods: map[types.UID]*provisioningPod{}}

// PodSeen records that the provisioner saw a pod waiting for capacity, the first
// time only.
func PodSeen(uid types.UID, at time.Time) {
	provisioning.mu.Lock()
	defer provisioning.mu.Unlock()
	if _, ok := provisioning.pods[uid]; !ok {
		provisioning.pods[uid] = &provisioningPod{seen: at}
	}
}

// PodDecided records the provisioner's first decision about a pod (a node, a new
// NodeClaim, or none fits) in karpenter_pods_scheduling_decision_duration_seconds.
func PodDecided(uid types.UID, at time.Time) {
	provisioning.mu.Lock()
	defer provisioning.mu.Unlock()
	if p, ok := provisioning.pods[uid]; ok && !p.decided {
		p.decided = true
		PodsSchedulingDecisionDuration.Observe(at.Sub(p.seen).Seconds())
	}
}

var (
	descPodUnbound            = podGaugeDescDRA("karpenter_pods_unbound_time_seconds", "The time from pod creation until the pod is bound, for pods not bound yet.")
	descPodUnstarted          = podGaugeDesc("karpenter_pods_unstarted_time_seconds", "The time from pod creation until the pod is running, for pods not running yet.")
	descProvisioningUnbound   = podGaugeDescDRA("karpenter_pods_provisioning_unbound_time_seconds", "The time from pod creation until the pod is bound, for pods Karpenter provisions for and not bound yet.")
	descProvisioningUnstarted = podGaugeDesc("karpenter_pods_provisioning_unstarted_time_seconds", "The time from pod creation until the pod is running, for pods Karpenter provisions for and not running yet.")
	descProvisioningUndecided = podGaugeDesc("karpenter_pods_provisioning_scheduling_undecided_time_seconds", "The time from when Karpenter has seen a pod without making a scheduling decision for the pod.")
	newPodHistogram           = func(name, help string) prometheus.Histogram {
		return prometheus.NewHistogram(podHistogramOpts(name, help))
	}
	// newPodHistogramDRA is a histogram labelled, as in Karpenter v1.15, by whether
	// the pod has dynamic resource allocation claims.
	newPodHistogramDRA = func(name, help string) *prometheus.HistogramVec {
		return prometheus.NewHistogramVec(podHistogramOpts(name, help), []string{"dynamic_resources"})
	}
)

func podHistogramOpts(name, help string) prometheus.HistogramOpts {
	return prometheus.HistogramOpts{Namespace: "karpenter", Subsystem: "pods", Name: name, Help: help, Buckets: prometheus.ExponentialBuckets(0.5, 2, 14)}
}

func podGaugeDesc(name, help string) *prometheus.Desc {
	return prometheus.NewDesc(name, help, []string{"name", "namespace"}, nil)
}

func podGaugeDescDRA(name, help string) *prometheus.Desc {
	return prometheus.NewDesc(name, help, []string{"name", "namespace", "dynamic_resources"}, nil)
}

// dynamicResources is "true" when the pod asks for DRA devices (pod resource
// claims, or a container's), as Karpenter labels it.
func dynamicResources(p *corev1.Pod) string {
	has := len(p.Spec.ResourceClaims) > 0
	for _, cs := range [][]corev1.Container{p.Spec.InitContainers, p.Spec.Containers} {
		for i := range cs {
			has = has || len(cs[i].Resources.Claims) > 0
		}
	}
	return strconv.FormatBool(has)
}

// podTimes are the per-pod gauges and the once-per-pod histograms of the pods family,
// computed from the listed pods at each scrape.
type podTimes struct {
	bound, provisioningBound *prometheus.HistogramVec
	provisioningStartup      prometheus.Histogram
	// boundSeen are the pods already observed in bound.
	boundSeen map[types.UID]bool
}

func newPodTimes() *podTimes {
	t := &podTimes{
		bound:               newPodHistogramDRA("bound_duration_seconds", "The time from pod creation until the pod is bound, for pods bound while the controller ran."),
		provisioningBound:   newPodHistogramDRA("provisioning_bound_duration_seconds", "The time from pod creation until the pod is bound, for pods Karpenter provisioned for."),
		provisioningStartup: newPodHistogram("provisioning_startup_duration_seconds", "The time from pod creation until the pod is running, for pods Karpenter provisioned for."),
		boundSeen:           map[types.UID]bool{},
	}
	// The pods without DRA claims are served from the start, empty, as the
	// histograms were before they had a label.
	t.bound.WithLabelValues("false")
	t.provisioningBound.WithLabelValues("false")
	return t
}

func (t *podTimes) describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descPodUnbound, descPodUnstarted, descProvisioningUnbound, descProvisioningUnstarted, descProvisioningUndecided} {
		ch <- d
	}
	t.bound.Describe(ch)
	t.provisioningBound.Describe(ch)
	t.provisioningStartup.Describe(ch)
}

func (t *podTimes) collect(ch chan<- prometheus.Metric) {
	t.bound.Collect(ch)
	t.provisioningBound.Collect(ch)
	t.provisioningStartup.Collect(ch)
}

func conditionTime(p *corev1.Pod, kind corev1.PodConditionType) (time.Time, bool) {
	for _, c := range p.Status.Conditions {
		if c.Type == kind && c.Status == corev1.ConditionTrue {
			return c.LastTransitionTime.Time, true
		}
	}
	return time.Time{}, false
}

// observe emits the gauges of the listed pods and records, once each, the pods that
// were bound or started since started; it forgets pods that are gone.
func (t *podTimes) observe(ch chan<- prometheus.Metric, pods []corev1.Pod, now, started time.Time) {
	provisioning.mu.Lock()
	defer provisioning.mu.Unlock()
	present := make(map[types.UID]bool, len(pods))
	for i := range pods {
		p := &pods[i]
		present[p.UID] = true
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		age := now.Sub(p.CreationTimestamp.Time).Seconds()
		tracked := provisioning.pods[p.UID]
		boundAt, bound := conditionTime(p, corev1.PodScheduled)
		dra := dynamicResources(p)
		bound = bound && p.Spec.NodeName != ""
		if !bound {
			ch <- prometheus.MustNewConstMetric(descPodUnbound, prometheus.GaugeValue, age, p.Name, p.Namespace, dra)
			if tracked != nil {
				ch <- prometheus.MustNewConstMetric(descProvisioningUnbound, prometheus.GaugeValue, age, p.Name, p.Namespace, dra)
			}
		} else {
			if !t.boundSeen[p.UID] {
				t.boundSeen[p.UID] = true
				if !boundAt.Before(started) {
					t.bound.WithLabelValues(dra).Observe(boundAt.Sub(p.CreationTimestamp.Time).Seconds())
				}
			}
			if tracked != nil && !tracked.bound {
				tracked.bound = true
				t.provisioningBound.WithLabelValues(dra).Observe(boundAt.Sub(p.CreationTimestamp.Time).Seconds())
			}
		}
		if p.Status.Phase != corev1.PodRunning {
			ch <- prometheus.MustNewConstMetric(descPodUnstarted, prometheus.GaugeValue, age, p.Name, p.Namespace)
			if tracked != nil {
				ch <- prometheus.MustNewConstMetric(descProvisioningUnstarted, prometheus.GaugeValue, age, p.Name, p.Namespace)
			}
		} else if readyAt, ready := conditionTime(p, corev1.PodReady); ready && tracked != nil && !tracked.started {
			tracked.started = true
			t.provisioningStartup.Observe(readyAt.Sub(p.CreationTimestamp.Time).Seconds())
		}
		if tracked != nil && !tracked.decided {
			ch <- prometheus.MustNewConstMetric(descProvisioningUndecided, prometheus.GaugeValue, now.Sub(tracked.seen).Seconds(), p.Name, p.Namespace)
		}
	}
	for uid := range t.boundSeen {
		if !present[uid] {
			delete(t.boundSeen, uid)
		}
	}
	for uid, tracked := range provisioning.pods {
		// Pods the provisioner saw but the cache does not list yet stay; those that
		// were bound and started, or are gone after being seen, go.
		if !present[uid] && (tracked.bound || now.Sub(tracked.seen) > time.Hour) {
			delete(provisioning.pods, uid)
		}
	}
}
