package metrics

import (
	"context"
	"runtime"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	resourcehelper "k8s.io/component-helpers/resource"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	dv1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/controller/version"
)

var nodeLabels = nodeMetricLabels("resource_type")

var (
	descAllocatable    = prometheus.NewDesc("karpenter_nodes_allocatable", "Node allocatable are the resources allocatable by nodes.", nodeLabels, nil)
	descPodRequests    = prometheus.NewDesc("karpenter_nodes_total_pod_requests", "Node total pod requests are the resources requested by non-DaemonSet pods bound to nodes.", nodeLabels, nil)
	descPodLimits      = prometheus.NewDesc("karpenter_nodes_total_pod_limits", "Node total pod limits are the resources specified by non-DaemonSet pod limits.", nodeLabels, nil)
	descDaemonRequests = prometheus.NewDesc("karpenter_nodes_total_daemon_requests", "Node total daemon requests are the resource requested by DaemonSet pods bound to nodes.", nodeLabels, nil)
	descDaemonLimits   = prometheus.NewDesc("karpenter_nodes_total_daemon_limits", "Node total daemon limits are the resources specified by DaemonSet pod limits.", nodeLabels, nil)
	descOverhead       = prometheus.NewDesc("karpenter_nodes_system_overhead", "Node system daemon overhead are the resources reserved for system overhead, the difference between the node's capacity and allocatable values are reported by the status.", nodeLabels, nil)
	descPodState       = prometheus.NewDesc("karpenter_pods_state", "Pod state is the current state of pods. This metric can be used several ways as it is labeled by the pod name, namespace, owner, node, nodepool name, zone, architecture, capacity type, instance type and pod phase.",
		[]string{"name", "namespace", "owner", "node", "scheduled", "nodepool", "zone", "arch", "capacity_type", "instance_type", "phase", "ready", "managed"}, nil)
	descNodeCount = prometheus.NewDesc("karpenter_cluster_state_node_count", "Current count of nodes in cluster state", nil, nil)
	descSynced    = prometheus.NewDesc("karpenter_cluster_state_synced", "Returns 1 if cluster state is synced and 0 otherwise. Synced checks that nodeclaims and nodes that are stored in the APIServer have the same representation as Karpenter's cluster state", nil, nil)
	descBuildInfo = prometheus.NewDesc("karpenter_build_info", "A metric with a constant '1' value labeled by version from which karpenter was built.",
		[]string{"version", "goversion", "goarch", "commit"}, nil)
)

var (
	descLifetime    = prometheus.NewDesc("karpenter_nodes_current_lifetime_seconds", "Node age in seconds", nodeMetricLabels(), nil)
	descUtilization = prometheus.NewDesc("karpenter_cluster_utilization_percent", "Utilization of allocatable resources by pod requests", []string{"resource_type"}, nil)
)

var descUnsyncedTime = prometheus.NewDesc("karpenter_cluster_state_unsynced_time_seconds", "How long the controller's view of the cluster has not been readable; 0 while it is.", nil, nil)

// ClusterCollector computes Karpenter's node and pod gauges when scraped, from the
// manager's cache: values are never stale and nothing is set from many places.
type ClusterCollector struct {
	Reader client.Reader
	// Clock defaults to the real one.
	Clock clock.PassiveClock

	mu         sync.Mutex
	started    time.Time
	lastSynced time.Time
	// running are the pods already counted in podStartup, so each is counted once.
	running    map[types.UID]bool
	podStartup prometheus.Summary
	podTimes   *podTimes
}

func (c *ClusterCollector) init() {
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	if c.started.IsZero() {
		c.started = c.Clock.Now()
		c.running = map[types.UID]bool{}
		// A summary, as Karpenter's is: dashboards read its quantiles.
		c.podStartup = prometheus.NewSummary(prometheus.SummaryOpts{
			Namespace: "karpenter", Subsystem: "pods", Name: "startup_duration_seconds",
			Help:       "The time from pod creation until the pod is running, for pods that became ready while the controller ran.",
			Objectives: summaryObjectives,
		})
		c.podTimes = newPodTimes()
	}
}

