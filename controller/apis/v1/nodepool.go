package v1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// NodePoolSpec says what nodes a NodePool may launch for pending pods and how they may
// be disrupted. The validation below is Karpenter's, so the same manifests are accepted
// and refused with the same messages.
//
// +kubebuilder:validation:XValidation:rule="has(self.replicas) == has(oldSelf.replicas)",message="Cannot transition NodePool between static (replicas set) and dynamic (replicas unset) provisioning modes"
// +kubebuilder:validation:XValidation:rule="!has(self.replicas) || (!has(self.limits) || size(self.limits) == 0 || (size(self.limits) == 1 && 'nodes' in self.limits))",message="only 'limits.nodes' is supported on static NodePools"
// +kubebuilder:validation:XValidation:rule="!has(self.replicas) || !has(self.weight)",message="'weight' is not supported on static NodePools"
type NodePoolSpec struct {
	// Template is what every NodeClaim launched from this NodePool starts from; the
	// scheduler narrows it further to fit the pods it launches for.
	// +required
	Template NodeClaimTemplate `json:"template"`
	// Disruption governs when nodes of this pool may be consolidated away.
	// +kubebuilder:default:={consolidateAfter: "0s"}
	// +optional
	Disruption Disruption `json:"disruption"`
	// Limits caps the total resources (cpu, memory, nodes, extended resources) of the
	// nodes this pool owns.
	// +optional
	Limits Limits `json:"limits,omitempty"`
	// Weight orders NodePools: higher weights are tried first. Unset means 0.
	// +kubebuilder:validation:Minimum:=1
	// +kubebuilder:validation:Maximum:=100
	// +optional
	Weight *int32 `json:"weight,omitempty"`
	// Replicas makes the pool static: it keeps exactly this many nodes regardless of
	// demand. Alpha in Karpenter.
	// +kubebuilder:validation:Minimum:=0
	// +optional
	Replicas *int64 `json:"replicas,omitempty"`
}

// Disruption holds the consolidation policy and the budgets that rate-limit voluntary
// disruption.
type Disruption struct {
	// ConsolidateAfter is how long a node must stay consolidatable before it is
	// consolidated, or "Never". Optional since Karpenter v1.15, defaulting to 0s.
	// +kubebuilder:validation:Pattern=`^(([0-9]+(s|m|h))+|Never)$`
	// +kubebuilder:validation:Type="string"
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:default:="0s"
	// +optional
	ConsolidateAfter NillableDuration `json:"consolidateAfter"`
	// ConsolidationPolicy is which nodes consolidation may remove: only empty ones, or
	// underutilized ones too. Balanced (Karpenter v1.15) is accepted by the CRD and
	// refused by the controller until it is implemented: the NodePool's
	// ValidationSucceeded condition says so.
	// +kubebuilder:default:="WhenEmptyOrUnderutilized"
	// +kubebuilder:validation:Enum:={WhenEmpty,WhenEmptyOrUnderutilized,Balanced}
	// +optional
	ConsolidationPolicy ConsolidationPolicy `json:"consolidationPolicy,omitempty"`
	// Budgets rate-limit voluntary disruption. The most restrictive active budget wins.
	// +kubebuilder:validation:XValidation:message="'schedule' must be set with 'duration'",rule="self.all(x, has(x.schedule) == has(x.duration))"
	// +kubebuilder:default:={{nodes: "10%"}}
	// +kubebuilder:validation:MaxItems=50
	// +optional
	Budgets []Budget `json:"budgets,omitempty"`
}

// Budget caps how many of a pool's nodes may be disrupting at once, optionally only
// during a cron window and only for some reasons.
type Budget struct {
	// Reasons limits the budget to these disruption reasons; unset means all.
	// +kubebuilder:validation:MaxItems=50
	// +optional
	Reasons []DisruptionReason `json:"reasons,omitempty"`
	// Nodes is a count ("5") or a percentage of the pool's nodes ("10%").
	// +kubebuilder:validation:Pattern:="^((100|[0-9]{1,2})%|[0-9]+)$"
	// +kubebuilder:default:="10%"
	Nodes string `json:"nodes"`
	// Schedule is a cron expression (UTC) at which the budget becomes active.
	// +kubebuilder:validation:Pattern:=`^(@(annually|yearly|monthly|weekly|daily|midnight|hourly))|((.+)\s(.+)\s(.+)\s(.+)\s(.+))$`
	// +optional
	Schedule *string `json:"schedule,omitempty"`
	// Duration is how long the budget stays active after each schedule hit; minutes and
	// hours only.
	// +kubebuilder:validation:Pattern=`^((([0-9]+(h|m))|([0-9]+h[0-9]+m))(0s)?)$`
	// +kubebuilder:validation:Type="string"
	// +optional
	Duration *metav1.Duration `json:"duration,omitempty"`
}

