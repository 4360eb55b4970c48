package provisioning

import (
	"fmt"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
)

// A Node that reports more allocatable than its instance has capacity is not to be
// trusted: a simulated kubelet that wrote its defaults over the real figures (kwok's
// stock stages do, racing the node's registration), or a kubelet misconfigured by
// hand. Planning on it would pile pods onto a node kube-scheduler also believes, and
// launch nothing while they wait. The engine plans such a node with what its instance
// was launched with, and the node is flagged.

// oversizedNodes counts the nodes found reporting more than their instance has.
var oversizedNodes = prometheus.NewCounterVec(prometheus.CounterOpts{
	Namespace: "dovetail", Subsystem: "nodes", Name: "allocatable_exceeds_capacity_total",
	Help: "Nodes whose reported allocatable exceeded their instance type's capacity, counted once per node; they are planned with the instance's allocatable. Labeled by nodepool.",
}, []string{"nodepool"})

func init() { crmetrics.Registry.MustRegister(oversizedNodes) }

// flagOversized records a Warning event on the node and counts it, once per node.
func (p *Provisioner) flagOversized(n *corev1.Node, nc *v1.NodeClaim, over []corev1.ResourceName) {
	p.mu.Lock()
	seen := p.oversized[n.UID]
	p.oversized[n.UID] = true
	p.mu.Unlock()
	if seen {
		return
	}
	oversizedNodes.WithLabelValues(nc.Labels[v1.LabelNodePool]).Inc()
	var parts []string
	for _, name := range over {
		reported, capacity := n.Status.Allocatable[name], nc.Status.Capacity[name]
		parts = append(parts, fmt.Sprintf("%s %s > %s", name, reported.String(), capacity.String()))
	}
	p.recorder.Eventf(n, corev1.EventTypeWarning, "AllocatableExceedsCapacity",
		"Node reports more allocatable than its instance type %s has (%s); planning it with the instance's allocatable. Something other than the kubelet wrote its status.",
		nc.Labels[v1.LabelInstanceType], strings.Join(parts, ", "))
}

// forgetOversized drops flagged nodes that are gone, so the set stays as large as the
// cluster.
func (p *Provisioner) forgetOversized(nodes []corev1.Node) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.oversized) == 0 {
		return
	}
	present := make(map[types.UID]bool, len(nodes))
	for i := range nodes {
		present[nodes[i].UID] = true
	}
	for uid := range p.oversized {
		if !present[uid] {
			delete(p.oversized, uid)
		}
	}
}
