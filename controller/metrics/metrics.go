// Package metrics defines the controller's Prometheus metrics, named as Karpenter names them.
package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Metrics use Karpenter v1.15's names, types and labels, so existing dashboards and
// alerts keep working (TestMetricsAreKarpenters checks them against its reference).
var (
	NodeClaimsCreated = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "karpenter", Subsystem: "nodeclaims", Name: "created_total",
		Help: "Number of nodeclaims created in total by Karpenter. Labeled by reason the nodeclaim was created, the owning nodepool, and if min values was relaxed for this nodeclaim.",
	}, []string{"reason", "nodepool", "min_values_relaxed"})
	NodeClaimsTerminated = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "karpenter", Subsystem: "nodeclaims", Name: "terminated_total",
		Help: "Number of nodeclaims terminated in total by Karpenter. Labeled by the owning nodepool, capacity type and zone.",
	}, []string{"nodepool", "capacity_type", "zone"})
	NodeClaimsTerminationDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: "karpenter", Subsystem: "nodeclaims", Name: "termination_duration_seconds",
		Help:    "Duration of NodeClaim termination in seconds: from its deletion until its finalizer is removed.",
		Buckets: prometheus.ExponentialBuckets(1, 2, 14),
	}, []string{"nodepool"})
	NodeClaimsInstanceTerminationDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: "karpenter", Subsystem: "nodeclaims", Name: "instance_termination_duration_seconds",
		Help:    "Duration of CloudProvider Instance termination in seconds: from the first termination call until the instance is gone.",
		Buckets: prometheus.ExponentialBuckets(0.5, 2, 14),
	}, []string{"nodepool"})
	SchedulingDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: "karpenter", Subsystem: "scheduler", Name: "scheduling_duration_seconds",
		Help: "Duration of scheduling simulations used for deprovisioning and provisioning in seconds.", Buckets: prometheus.ExponentialBuckets(0.001, 2, 16),
	}, []string{"controller"})
	SchedulerQueueDepth = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: "karpenter", Subsystem: "scheduler", Name: "queue_depth",
		Help: "The number of pods currently waiting to be scheduled, while a simulation runs.",
	}, []string{"controller", "scheduling_id"})
	PodsUnschedulable = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: "karpenter", Subsystem: "scheduler", Name: "unschedulable_pods_count",
		Help: "The number of unschedulable Pods in the last simulation.",
	}, []string{"controller"})
	SchedulerIgnoredPods = prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: "karpenter", Subsystem: "scheduler", Name: "ignored_pods_count",
		Help: "Number of pods ignored during scheduling by Karpenter: pending pods no NodePool's requirements, limits or volumes allow (refused before the simulation).",
	})
	PendingPodsByEffectiveZone = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: "karpenter", Subsystem: "scheduler", Name: "pending_pods_by_effective_zone_count",
		Help: "The number of pending pods in the last simulation by the zone their placement puts them in; empty for pods not placed.",
	}, []string{"controller", "zone"})
	NodePoolUsage = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: "karpenter", Subsystem: "nodepools", Name: "usage",
		Help: "The amount of resources that have been provisioned for a nodepool. Labeled by nodepool name and resource type.",
	}, []string{"nodepool", "resource_type"})
	NodePoolLimit = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: "karpenter", Subsystem: "nodepools", Name: "limit",
		Help: "Limits specified on the nodepool that restrict the quantity of resources provisioned. Labeled by nodepool name and resource type.",
	}, []string{"nodepool", "resource_type"})
	NodePoolCost = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: "karpenter", Subsystem: "nodepools", Name: "cost_total",
		Help: "The hourly price of a nodepool's nodes at their offerings' prices. Labeled by nodepool.",
	}, []string{"nodepool"})
	NodePoolCostTrackerErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "karpenter", Subsystem: "nodepools", Name: "cost_tracker_errors_total",
		Help: "Nodes whose price could not be found while a nodepool's cost was summed. Labeled by nodepool.",
	}, []string{"nodepool"})
	NodePoolNodesConsumingBudgets = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: "karpenter", Subsystem: "nodepools", Name: "nodes_consuming_budgets",
		Help: "Nodes of a nodepool being disrupted now, which its disruption budgets count. Labeled by nodepool and reason.",
	}, []string{"nodepool", "reason"})
	NodeClaimsUnhealthyDisrupted = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "karpenter", Subsystem: "nodeclaims", Name: "unhealthy_disrupted_total",
		Help: "Number of unhealthy nodeclaims disrupted in total by Karpenter. Labeled by condition on the node was disrupted, the owning nodepool, and the image ID.",
	}, []string{"condition", "nodepool", "capacity_type", "image_id", "termination_mode"})
	NodeClaimsDisrupted = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "karpenter", Subsystem: "nodeclaims", Name: "disrupted_total",
		Help: "Number of nodeclaims disrupted in total by Karpenter. Labeled by reason the nodeclaim was disrupted, the owning nodepool, the capacity type, the consolidation policy, and the termination mode.",
	}, []string{"reason", "nodepool", "capacity_type", "consolidation_policy", "termination_mode"})
	PodsDisruptionInitiated = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "karpenter", Subsystem: "pods", Name: "disruption_initiated_total",
		Help: "Number of pod disruptions initiated in total by Karpenter, incremented by the reschedulable pod count whenever the underlying nodeclaim is disrupted. Labeled by reason the nodeclaim was disrupted, the owning nodepool, the capacity type, the consolidation policy, and the termination mode. Pods owned by DaemonSets and mirror pods are excluded.",
	}, []string{"reason", "nodepool", "capacity_type", "consolidation_policy", "termination_mode"})
	VoluntaryDisruptionDecisions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "karpenter", Subsystem: "voluntary_disruption", Name: "decisions_total",
		Help: "Number of disruption decisions performed. Labeled by disruption decision, reason, and consolidation type.",
	}, []string{"decision", "reason", "consolidation_type"})
	VoluntaryDisruptionDecisionsByNodePool = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "karpenter", Subsystem: "voluntary_disruption", Name: "decisions_by_nodepool_total",
		Help: "Number of disruption decisions performed, one per nodepool a decision disrupts. Labeled by nodepool, disruption decision, reason, and consolidation type.",
	}, []string{"nodepool", "decision", "reason", "consolidation_type"})
	NodesReboots = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "karpenter", Subsystem: "nodes", Name: "reboots_total",
		Help: "Number of node reboots for repair that reached a terminal state. Labeled by result.",
	}, []string{"result"})
	NodesRebootDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: "karpenter", Subsystem: "nodes", Name: "reboot_duration_seconds",
		Help:    "Time from a reboot's request to its terminal state. Labeled by result.",
		Buckets: prometheus.ExponentialBuckets(10, 2, 8),
	}, []string{"result"})
	NodesRebootRecoveryDuration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: "karpenter", Subsystem: "nodes", Name: "reboot_recovery_duration_seconds",
		Help:    "Time from a reboot's issue to the node's recovery, for reboots that succeeded.",
		Buckets: prometheus.ExponentialBuckets(10, 2, 8),
	})
	VoluntaryDisruptionTerminateFirstDecisions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "karpenter", Subsystem: "voluntary_disruption", Name: "terminate_first_decisions_total",
		Help: "Number of terminate-first disruption decisions performed. Labeled by nodepool name, reason, and why the replacement couldn't be staged first.",
	}, []string{"nodepool", "reason", "terminate_first_reason"})
	VoluntaryDisruptionQueueFailures = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "karpenter", Subsystem: "voluntary_disruption", Name: "queue_failures_total",
		Help: "The number of times that an enqueued disruption decision failed. Labeled by disruption decision, reason, and consolidation type.",
	}, []string{"decision", "reason", "consolidation_type"})
	VoluntaryDisruptionFailedValidations = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "karpenter", Subsystem: "voluntary_disruption", Name: "failed_validations_total",
		Help: "Number of candidates that were selected for disruption but failed validation. Labeled by consolidation type.",
	}, []string{"consolidation_type"})
	VoluntaryDisruptionConsolidationTimeouts = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "karpenter", Subsystem: "voluntary_disruption", Name: "consolidation_timeouts_total",
		Help: "Number of times the Consolidation algorithm has reached a timeout. Labeled by consolidation type. Dovetail's consolidation weighs every candidate in one pass with no timeout, so it stays 0.",
	}, []string{"consolidation_type"})
	ConsolidationScore = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: "karpenter", Name: "consolidation_score",
		Help:    "Score of balanced consolidation moves. Labeled by decision, NodePool, and policy.",
		Buckets: []float64{0.1, 0.25, 0.33, 0.5, 1.0, 2.0, 5.0, 10.0},
	}, []string{"decision", "nodepool", "policy"})
	ConsolidationMoves = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "karpenter", Name: "consolidation_moves_total",
		Help: "Number of balanced consolidation moves. Labeled by decision, NodePool, and policy.",
	}, []string{"decision", "nodepool", "policy"})
	VoluntaryDisruptionEligibleNodes = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: "karpenter", Subsystem: "voluntary_disruption", Name: "eligible_nodes",
		Help: "Number of nodes eligible for disruption by Karpenter. Labeled by disruption reason.",
	}, []string{"reason"})
	NodePoolAllowedDisruptions = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: "karpenter", Subsystem: "nodepools", Name: "allowed_disruptions",
		Help: "The number of nodes for a given NodePool that can be concurrently disrupting at a point in time. Labeled by NodePool.",
	}, []string{"nodepool", "reason"})
	InterruptionReceivedMessages = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "karpenter", Subsystem: "interruption", Name: "received_messages_total",
		Help: "Count of messages received from the SQS queue. Broken down by message type (malformed and unknown included).",
	}, []string{"message_type"})
	InterruptionDeletedMessages = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: "karpenter", Subsystem: "interruption", Name: "deleted_messages_total",
		Help: "Count of messages deleted from the SQS queue.",
	})
	InterruptionInstanceStatusUnhealthy = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "karpenter", Subsystem: "interruption", Name: "instance_status_unhealthy_total",
		Help: "Count of unhealthy instances of the cluster EC2 instance status reported, once per instance and category (InstanceStatus, SystemStatus, EventStatus) while it stays unhealthy.",
	}, []string{"category"})
	InterruptionQueueDuration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: "karpenter", Subsystem: "interruption", Name: "message_queue_duration_seconds",
		Help:    "Amount of time an interruption message is on the queue before it is processed by karpenter.",
		Buckets: prometheus.ExponentialBuckets(0.1, 2, 12),
	})
	PodsEvictionRequests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "karpenter", Subsystem: "pods", Name: "eviction_requests_total",
		Help: "The number of pod eviction requests made, by the HTTP status code the API server answered.",
	}, []string{"code"})
	PodsDrained = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "karpenter", Subsystem: "pods", Name: "drained_total",
		Help: "Number of pods drained during node termination. Labeled by the reason the node was disrupted.",
	}, []string{"reason"})
	PodsSchedulingDecisionDuration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: "karpenter", Subsystem: "pods", Name: "scheduling_decision_duration_seconds",
		Help:    "The time from when Karpenter first sees a pod until it decides where the pod goes (a node, a new NodeClaim, or nowhere).",
		Buckets: prometheus.ExponentialBuckets(0.01, 2, 14),
	})
)

