package v1beta1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// LocalObjectRef names an object in the buffer's namespace.
type LocalObjectRef struct {
	// Name of the object.
	// +kubebuilder:validation:MinLength=1
	// +required
	Name string `json:"name"`
}

// ScalableRef names a workload with a scale subresource (a Deployment, a
// StatefulSet...) whose pods the buffer keeps room for.
type ScalableRef struct {
	// APIGroup of the workload; "" for the core group.
	// +optional
	APIGroup string `json:"apiGroup,omitempty"`
	// Kind of the workload.
	// +kubebuilder:validation:MinLength=1
	// +required
	Kind string `json:"kind"`
	// Name of the workload.
	// +kubebuilder:validation:MinLength=1
	// +required
	Name string `json:"name"`
}

// CapacityBufferSpec is the spare capacity to keep: chunks the size of a pod
// template's pod (or of a workload's pods), as many as replicas, a percentage of
// the workload, or the limits allow.
// +kubebuilder:validation:XValidation:rule="!has(self.podTemplateRef) || has(self.replicas) || has(self.limits)",message="If podTemplateRef is set, replicas or limits must also be set"
// +kubebuilder:validation:XValidation:rule="!(has(self.podTemplateRef) && has(self.scalableRef))",message="You must define either PodTemplateRef or ScalableRef, but not both"
type CapacityBufferSpec struct {
	// ProvisioningStrategy is how the buffer is kept.
	// +kubebuilder:default="buffer.x-k8s.io/active-capacity"
	// +optional
	ProvisioningStrategy *string `json:"provisioningStrategy,omitempty"`
	// PodTemplateRef names the PodTemplate a chunk is sized by.
	// +optional
	PodTemplateRef *LocalObjectRef `json:"podTemplateRef,omitempty"`
	// ScalableRef names the workload whose pods a chunk is sized by.
	// +optional
	ScalableRef *ScalableRef `json:"scalableRef,omitempty"`
	// Replicas is the number of chunks.
	// +kubebuilder:validation:Minimum=0
	// +optional
	Replicas *int32 `json:"replicas,omitempty"`
	// Percentage is the number of chunks as a share of the workload's replicas.
	// +kubebuilder:validation:Minimum=0
	// +optional
	Percentage *int32 `json:"percentage,omitempty"`
	// Limits caps the chunks by their total requests.
	// +optional
	Limits corev1.ResourceList `json:"limits,omitempty"`
}

// CapacityBufferStatus is the buffer as resolved: the template and the chunks.
type CapacityBufferStatus struct {
	// PodTemplateRef names the PodTemplate the chunks are made from.
	// +optional
	PodTemplateRef *LocalObjectRef `json:"podTemplateRef,omitempty"`
	// Replicas is the number of chunks.
	// +optional
	Replicas *int32 `json:"replicas,omitempty"`
	// PodTemplateGeneration is the generation of the PodTemplate used.
	// +optional
	PodTemplateGeneration *int64 `json:"podTemplateGeneration,omitempty"`
	// Conditions: ReadyForProvisioning, Provisioning.
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// ProvisioningStrategy is the strategy in use.
	// +optional
	ProvisioningStrategy *string `json:"provisioningStrategy,omitempty"`
}

// CapacityBuffer keeps spare capacity for pods that have not arrived yet.
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=capacitybuffers,scope=Namespaced,shortName=cb,categories=autoscaling
// +kubebuilder:subresource:status
// +kubebuilder:storageversion
// +kubebuilder:printcolumn:name="Strategy",type="string",JSONPath=".spec.provisioningStrategy",description="The strategy to be used."
// +kubebuilder:printcolumn:name="PodTemplate",type="string",JSONPath=".status.podTemplateRef.name",description="The name of the PodTemplate used."
// +kubebuilder:printcolumn:name="Replicas",type="integer",JSONPath=".status.replicas",description="The actual number of buffer chunks."
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp",description="The age of the CapacityBuffer."
type CapacityBuffer struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	// +required
	Spec CapacityBufferSpec `json:"spec"`
	// +optional
	Status CapacityBufferStatus `json:"status,omitempty"`
}

// CapacityBufferList is a list of CapacityBuffers.
// +kubebuilder:object:root=true
type CapacityBufferList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []CapacityBuffer `json:"items"`
}