type ConsolidationPolicy string

const (
	ConsolidationPolicyWhenEmpty                ConsolidationPolicy = "WhenEmpty"
	ConsolidationPolicyWhenEmptyOrUnderutilized ConsolidationPolicy = "WhenEmptyOrUnderutilized"
	ConsolidationPolicyBalanced                 ConsolidationPolicy = "Balanced"
)

// DisruptionReason names why a node is disrupted. Unhealthy (Karpenter v1.15) is
// node repair's: a budget that names it paces repairs.
// +kubebuilder:validation:Enum={Underutilized,Empty,Drifted,Unhealthy}
type DisruptionReason string

const (
	DisruptionReasonUnderutilized DisruptionReason = "Underutilized"
	DisruptionReasonEmpty         DisruptionReason = "Empty"
	DisruptionReasonDrifted       DisruptionReason = "Drifted"
	DisruptionReasonUnhealthy     DisruptionReason = "Unhealthy"
)

// Limits caps a pool's resources; "nodes" counts nodes.
type Limits corev1.ResourceList

// ResourceNodes is the pseudo-resource a limit uses to count nodes.
const ResourceNodes corev1.ResourceName = "nodes"

// NodeClaimTemplate is the metadata and spec every NodeClaim of a pool starts from.
type NodeClaimTemplate struct {
	ObjectMeta `json:"metadata,omitempty"`
	// +required
	Spec NodeClaimTemplateSpec `json:"spec"`
}