func (c *ClusterCollector) Describe(ch chan<- *prometheus.Desc) {
	c.mu.Lock()
	c.init()
	c.mu.Unlock()
	for _, d := range []*prometheus.Desc{descAllocatable, descPodRequests, descPodLimits, descDaemonRequests, descDaemonLimits, descOverhead, descPodState, descNodeCount, descSynced, descUnsyncedTime, descBuildInfo, descLifetime, descUtilization} {
		ch <- d
	}
	c.podStartup.Describe(ch)
	c.podTimes.describe(ch)
}

// synced records whether the cache could be read, and reports how long it could not.
func (c *ClusterCollector) synced(ch chan<- prometheus.Metric, ok bool) {
	c.mu.Lock()
	now := c.Clock.Now()
	unsynced := 0.0
	if ok {
		c.lastSynced = now
	} else {
		since := c.lastSynced
		if since.IsZero() {
			since = c.started
		}
		unsynced = now.Sub(since).Seconds()
	}
	c.mu.Unlock()
	value := 0.0
	if ok {
		value = 1
	}
	ch <- prometheus.MustNewConstMetric(descSynced, prometheus.GaugeValue, value)
	ch <- prometheus.MustNewConstMetric(descUnsyncedTime, prometheus.GaugeValue, unsynced)
}

// observeStartups counts, once each, the pods that became ready since the collector
// started: startup is measured from creation to the Ready condition's transition.
func (c *ClusterCollector) observeStartups(pods []corev1.Pod) {
	c.mu.Lock()
	defer c.mu.Unlock()
	present := make(map[types.UID]bool, len(pods))
	for i := range pods {
		p := &pods[i]
		present[p.UID] = true
		if c.running[p.UID] || p.Status.Phase != corev1.PodRunning {
			continue
		}
		for _, cond := range p.Status.Conditions {
			if cond.Type != corev1.PodReady || cond.Status != corev1.ConditionTrue {
				continue
			}
			c.running[p.UID] = true
			if !cond.LastTransitionTime.Time.Before(c.started) {
				c.podStartup.Observe(cond.LastTransitionTime.Sub(p.CreationTimestamp.Time).Seconds())
			}
		}
	}
	for uid := range c.running {
		if !present[uid] {
			delete(c.running, uid)
		}
	}
}

