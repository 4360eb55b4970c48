package metrics

import (
	"context"
	"runtime"
	"runtime/debug"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	resourcehelper "k8s.io/component-helpers/resource"
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

// ClusterCollector computes Karpenter's node and pod gauges when scraped, from the
// manager's cache: values are never stale and nothing is set from many places.
type ClusterCollector struct {
	Reader client.Reader
}

func (c *ClusterCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descAllocatable, descPodRequests, descPodLimits, descDaemonRequests, descDaemonLimits, descOverhead, descPodState, descNodeCount, descSynced, descBuildInfo} {
		ch <- d
	}
}

func (c *ClusterCollector) Collect(ch chan<- prometheus.Metric) {
	version, commit := buildVersion()
	ch <- prometheus.MustNewConstMetric(descBuildInfo, prometheus.GaugeValue, 1, version, runtime.Version(), commit)
	ctx := context.Background()
	var nodes corev1.NodeList
	var pods corev1.PodList
	if err := c.Reader.List(ctx, &nodes); err != nil {
		ch <- prometheus.MustNewConstMetric(descSynced, prometheus.GaugeValue, 0)
		return
	}
	if err := c.Reader.List(ctx, &pods); err != nil {
		ch <- prometheus.MustNewConstMetric(descSynced, prometheus.GaugeValue, 0)
		return
	}
	ch <- prometheus.MustNewConstMetric(descSynced, prometheus.GaugeValue, 1)
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
	for _, n := range byNode {
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
