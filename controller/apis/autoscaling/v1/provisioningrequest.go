package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The classes Dovetail serves.
const (
	// ProvisioningClassCheckCapacity asks whether the pods fit on capacity that
	// exists now (nodes and claims being launched), launching nothing.
	ProvisioningClassCheckCapacity = "check-capacity.autoscaling.x-k8s.io"
	// ProvisioningClassBestEffortAtomicScaleUp asks for capacity for every pod at
	// once: all of it is launched, or none is kept.
	ProvisioningClassBestEffortAtomicScaleUp = "best-effort-atomic-scale-up.autoscaling.x-k8s.io"
)

// Condition types of a ProvisioningRequest, the ones Kueue reads.
const (
	ConditionAccepted        = "Accepted"
	ConditionProvisioned     = "Provisioned"
	ConditionFailed          = "Failed"
	ConditionBookingExpired  = "BookingExpired"
	ConditionCapacityRevoked = "CapacityRevoked"
)

// Pod annotations that tie a pod to the request whose capacity it consumes (Kueue
// writes both on the pods of an admitted workload).
const (
	ConsumeAnnotationKey    = "autoscaling.x-k8s.io/consume-provisioning-request"
	ClassAnnotationKey      = "autoscaling.x-k8s.io/provisioning-class-name"
	LegacyConsumeAnnotation = "cluster-autoscaler.kubernetes.io/consume-provisioning-request"
)

// Reference names an object in the request's namespace.
type Reference struct {
	// Name of the referenced object.
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern="^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
	// +required
	Name string `json:"name,omitempty"`
}

// PodSet is count copies of the pod a PodTemplate describes.
type PodSet struct {
	// PodTemplateRef names a PodTemplate in the request's namespace.
	// +required
	PodTemplateRef Reference `json:"podTemplateRef"`
	// Count is how many pods of the template the request is for.
	// +kubebuilder:validation:Minimum=1
	// +required
	Count int32 `json:"count"`
}

// Parameter is a class's parameter value.
// +kubebuilder:validation:MaxLength=255
type Parameter string

// ProvisioningRequestSpec is what capacity is asked for, and how. It does not change.
type ProvisioningRequestSpec struct {
	// PodSets are the pods the capacity is for.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="Value is immutable"
	// +listType=atomic
	// +required
	PodSets []PodSet `json:"podSets"`
	// ProvisioningClassName is how the capacity is provided: check-capacity.autoscaling.x-k8s.io
	// or best-effort-atomic-scale-up.autoscaling.x-k8s.io (others are left to
	// whoever serves them).
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern="^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="Value is immutable"
	// +required
	ProvisioningClassName string `json:"provisioningClassName"`
	// Parameters of the class (noRetry: "true" makes a check that finds no capacity
	// fail rather than retry).
	// +kubebuilder:validation:MaxProperties=100
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="Value is immutable"
	// +optional
	Parameters map[string]Parameter `json:"parameters,omitempty"`
}

// Detail is a class's detail about the request.
// +kubebuilder:validation:MaxLength=32768
type Detail string

// ProvisioningRequestStatus says what became of the request.
type ProvisioningRequestStatus struct {
	// Conditions: Accepted, Provisioned, Failed, BookingExpired, CapacityRevoked.
	// +listType=map
	// +listMapKey=type
	// +patchStrategy=merge
	// +patchMergeKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty" patchStrategy:"merge" patchMergeKey:"type"`
	// ProvisioningClassDetails are the class's details about the request.
	// +kubebuilder:validation:MaxProperties=64
	// +optional
	ProvisioningClassDetails map[string]Detail `json:"provisioningClassDetails,omitempty"`
}

// ProvisioningRequest asks for capacity for a set of pods as a whole, before they
// are created.
// +kubebuilder:object:root=true
// +kubebuilder:resource:shortName=provreq;provreqs
// +kubebuilder:subresource:status
// +kubebuilder:storageversion
// +kubebuilder:printcolumn:name="Class",type=string,JSONPath=".spec.provisioningClassName"
// +kubebuilder:printcolumn:name="Provisioned",type=string,JSONPath=".status.conditions[?(@.type==\"Provisioned\")].status"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=".metadata.creationTimestamp"
type ProvisioningRequest struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	// +required
	Spec   ProvisioningRequestSpec   `json:"spec"`
	Status ProvisioningRequestStatus `json:"status,omitempty"`
}

// ProvisioningRequestList is a list of ProvisioningRequests.
// +kubebuilder:object:root=true
type ProvisioningRequestList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ProvisioningRequest `json:"items"`
}