// Node timings, named as Karpenter v1 names them.
var (
	NodesCreated = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "karpenter", Subsystem: "nodes", Name: "created_total",
		Help: "Number of nodes created in total by Karpenter. Labeled by owning nodepool and zone.",
	}, []string{"nodepool", "zone"})
	NodesDrained = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "karpenter", Subsystem: "nodes", Name: "drained_total",
		Help: "Number of nodes drained in total by Karpenter. Labeled by owning nodepool.",
	}, []string{"nodepool"})
	NodesTerminated = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "karpenter", Subsystem: "nodes", Name: "terminated_total",
		Help: "Number of nodes terminated in total by Karpenter. Labeled by owning nodepool and zone.",
	}, []string{"nodepool", "zone"})
	// A summary, as Karpenter's is: dashboards read its quantiles.
	NodesTerminationDuration = prometheus.NewSummaryVec(prometheus.SummaryOpts{
		Namespace: "karpenter", Subsystem: "nodes", Name: "termination_duration_seconds",
		Help:       "The time taken between a node's deletion request and the removal of its finalizer",
		Objectives: summaryObjectives,
	}, []string{"nodepool"})
	NodesLifetime = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: "karpenter", Subsystem: "nodes", Name: "lifetime_duration_seconds",
		Help:    "The lifetime duration of the nodes since creation.",
		Buckets: prometheus.ExponentialBuckets(60, 2, 14),
	}, []string{"nodepool"})
	DecisionEvaluationDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: "karpenter", Subsystem: "voluntary_disruption", Name: "decision_evaluation_duration_seconds",
		Help:    "Duration of the disruption decision evaluation process in seconds. Labeled by reason and consolidation type.",
		Buckets: prometheus.ExponentialBuckets(0.01, 2, 12),
	}, []string{"reason", "consolidation_type"})
)

