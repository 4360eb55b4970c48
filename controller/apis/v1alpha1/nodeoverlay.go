package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Annotations of a NodeClaim planned with instance types a NodeOverlay changed
// (Karpenter's names; the value is "true").
const (
	PriceOverlayAppliedAnnotationKey    = "karpenter.sh/price-overlay-applied"
	CapacityOverlayAppliedAnnotationKey = "karpenter.sh/capacity-overlay-applied"
)

// NodeSelectorRequirement selects instance types and offerings by label: a key, an
// operator and values.
type NodeSelectorRequirement struct {
	// Key is the label key the requirement applies to.
	// +kubebuilder:validation:MaxLength=316
	// +kubebuilder:validation:Pattern=`^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*(\/))?([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$`
	// +kubebuilder:validation:XValidation:message="label domain \"karpenter.sh\" is restricted",rule="self in [\"karpenter.sh/capacity-type\", \"karpenter.sh/nodepool\"] || !self.find(\"^([^/]+)\").endsWith(\"karpenter.sh\")"
	// +kubebuilder:validation:XValidation:message="label \"kubernetes.io/hostname\" is restricted",rule="self != \"kubernetes.io/hostname\""
	// +required
	Key string `json:"key"`
	// Operator relates the key to the values: In, NotIn, Exists, DoesNotExist, Gt,
	// Lt, Gte or Lte.
	// +kubebuilder:validation:Enum:={In,NotIn,Exists,DoesNotExist,Gt,Lt,Gte,Lte}
	// +required
	Operator corev1.NodeSelectorOperator `json:"operator"`
	// Values are the values the operator applies; one integer for Gt, Lt, Gte and Lte.
	// +kubebuilder:validation:items:MaxLength=63
	// +kubebuilder:validation:items:Pattern=`^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$`
	// +listType=atomic
	// +optional
	Values []string `json:"values,omitempty"`
}

// NodeOverlaySpec changes the price or the capacity of the instance types its
// requirements select, as the scheduler sees them.
type NodeOverlaySpec struct {
	// Requirements select the instance types and offerings the overlay applies to;
	// none selects all.
	// +kubebuilder:validation:XValidation:message="requirements with operator 'NotIn' must have a value defined",rule="self.all(x, x.operator == 'NotIn' ? x.values.size() != 0 : true)"
	// +kubebuilder:validation:XValidation:message="requirements with operator 'In' must have a value defined",rule="self.all(x, x.operator == 'In' ? x.values.size() != 0 : true)"
	// +kubebuilder:validation:XValidation:message="requirements operator 'Gt', 'Lt', 'Gte' or 'Lte' must have a single positive integer value",rule="self.all(x, (x.operator == 'Gt' || x.operator == 'Lt' || x.operator == 'Gte' || x.operator == 'Lte') ? (x.values.size() == 1 && int(x.values[0]) >= 0) : true)"
	// +kubebuilder:validation:MaxItems:=100
	// +listType=atomic
	// +optional
	Requirements []NodeSelectorRequirement `json:"requirements,omitempty"`
	// PriceAdjustment changes the price: an amount ("+0.5", "-0.1") or a share
	// ("+10%", "-15%", at most "-100%").
	// +kubebuilder:validation:Pattern=`^(([+-]{1}(\d*\.?\d+))|(\+{1}\d*\.?\d+%)|(^(-\d{1,2}(\.\d+)?%)$)|(-100%))$`
	// +optional
	PriceAdjustment *string `json:"priceAdjustment,omitempty"`
	// Price replaces the price, in dollars per hour.
	// +kubebuilder:validation:Pattern=`^\d+(\.\d+)?$`
	// +optional
	Price *string `json:"price,omitempty"`
	// Capacity adds extended resources (hugepages, devices) to the instance types;
	// cpu, memory, ephemeral-storage and pods cannot be changed.
	// +kubebuilder:validation:XValidation:message="invalid resource restricted",rule="self.all(x, !(x in ['cpu', 'memory', 'ephemeral-storage', 'pods']))"
	// +optional
	Capacity corev1.ResourceList `json:"capacity,omitempty"`
	// Weight orders overlays that select the same instance type: the highest wins.
	// +kubebuilder:validation:Minimum:=1
	// +kubebuilder:validation:Maximum:=10000
	// +optional
	Weight *int32 `json:"weight,omitempty"`
}

// NodeOverlayStatus reports whether the overlay is valid and applied.
type NodeOverlayStatus struct {
	// Conditions: Ready, ValidationSucceeded.
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// NodeOverlay adjusts the price or capacity of instance types for scheduling.
// +kubebuilder:object:root=true
// +kubebuilder:storageversion
// +kubebuilder:resource:path=nodeoverlays,scope=Cluster,categories=karpenter,shortName=overlays
// +kubebuilder:printcolumn:name="Ready",type="string",JSONPath=".status.conditions[?(@.type==\"Ready\")].status",description=""
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp",description=""
// +kubebuilder:printcolumn:name="Weight",type="integer",JSONPath=".spec.weight",priority=1,description=""
// +kubebuilder:subresource:status
type NodeOverlay struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	// +kubebuilder:validation:XValidation:message="cannot set both 'price' and 'priceAdjustment'",rule="!has(self.price) || !has(self.priceAdjustment)"
	// +required
	Spec NodeOverlaySpec `json:"spec"`
	// +optional
	Status NodeOverlayStatus `json:"status,omitempty"`
}

// NodeOverlayList is a list of NodeOverlays.
// +kubebuilder:object:root=true
type NodeOverlayList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []NodeOverlay `json:"items"`
}
