package v1

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// NodeClaimSpec is a request for one node: the scheduler's narrowed requirements and
// the resources the pods it was launched for need.
type NodeClaimSpec struct {
	// Taints are applied to the node.
	// +optional
	Taints []corev1.Taint `json:"taints,omitempty"`
	// StartupTaints are applied at launch and removed by a daemonset once it is ready.
	// +optional
	StartupTaints []corev1.Taint `json:"startupTaints,omitempty"`
	// Requirements the launched instance must satisfy.
	// +kubebuilder:validation:XValidation:message="requirements with operator 'In' must have a value defined",rule="self.all(x, x.operator == 'In' ? x.values.size() != 0 : true)"
	// +kubebuilder:validation:XValidation:message="requirements operator 'Gt', 'Lt', 'Gte', or 'Lte' must have a single positive integer value",rule="self.all(x, (x.operator == 'Gt' || x.operator == 'Lt' || x.operator == 'Gte' || x.operator == 'Lte') ? (x.values.size() == 1 && int(x.values[0]) >= 0) : true)"
	// +kubebuilder:validation:XValidation:message="requirements with 'minValues' must have at least that many values specified in the 'values' field",rule="self.all(x, (x.operator == 'In' && has(x.minValues)) ? x.values.size() >= x.minValues : true)"
	// +kubebuilder:validation:MaxItems:=100
	// +required
	Requirements []NodeSelectorRequirementWithMinValues `json:"requirements"`
	// Resources the pods bound for this node request.
	// +optional
	Resources ResourceRequirements `json:"resources,omitempty"`
	// NodeClassRef names the node class to launch with.
	// +required
	NodeClassRef *NodeClassReference `json:"nodeClassRef"`
	// TerminationGracePeriod, copied from the NodePool.
	// +kubebuilder:validation:Pattern=`^([0-9]+(s|m|h))+$`
	// +kubebuilder:validation:Type="string"
	// +optional
	TerminationGracePeriod *metav1.Duration `json:"terminationGracePeriod,omitempty"`
	// ExpireAfter, copied from the NodePool.
	// +kubebuilder:default:="720h"
	// +kubebuilder:validation:Pattern=`^(([0-9]+(s|m|h))+|Never)$`
	// +kubebuilder:validation:Type="string"
	// +kubebuilder:validation:Schemaless
	// +optional
	ExpireAfter NillableDuration `json:"expireAfter,omitempty"`
}

// NodeSelectorRequirementWithMinValues is a node selector requirement with Karpenter's
// minValues and its Gte/Lte operators.
type NodeSelectorRequirementWithMinValues struct {
	// Key is the label key the requirement applies to.
	// +kubebuilder:validation:MaxLength=316
	// +kubebuilder:validation:Pattern=`^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*(\/))?([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$`
	Key             string `json:"key"`
	RequirementBody `json:",inline"`
}

// ResourceRequirements are the resources a NodeClaim's pods request.
type ResourceRequirements struct {
	// +optional
	Requests corev1.ResourceList `json:"requests,omitempty"`
}

// NodeClaimStatus is what the controller observes of a launched node.
type NodeClaimStatus struct {
	// NodeName is the name of the Node that registered for this claim.
	// +optional
	NodeName string `json:"nodeName,omitempty"`
	// ProviderID is the cloud provider's id of the instance.
	// +optional
	ProviderID string `json:"providerID,omitempty"`
	// ImageID is the image the instance booted.
	// +optional
	ImageID string `json:"imageID,omitempty"`
	// Capacity of the instance.
	// +optional
	Capacity corev1.ResourceList `json:"capacity,omitempty"`
	// Allocatable is capacity less reservations and overhead.
	// +optional
	Allocatable corev1.ResourceList `json:"allocatable,omitempty"`
	// Conditions: Launched, Registered, Initialized, Ready, Drifted, Empty, ...
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// LastPodEventTime is when a pod last bound to or left the node.
	// +optional
	LastPodEventTime metav1.Time `json:"lastPodEventTime,omitempty"`
}

// NodeClaim condition types.
const (
	ConditionTypeLaunched            = "Launched"
	ConditionTypeRegistered          = "Registered"
	ConditionTypeInitialized         = "Initialized"
	ConditionTypeReady               = "Ready"
	ConditionTypeDrifted             = "Drifted"
	ConditionTypeEmpty               = "Empty"
	ConditionTypeConsolidatable      = "Consolidatable"
	ConditionTypeDisruptionReason    = "DisruptionReason"
	ConditionTypeInstanceTerminating = "InstanceTerminating"
	ConditionTypeValidationSucceeded = "ValidationSucceeded"
	ConditionTypeNodeClassReady      = "NodeClassReady"
	// ConditionTypeRebooting is True while repair reboots the node in place
	// (Karpenter v1.15's RebootForRepair), its reason the phase; False once the
	// reboot ended, when it did.
	ConditionTypeRebooting = "Rebooting"
)

// The Rebooting condition's reasons, as Karpenter v1.15 names them.
const (
	RebootRequested = "RebootRequested"
	RebootIssued    = "RebootIssued"
	RebootSucceeded = "RebootSucceeded"
	RebootFailed    = "RebootFailed"
)

// Rebooting reports whether repair is rebooting the claim's node.
func (nc *NodeClaim) Rebooting() bool {
	return meta.IsStatusConditionTrue(nc.Status.Conditions, ConditionTypeRebooting)
}

// NodeClaim is one node's lifecycle: launched, registered, initialized, terminated.
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=nodeclaims,scope=Cluster,categories=karpenter
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Type",type="string",JSONPath=".metadata.labels.node\\.kubernetes\\.io/instance-type",description=""
// +kubebuilder:printcolumn:name="Capacity",type="string",JSONPath=".metadata.labels.karpenter\\.sh/capacity-type",description=""
// +kubebuilder:printcolumn:name="Zone",type="string",JSONPath=".metadata.labels.topology\\.kubernetes\\.io/zone",description=""
// +kubebuilder:printcolumn:name="Node",type="string",JSONPath=".status.nodeName",description=""
// +kubebuilder:printcolumn:name="Ready",type="string",JSONPath=".status.conditions[?(@.type==\"Ready\")].status",description=""
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp",description=""
// +kubebuilder:printcolumn:name="ID",type="string",JSONPath=".status.providerID",priority=1,description=""
// +kubebuilder:printcolumn:name="NodePool",type="string",JSONPath=".metadata.labels.karpenter\\.sh/nodepool",priority=1,description=""
// +kubebuilder:printcolumn:name="NodeClass",type="string",JSONPath=".spec.nodeClassRef.name",priority=1,description=""
type NodeClaim struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec is immutable"
	// +required
	Spec   NodeClaimSpec   `json:"spec"`
	Status NodeClaimStatus `json:"status,omitempty"`
}

// NodeClaimList is a list of NodeClaims.
// +kubebuilder:object:root=true
type NodeClaimList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []NodeClaim `json:"items"`
}

// SetDisruptionReason records on the claim why it is being disrupted (Drifted, Empty,
// Underutilized, Expired, Interrupted), as Karpenter's DisruptionReason condition
// does, so termination can say why it drains. It reports whether anything changed.
func (nc *NodeClaim) SetDisruptionReason(reason string, now time.Time) bool {
	return meta.SetStatusCondition(&nc.Status.Conditions, metav1.Condition{Type: ConditionTypeDisruptionReason, Status: metav1.ConditionTrue,
		Reason: reason, Message: "the node is being disrupted: " + reason, ObservedGeneration: nc.Generation, LastTransitionTime: metav1.NewTime(now)})
}