func (c *ClusterCollector) Collect(ch chan<- prometheus.Metric) {
	version, commit := buildVersion()
	ch <- prometheus.MustNewConstMetric(descBuildInfo, prometheus.GaugeValue, 1, version, runtime.Version(), runtime.GOARCH, commit)
	ctx := context.Background()
	var nodes corev1.NodeList
	var pods corev1.PodList
	c.mu.Lock()
	c.init()
	c.mu.Unlock()
	defer c.podStartup.Collect(ch)
	defer c.podTimes.collect(ch)
	if err := c.Reader.List(ctx, &nodes); err != nil {
		c.synced(ch, false)
		return
	}
	if err := c.Reader.List(ctx, &pods); err != nil {
		c.synced(ch, false)
		return
	}
	c.synced(ch, true)
	c.observeStartups(pods.Items)
	c.podTimes.observe(ch, pods.Items, c.Clock.Now(), c.started)
	ch <- prometheus.MustNewConstMetric(descNodeCount, prometheus.GaugeValue, float64(len(nodes.Items)))
	byNode := map[string]*corev1.Node{}
	for i := range nodes.Items {
		byNode[nodes.Items[i].Name] = &nodes.Items[i]
	}
	type sums struct{ podReq, podLim, dsReq, dsLim corev1.ResourceList }
	perNode := map[string]*sums{}
	for i := range pods.Items {
		p := &pods.Items[i]
		node := byNode[p.Spec.NodeName]
		_, scheduled := conditionTime(p, corev1.PodScheduled)
		_, ready := conditionTime(p, corev1.PodReady)
		ch <- prometheus.MustNewConstMetric(descPodState, prometheus.GaugeValue, 1, p.Name, p.Namespace, owner(p), p.Spec.NodeName, boolString(scheduled),
			label(node, dv1.LabelNodePool), label(node, dv1.LabelTopologyZone), label(node, dv1.LabelArch), label(node, dv1.LabelCapacityType),
			label(node, dv1.LabelInstanceType), string(p.Status.Phase), boolString(ready), managed(node))
		if node == nil || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		s, ok := perNode[node.Name]
		if !ok {
			s = &sums{corev1.ResourceList{}, corev1.ResourceList{}, corev1.ResourceList{}, corev1.ResourceList{}}
			perNode[node.Name] = s
		}
		req, lim := resourcehelper.PodRequests(p, resourcehelper.PodResourcesOptions{}), resourcehelper.PodLimits(p, resourcehelper.PodResourcesOptions{})
		if owner(p) == "DaemonSet" {
			add(s.dsReq, req)
			add(s.dsLim, lim)
		} else {
			add(s.podReq, req)
			add(s.podLim, lim)
		}
	}
	now := c.Clock.Now()
	allocatable, requested := corev1.ResourceList{}, corev1.ResourceList{}
	for _, n := range byNode {
		ch <- prometheus.MustNewConstMetric(descLifetime, prometheus.GaugeValue, now.Sub(n.CreationTimestamp.Time).Seconds(), nodeMetricValues(n)...)
		add(allocatable, n.Status.Allocatable)
		if s, ok := perNode[n.Name]; ok {
			add(requested, s.podReq)
			add(requested, s.dsReq)
		}
		values := nodeMetricValues(n, "")
		emit := func(d *prometheus.Desc, rl corev1.ResourceList) {
			for name, q := range rl {
				values[len(values)-1] = string(name)
				ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, q.AsApproximateFloat64(), values...)
			}
		}
		emit(descAllocatable, n.Status.Allocatable)
		overhead := corev1.ResourceList{}
		for name, capacity := range n.Status.Capacity {
			if alloc, ok := n.Status.Allocatable[name]; ok {
				capacity.Sub(alloc)
				overhead[name] = capacity
			}
		}
		emit(descOverhead, overhead)
		s, ok := perNode[n.Name]
		if !ok {
			s = &sums{corev1.ResourceList{}, corev1.ResourceList{}, corev1.ResourceList{}, corev1.ResourceList{}}
		}
		for _, rl := range []corev1.ResourceList{s.podReq, s.podLim, s.dsReq, s.dsLim} {
			// cpu and memory always have a series, zero when nothing asks for them, so
			// sums and ratios over nodes do not lose the nodes nothing runs on.
			for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
				if _, set := rl[name]; !set {
					rl[name] = resource.Quantity{}
				}
			}
		}
		emit(descPodRequests, s.podReq)
		emit(descPodLimits, s.podLim)
		emit(descDaemonRequests, s.dsReq)
		emit(descDaemonLimits, s.dsLim)
	}
	for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourcePods} {
		total := allocatable[name]
		if total.IsZero() {
			continue
		}
		used := requested[name]
		if name == corev1.ResourcePods {
			used = *resource.NewQuantity(int64(countBound(pods.Items)), resource.DecimalSI)
		}
		ch <- prometheus.MustNewConstMetric(descUtilization, prometheus.GaugeValue, 100*used.AsApproximateFloat64()/total.AsApproximateFloat64(), string(name))
	}
}

// countBound counts the pods bound to a node that still hold its resources.
func countBound(pods []corev1.Pod) int {
	n := 0
	for i := range pods {
		if pods[i].Spec.NodeName != "" && pods[i].Status.Phase != corev1.PodSucceeded && pods[i].Status.Phase != corev1.PodFailed {
			n++
		}
	}
	return n
}

func add(into, from corev1.ResourceList) {
	for name, q := range from {
		sum := into[name]
		sum.Add(q)
		into[name] = sum
	}
}

func label(n *corev1.Node, key string) string {
	if n == nil {
		return ""
	}
	return n.Labels[key]
}

// owner is the kind of the pod's controller, "" for a bare pod.
func owner(p *corev1.Pod) string {
	if o := metav1.GetControllerOf(p); o != nil {
		return o.Kind
	}
	return ""
}

func buildVersion() (string, string) { return version.Get(), version.Commit() }

var registered *ClusterCollector

// RegisterCluster serves the cluster gauges from reader, replacing the reader of an
// earlier controller run in this process (tests start several).
func RegisterCluster(reader client.Reader) {
	if registered != nil {
		crmetrics.Registry.Unregister(registered)
	}
	registered = &ClusterCollector{Reader: reader}
	crmetrics.Registry.MustRegister(registered)
}
