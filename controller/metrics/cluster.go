package metrics

import (
	"context"
	"runtime"
	"runtime/debug"
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
)

var nodeLabels = []string{"node_name", "nodepool", "resource_type", "instance_type", "capacity_type", "zone", "arch"}

var (
	descAllocatable    = prometheus.NewDesc("karpenter_nodes_allocatable", "Node allocatable, by resource.", nodeLabels, nil)
	descPodRequests    = prometheus.NewDesc("karpenter_nodes_total_pod_requests", "Requests of the pods (daemonsets excluded) bound to the node.", nodeLabels, nil)
	descPodLimits      = prometheus.NewDesc("karpenter_nodes_total_pod_limits", "Limits of the pods (daemonsets excluded) bound to the node.", nodeLabels, nil)
	descDaemonRequests = prometheus.NewDesc("karpenter_nodes_total_daemon_requests", "Requests of the daemonset pods bound to the node.", nodeLabels, nil)
	descDaemonLimits   = prometheus.NewDesc("karpenter_nodes_total_daemon_limits", "Limits of the daemonset pods bound to the node.", nodeLabels, nil)
	descOverhead       = prometheus.NewDesc("karpenter_nodes_system_overhead", "Capacity the node keeps for the system: capacity minus allocatable.", nodeLabels, nil)
	descPodState       = prometheus.NewDesc("karpenter_pods_state", "Pods bound or pending, by phase and where they run.",
		[]string{"name", "namespace", "owner", "node", "nodepool", "zone", "arch", "capacity_type", "instance_type", "phase"}, nil)
	descNodeCount = prometheus.NewDesc("karpenter_cluster_state_node_count", "Nodes the controller knows of.", nil, nil)
	descSynced    = prometheus.NewDesc("karpenter_cluster_state_synced", "1 when the controller's view of the cluster is read from a synced cache.", nil, nil)
	descBuildInfo = prometheus.NewDesc("karpenter_build_info", "A metric with a constant 1 labelled by the controller's version, Go version and commit.",
		[]string{"version", "goversion", "commit"}, nil)
)

var (
	descLifetime    = prometheus.NewDesc("karpenter_nodes_current_lifetime_seconds", "Node age in seconds.", []string{"node_name", "nodepool", "instance_type", "capacity_type", "zone", "arch"}, nil)
	descUtilization = prometheus.NewDesc("karpenter_cluster_utilization_percent", "Requests of the pods bound to nodes as a percentage of the nodes' allocatable, by resource.", []string{"resource_type"}, nil)
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
	podStartup prometheus.Histogram
}

func (c *ClusterCollector) init() {
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	if c.started.IsZero() {
		c.started = c.Clock.Now()
		c.running = map[types.UID]bool{}
		c.podStartup = prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "karpenter", Subsystem: "pods", Name: "startup_duration_seconds",
			Help:    "Time from a pod's creation until it is running and ready, for pods that became ready while the controller ran.",
			Buckets: prometheus.ExponentialBuckets(0.5, 2, 14),
		})
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
	ch <- prometheus.MustNewConstMetric(descBuildInfo, prometheus.GaugeValue, 1, version, runtime.Version(), commit)
	ctx := context.Background()
	var nodes corev1.NodeList
	var pods corev1.PodList
	c.mu.Lock()
	c.init()
	c.mu.Unlock()
	defer c.podStartup.Collect(ch)
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
		ch <- prometheus.MustNewConstMetric(descPodState, prometheus.GaugeValue, 1, p.Name, p.Namespace, owner(p), p.Spec.NodeName,
			label(node, dv1.LabelNodePool), label(node, dv1.LabelTopologyZone), label(node, dv1.LabelArch), label(node, dv1.LabelCapacityType),
			label(node, dv1.LabelInstanceType), string(p.Status.Phase))
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
		ch <- prometheus.MustNewConstMetric(descLifetime, prometheus.GaugeValue, now.Sub(n.CreationTimestamp.Time).Seconds(), n.Name, label(n, dv1.LabelNodePool),
			label(n, dv1.LabelInstanceType), label(n, dv1.LabelCapacityType), label(n, dv1.LabelTopologyZone), label(n, dv1.LabelArch))
		add(allocatable, n.Status.Allocatable)
		if s, ok := perNode[n.Name]; ok {
			add(requested, s.podReq)
			add(requested, s.dsReq)
		}
		values := []string{n.Name, label(n, dv1.LabelNodePool), "", label(n, dv1.LabelInstanceType), label(n, dv1.LabelCapacityType), label(n, dv1.LabelTopologyZone), label(n, dv1.LabelArch)}
		emit := func(d *prometheus.Desc, rl corev1.ResourceList) {
			for name, q := range rl {
				values[2] = string(name)
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

func buildVersion() (version, commit string) {
	version, commit = "unknown", "unknown"
	if info, ok := debug.ReadBuildInfo(); ok {
		version = info.Main.Version
		for _, s := range info.Settings {
			if s.Key == "vcs.revision" {
				commit = s.Value
			}
		}
	}
	return version, commit
}

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
