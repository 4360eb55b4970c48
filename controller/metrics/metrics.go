// Package metrics defines the controller's Prometheus metrics, named as Karpenter names them.
package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Metrics use Karpenter's names so existing dashboards and alerts keep working.
var (
	NodeClaimsCreated = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "karpenter", Subsystem: "nodeclaims", Name: "created_total",
		Help: "NodeClaims created, by reason and nodepool.",
	}, []string{"reason", "nodepool"})
	NodeClaimsLaunched = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "karpenter", Subsystem: "nodeclaims", Name: "launched_total",
		Help: "NodeClaims launched by the cloud provider, by nodepool.",
	}, []string{"nodepool"})
	NodeClaimsRegistered = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "karpenter", Subsystem: "nodeclaims", Name: "registered_total",
		Help: "NodeClaims whose node registered, by nodepool.",
	}, []string{"nodepool"})
	NodeClaimsInitialized = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "karpenter", Subsystem: "nodeclaims", Name: "initialized_total",
		Help: "NodeClaims whose node became ready for pods, by nodepool.",
	}, []string{"nodepool"})
	NodeClaimsTerminated = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "karpenter", Subsystem: "nodeclaims", Name: "terminated_total",
		Help: "NodeClaims terminated, by reason and nodepool.",
	}, []string{"reason", "nodepool"})
	SchedulingDuration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: "karpenter", Subsystem: "provisioner", Name: "scheduling_duration_seconds",
		Help: "Time to solve one provisioning batch.", Buckets: prometheus.ExponentialBuckets(0.001, 2, 16),
	})
	PodsPending = prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: "karpenter", Subsystem: "provisioner", Name: "pending_pods",
		Help: "Pods the last provisioning batch considered.",
	})
	PodsUnschedulable = prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: "karpenter", Subsystem: "scheduler", Name: "unschedulable_pods_count",
		Help: "Pods the last provisioning batch could not place.",
	})
	NodePoolUsage = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: "karpenter", Subsystem: "nodepools", Name: "usage",
		Help: "Resources of a nodepool's nodes.",
	}, []string{"nodepool", "resource_type"})
	NodePoolLimit = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: "karpenter", Subsystem: "nodepools", Name: "limit",
		Help: "A nodepool's limits.",
	}, []string{"nodepool", "resource_type"})
	NodeClaimsDisrupted = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "karpenter", Subsystem: "nodeclaims", Name: "disrupted_total",
		Help: "NodeClaims disrupted, by reason (drifted, empty, underutilized, expired, interrupted).",
	}, []string{"reason", "nodepool", "capacity_type"})
	VoluntaryDisruptionDecisions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "karpenter", Subsystem: "voluntary_disruption", Name: "decisions_total",
		Help: "Disruption decisions carried out: delete or replace, by reason and consolidation type.",
	}, []string{"decision", "reason", "consolidation_type"})
	VoluntaryDisruptionEligibleNodes = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: "karpenter", Subsystem: "voluntary_disruption", Name: "eligible_nodes",
		Help: "Nodes a disruption reason applies to in the last pass, before budgets.",
	}, []string{"reason"})
	NodePoolAllowedDisruptions = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: "karpenter", Subsystem: "nodepools", Name: "allowed_disruptions",
		Help: "How many more of a nodepool's nodes its active budgets allow disrupting now.",
	}, []string{"nodepool", "reason"})
	InterruptionReceivedMessages = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "karpenter", Subsystem: "interruption", Name: "received_messages_total",
		Help: "Messages read from the interruption queue, by kind (malformed and unknown included).",
	}, []string{"message_type"})
	InterruptionDeletedMessages = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: "karpenter", Subsystem: "interruption", Name: "deleted_messages_total",
		Help: "Messages deleted from the interruption queue.",
	})
	InterruptionQueueDuration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: "karpenter", Subsystem: "interruption", Name: "message_queue_duration_seconds",
		Help:    "How long interruption messages waited in the queue before they were handled.",
		Buckets: prometheus.ExponentialBuckets(0.1, 2, 12),
	})
	InterruptionActions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "karpenter", Subsystem: "interruption", Name: "actions_performed_total",
		Help: "What the interruption controller did: cordon-and-drain or event-only, by message kind.",
	}, []string{"action_type", "message_type"})
)

// Node and decision timings, named as Karpenter v1 names them.
var (
	NodesCreated = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "karpenter", Subsystem: "nodes", Name: "created_total",
		Help: "Nodes that registered for a NodeClaim, by nodepool.",
	}, []string{"nodepool"})
	NodesDrained = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "karpenter", Subsystem: "nodes", Name: "drained_total",
		Help: "Nodes drained before their instance was terminated, by nodepool.",
	}, []string{"nodepool"})
	NodesTerminated = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "karpenter", Subsystem: "nodes", Name: "terminated_total",
		Help: "Nodes deleted once drained and their instance terminated, by nodepool.",
	}, []string{"nodepool"})
	NodesTerminationDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: "karpenter", Subsystem: "nodes", Name: "termination_duration_seconds",
		Help:    "Time from a NodeClaim's deletion to its Node's: the drain and the instance's termination, by nodepool.",
		Buckets: prometheus.ExponentialBuckets(1, 2, 14),
	}, []string{"nodepool"})
	NodesLifetime = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: "karpenter", Subsystem: "nodes", Name: "lifetime_duration_seconds",
		Help:    "Time from a Node's creation to its deletion, by nodepool.",
		Buckets: prometheus.ExponentialBuckets(60, 2, 14),
	}, []string{"nodepool"})
	DecisionEvaluationDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: "karpenter", Subsystem: "voluntary_disruption", Name: "decision_evaluation_duration_seconds",
		Help:    "Time to evaluate a disruption decision, by method and consolidation type.",
		Buckets: prometheus.ExponentialBuckets(0.01, 2, 12),
	}, []string{"method", "consolidation_type"})
)

// Static are the package's own collectors, registered at start.
var Static = []prometheus.Collector{NodeClaimsCreated, NodeClaimsLaunched, NodeClaimsRegistered, NodeClaimsInitialized,
	NodeClaimsTerminated, SchedulingDuration, PodsPending, PodsUnschedulable, NodePoolUsage, NodePoolLimit,
	NodeClaimsDisrupted, VoluntaryDisruptionDecisions, VoluntaryDisruptionEligibleNodes, NodePoolAllowedDisruptions,
	InterruptionReceivedMessages, InterruptionDeletedMessages, InterruptionActions, InterruptionQueueDuration,
	NodesCreated, NodesDrained, NodesTerminated, NodesTerminationDuration, NodesLifetime, DecisionEvaluationDuration}

func init() {
	crmetrics.Registry.MustRegister(Static...)
}