// summaryObjectives are the quantiles Karpenter's summaries keep.
var summaryObjectives = map[float64]float64{0: 0.01, 0.5: 0.01, 0.9: 0.01, 0.99: 0.01, 1: 0.01}

// Static are the package's own collectors, registered at start.
var Static = []prometheus.Collector{NodeClaimsCreated, NodeClaimsTerminated, NodeClaimsTerminationDuration, NodeClaimsInstanceTerminationDuration,
	SchedulingDuration, SchedulerQueueDepth, PodsUnschedulable, SchedulerIgnoredPods, PendingPodsByEffectiveZone, schedulerUnfinishedWork,
	NodePoolUsage, NodePoolLimit, NodePoolCost, NodePoolCostTrackerErrors, NodePoolNodesConsumingBudgets,
	NodeClaimsDisrupted, PodsDisruptionInitiated, NodeClaimsUnhealthyDisrupted, VoluntaryDisruptionDecisions, VoluntaryDisruptionDecisionsByNodePool, VoluntaryDisruptionTerminateFirstDecisions, NodesReboots, NodesRebootDuration, NodesRebootRecoveryDuration, VoluntaryDisruptionQueueFailures,
	VoluntaryDisruptionFailedValidations, VoluntaryDisruptionConsolidationTimeouts, VoluntaryDisruptionEligibleNodes, NodePoolAllowedDisruptions, ConsolidationScore, ConsolidationMoves,
	InterruptionReceivedMessages, InterruptionDeletedMessages, InterruptionInstanceStatusUnhealthy, InterruptionQueueDuration, PodsEvictionRequests, PodsDrained, PodsSchedulingDecisionDuration,
	NodesCreated, NodesDrained, NodesTerminated, NodesTerminationDuration, NodesLifetime, DecisionEvaluationDuration}

func init() {
	crmetrics.Registry.MustRegister(Static...)
	// Series that exist from the start, as Karpenter's do, so rate() and alerts see 0.
	for _, t := range []string{"single", "multi"} {
		VoluntaryDisruptionConsolidationTimeouts.WithLabelValues(t)
	}
}