// ObjectMeta is the part of object metadata a template may set.
type ObjectMeta struct {
	// Labels are applied to every node of the pool.
	// +kubebuilder:validation:MaxProperties:=100
	// +kubebuilder:validation:XValidation:message="label domain \"kubernetes.io\" is restricted",rule="self.all(x, x in [\"beta.kubernetes.io/instance-type\", \"failure-domain.beta.kubernetes.io/region\", \"beta.kubernetes.io/os\", \"beta.kubernetes.io/arch\", \"failure-domain.beta.kubernetes.io/zone\", \"topology.kubernetes.io/zone\", \"topology.kubernetes.io/region\", \"kubernetes.io/arch\", \"kubernetes.io/os\", \"node.kubernetes.io/windows-build\"] || x.find(\"^([^/]+)\").endsWith(\"node.kubernetes.io\") || x.find(\"^([^/]+)\").endsWith(\"node-restriction.kubernetes.io\") || !x.find(\"^([^/]+)\").endsWith(\"kubernetes.io\"))"
	// +kubebuilder:validation:XValidation:message="label domain \"k8s.io\" is restricted",rule="self.all(x, x.find(\"^([^/]+)\").endsWith(\"kops.k8s.io\") || !x.find(\"^([^/]+)\").endsWith(\"k8s.io\"))"
	// +kubebuilder:validation:XValidation:message="label domain \"karpenter.sh\" is restricted",rule="self.all(x, x in [\"karpenter.sh/capacity-type\", \"karpenter.sh/nodepool\"] || !x.find(\"^([^/]+)\").endsWith(\"karpenter.sh\"))"
	// +kubebuilder:validation:XValidation:message="label \"karpenter.sh/nodepool\" is restricted",rule="self.all(x, x != \"karpenter.sh/nodepool\")"
	// +kubebuilder:validation:XValidation:message="label \"kubernetes.io/hostname\" is restricted",rule="self.all(x, x != \"kubernetes.io/hostname\")"
	// +kubebuilder:validation:XValidation:message="label domain \"karpenter.k8s.aws\" is restricted",rule="self.all(x, x in [\"karpenter.k8s.aws/ec2nodeclass\", \"karpenter.k8s.aws/instance-encryption-in-transit-supported\", \"karpenter.k8s.aws/instance-category\", \"karpenter.k8s.aws/instance-hypervisor\", \"karpenter.k8s.aws/instance-family\", \"karpenter.k8s.aws/instance-generation\", \"karpenter.k8s.aws/instance-local-nvme\", \"karpenter.k8s.aws/instance-size\", \"karpenter.k8s.aws/instance-cpu\", \"karpenter.k8s.aws/instance-cpu-manufacturer\", \"karpenter.k8s.aws/instance-cpu-sustained-clock-speed-mhz\", \"karpenter.k8s.aws/instance-memory\", \"karpenter.k8s.aws/instance-ebs-bandwidth\", \"karpenter.k8s.aws/instance-network-bandwidth\", \"karpenter.k8s.aws/instance-gpu-name\", \"karpenter.k8s.aws/instance-gpu-manufacturer\", \"karpenter.k8s.aws/instance-gpu-count\", \"karpenter.k8s.aws/instance-gpu-memory\", \"karpenter.k8s.aws/instance-accelerator-name\", \"karpenter.k8s.aws/instance-accelerator-manufacturer\", \"karpenter.k8s.aws/instance-accelerator-count\"] || !x.find(\"^([^/]+)\").endsWith(\"karpenter.k8s.aws\"))"
	// +optional
	Labels map[string]string `json:"labels,omitempty"`
	// Annotations are applied to every node of the pool.
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`
}

// NodeClaimTemplateSpec is a NodeClaimSpec without resource requests.
type NodeClaimTemplateSpec struct {
	// Taints are applied to every node of the pool; pods must tolerate them.
	// +optional
	Taints []corev1.Taint `json:"taints,omitempty"`
	// StartupTaints are applied at launch and expected to be removed by a daemonset;
	// pods need not tolerate them.
	// +optional
	StartupTaints []corev1.Taint `json:"startupTaints,omitempty"`
	// Requirements constrain the nodes this pool launches (instance types, zones,
	// capacity types, architectures, custom labels).
	// +kubebuilder:validation:XValidation:message="requirements with operator 'In' must have a value defined",rule="self.all(x, x.operator == 'In' ? x.values.size() != 0 : true)"
	// +kubebuilder:validation:XValidation:message="requirements operator 'Gt', 'Lt', 'Gte', or 'Lte' must have a single positive integer value",rule="self.all(x, (x.operator == 'Gt' || x.operator == 'Lt' || x.operator == 'Gte' || x.operator == 'Lte') ? (x.values.size() == 1 && int(x.values[0]) >= 0) : true)"
	// +kubebuilder:validation:XValidation:message="requirements with 'minValues' must have at least that many values specified in the 'values' field",rule="self.all(x, (x.operator == 'In' && has(x.minValues)) ? x.values.size() >= x.minValues : true)"
	// +kubebuilder:validation:MaxItems:=100
	// +required
	Requirements []NodePoolRequirement `json:"requirements" hash:"ignore"`
	// NodeClassRef names the cloud-specific class (an EC2NodeClass) of the pool's nodes.
	// +kubebuilder:validation:XValidation:rule="self.group == oldSelf.group",message="nodeClassRef.group is immutable"
	// +kubebuilder:validation:XValidation:rule="self.kind == oldSelf.kind",message="nodeClassRef.kind is immutable"
	// +required
	NodeClassRef *NodeClassReference `json:"nodeClassRef"`
	// TerminationGracePeriod bounds how long a node may take to drain; past it, pods are
	// deleted even when a PDB or do-not-disrupt would block.
	// +kubebuilder:validation:Pattern=`^([0-9]+(s|m|h))+$`
	// +kubebuilder:validation:Type="string"
	// +optional
	TerminationGracePeriod *metav1.Duration `json:"terminationGracePeriod,omitempty"`
	// ExpireAfter is how long a node lives before it is replaced, or "Never".
	// +kubebuilder:default:="720h"
	// +kubebuilder:validation:Pattern=`^(([0-9]+(s|m|h))+|Never)$`
	// +kubebuilder:validation:Type="string"
	// +kubebuilder:validation:Schemaless
	// +optional
	ExpireAfter NillableDuration `json:"expireAfter,omitempty"`
}

// NodePoolRequirement is a NodePool's requirement: a node selector requirement whose
// key may not be one the controller owns.
type NodePoolRequirement struct {
	// Key is the label key the requirement applies to.
	// +kubebuilder:validation:MaxLength=316
	// +kubebuilder:validation:Pattern=`^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*(\/))?([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$`
	// +kubebuilder:validation:XValidation:message="label domain \"kubernetes.io\" is restricted",rule="self in [\"beta.kubernetes.io/instance-type\", \"failure-domain.beta.kubernetes.io/region\", \"beta.kubernetes.io/os\", \"beta.kubernetes.io/arch\", \"failure-domain.beta.kubernetes.io/zone\", \"topology.kubernetes.io/zone\", \"topology.kubernetes.io/region\", \"node.kubernetes.io/instance-type\", \"kubernetes.io/arch\", \"kubernetes.io/os\", \"node.kubernetes.io/windows-build\"] || self.find(\"^([^/]+)\").endsWith(\"node.kubernetes.io\") || self.find(\"^([^/]+)\").endsWith(\"node-restriction.kubernetes.io\") || !self.find(\"^([^/]+)\").endsWith(\"kubernetes.io\")"
	// +kubebuilder:validation:XValidation:message="label domain \"k8s.io\" is restricted",rule="self.find(\"^([^/]+)\").endsWith(\"kops.k8s.io\") || !self.find(\"^([^/]+)\").endsWith(\"k8s.io\")"
	// +kubebuilder:validation:XValidation:message="label domain \"karpenter.sh\" is restricted",rule="self in [\"karpenter.sh/capacity-type\", \"karpenter.sh/nodepool\"] || !self.find(\"^([^/]+)\").endsWith(\"karpenter.sh\")"
	// +kubebuilder:validation:XValidation:message="label \"karpenter.sh/nodepool\" is restricted",rule="self != \"karpenter.sh/nodepool\""
	// +kubebuilder:validation:XValidation:message="label \"kubernetes.io/hostname\" is restricted",rule="self != \"kubernetes.io/hostname\""
	// +kubebuilder:validation:XValidation:message="label domain \"karpenter.k8s.aws\" is restricted",rule="self in [\"karpenter.k8s.aws/ec2nodeclass\", \"karpenter.k8s.aws/instance-encryption-in-transit-supported\", \"karpenter.k8s.aws/instance-category\", \"karpenter.k8s.aws/instance-hypervisor\", \"karpenter.k8s.aws/instance-family\", \"karpenter.k8s.aws/instance-generation\", \"karpenter.k8s.aws/instance-local-nvme\", \"karpenter.k8s.aws/instance-size\", \"karpenter.k8s.aws/instance-cpu\", \"karpenter.k8s.aws/instance-cpu-manufacturer\", \"karpenter.k8s.aws/instance-cpu-sustained-clock-speed-mhz\", \"karpenter.k8s.aws/instance-memory\", \"karpenter.k8s.aws/instance-ebs-bandwidth\", \"karpenter.k8s.aws/instance-network-bandwidth\", \"karpenter.k8s.aws/instance-gpu-name\", \"karpenter.k8s.aws/instance-gpu-manufacturer\", \"karpenter.k8s.aws/instance-gpu-count\", \"karpenter.k8s.aws/instance-gpu-memory\", \"karpenter.k8s.aws/instance-accelerator-name\", \"karpenter.k8s.aws/instance-accelerator-manufacturer\", \"karpenter.k8s.aws/instance-accelerator-count\"] || !self.find(\"^([^/]+)\").endsWith(\"karpenter.k8s.aws\")"
	Key             string `json:"key"`
	RequirementBody `json:",inline"`
}

// RequirementBody is the operator, values and minValues of a requirement.
type RequirementBody struct {
	// Operator relates the key to the values.
	// +kubebuilder:validation:Enum:={In,NotIn,Exists,DoesNotExist,Gt,Lt,Gte,Lte}
	Operator RequirementOperator `json:"operator"`
	// Values are the values the operator applies; one integer for Gt, Lt, Gte and Lte.
	// +kubebuilder:validation:items:MaxLength=63
	// +kubebuilder:validation:items:Pattern=`^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$`
	// +listType=atomic
	// +optional
	Values []string `json:"values,omitempty"`
	// MinValues is the least number of distinct values of this key the launch must keep
	// open (instance-type flexibility).
	// +kubebuilder:validation:Minimum:=1
	// +kubebuilder:validation:Maximum:=50
	// +optional
	MinValues *int `json:"minValues,omitempty"`
}

// RequirementOperator is a node selector operator, with Karpenter's Gte and Lte.
type RequirementOperator string

const (
	OpIn           RequirementOperator = "In"
	OpNotIn        RequirementOperator = "NotIn"
	OpExists       RequirementOperator = "Exists"
	OpDoesNotExist RequirementOperator = "DoesNotExist"
	OpGt           RequirementOperator = "Gt"
	OpLt           RequirementOperator = "Lt"
	OpGte          RequirementOperator = "Gte"
	OpLte          RequirementOperator = "Lte"
)

// NodeClassReference names a node class by group, kind and name.
type NodeClassReference struct {
	// Kind of the node class, e.g. EC2NodeClass.
	// +kubebuilder:validation:XValidation:rule="self != ''",message="kind may not be empty"
	// +required
	Kind string `json:"kind"`
	// Name of the node class.
	// +kubebuilder:validation:XValidation:rule="self != ''",message="name may not be empty"
	// +required
	Name string `json:"name"`
	// Group of the node class, e.g. karpenter.k8s.aws.
	// +kubebuilder:validation:XValidation:rule="self != ''",message="group may not be empty"
	// +kubebuilder:validation:Pattern=`^[^/]*$`
	// +required
	Group string `json:"group"`
}

// NodePoolStatus is what the controller observes of a pool.
type NodePoolStatus struct {
	// Resources is the total capacity of the pool's nodes, with "nodes" their count.
	// +optional
	Resources corev1.ResourceList `json:"resources,omitempty"`
	// Nodes is the number of nodes the pool owns.
	// +optional
	Nodes *int64 `json:"nodes,omitempty"`
	// Conditions: Ready, ValidationSucceeded, NodeClassReady.
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// AllowedDisruptions is how many more of the pool's nodes may be voluntarily
	// disrupted right now for each reason, after the budgets active at this moment.
	// +optional
	AllowedDisruptions []AllowedDisruption `json:"allowedDisruptions,omitempty"`
	// NodeClassObservedGeneration is the generation of the NodeClass the pool's
	// status was last computed from (Karpenter v1.14's field).
	// +optional
	NodeClassObservedGeneration int64 `json:"nodeClassObservedGeneration,omitempty"`
}

// AllowedDisruption is the room the active budgets leave for one reason.
type AllowedDisruption struct {
	// Reason is the disruption reason the count is for.
	Reason DisruptionReason `json:"reason"`
	// Nodes is how many more of the pool's nodes may be disrupted for the reason now.
	Nodes int32 `json:"nodes"`
}

// NodePool is a set of constraints for the nodes Dovetail may launch.
// +kubebuilder:object:root=true
// +kubebuilder:storageversion
// +kubebuilder:resource:path=nodepools,scope=Cluster,categories=karpenter
// +kubebuilder:printcolumn:name="NodeClass",type="string",JSONPath=".spec.template.spec.nodeClassRef.name",description=""
// +kubebuilder:printcolumn:name="Nodes",type="string",JSONPath=".status.resources.nodes",description=""
// +kubebuilder:printcolumn:name="Ready",type="string",JSONPath=".status.conditions[?(@.type==\"Ready\")].status",description=""
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp",description=""
// +kubebuilder:printcolumn:name="Weight",type="integer",JSONPath=".spec.weight",priority=1,description=""
// +kubebuilder:printcolumn:name="CPU",type="string",JSONPath=".status.resources.cpu",priority=1,description=""
// +kubebuilder:printcolumn:name="Memory",type="string",JSONPath=".status.resources.memory",priority=1,description=""
// +kubebuilder:subresource:status
// +kubebuilder:subresource:scale:specpath=.spec.replicas,statuspath=.status.nodes
type NodePool struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec   NodePoolSpec   `json:"spec"`
	Status NodePoolStatus `json:"status,omitempty"`
}

// NodePoolList is a list of NodePools.
// +kubebuilder:object:root=true
type NodePoolList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []NodePool `json:"items"`
}
