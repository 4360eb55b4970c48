package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// SavingsPlanType is the kind of a Savings Plan.
// +kubebuilder:validation:Enum:={Compute,EC2Instance}
type SavingsPlanType string

const (
	// SavingsPlanCompute covers on-demand usage of any family, size and zone.
	SavingsPlanCompute SavingsPlanType = "Compute"
	// SavingsPlanEC2Instance covers on-demand usage of one family in the region.
	SavingsPlanEC2Instance SavingsPlanType = "EC2Instance"
)

// ReservedInstance is a count of Reserved Instances (standard or convertible) of
// one type: zonal when it names a zone, regional (any zone) when it does not.
type ReservedInstance struct {
	// InstanceType is the reserved type, e.g. m5.2xlarge.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:Pattern=`^[a-z0-9-]+\.[a-z0-9-]+$`
	// +required
	InstanceType string `json:"instanceType"`
	// Zone is the availability zone of a zonal reservation; none for a regional one.
	// +optional
	Zone string `json:"zone,omitempty"`
	// Count is how many instances the reservation pays for.
	// +kubebuilder:validation:Minimum=1
	// +required
	Count int32 `json:"count"`
}

// SavingsPlan is an hourly commitment that prices covered on-demand usage at a
// discount.
// +kubebuilder:validation:XValidation:message="family is required for an EC2Instance savings plan and not allowed for a Compute one",rule="self.type == 'EC2Instance' ? has(self.family) : !has(self.family)"
type SavingsPlan struct {
	// Type is Compute (any family) or EC2Instance (one family).
	// +required
	Type SavingsPlanType `json:"type"`
	// Family is the instance family an EC2Instance plan covers, e.g. m7i.
	// +kubebuilder:validation:Pattern=`^[a-z0-9-]+$`
	// +optional
	Family string `json:"family,omitempty"`
	// CommitmentPerHour is the plan's hourly commitment in dollars, spent at the
	// plan's rate.
	// +kubebuilder:validation:Pattern=`^\d+(\.\d+)?$`
	// +required
	CommitmentPerHour string `json:"commitmentPerHour"`
	// Discount is the plan's discount on the on-demand price, a fraction below 1
	// (0.28 is 28% off).
	// +kubebuilder:validation:Pattern=`^0?\.\d+$`
	// +required
	Discount string `json:"discount"`
}

// CommitmentSpec lists Reserved Instances and Savings Plans the cluster's
// on-demand capacity may use.
type CommitmentSpec struct {
	// ReservedInstances are counts of reserved types.
	// +kubebuilder:validation:MaxItems=100
	// +listType=atomic
	// +optional
	ReservedInstances []ReservedInstance `json:"reservedInstances,omitempty"`
	// SavingsPlans are hourly commitments at a discount.
	// +kubebuilder:validation:MaxItems=100
	// +listType=atomic
	// +optional
	SavingsPlans []SavingsPlan `json:"savingsPlans,omitempty"`
}

// ReservedInstanceStatus is how much of a reservation the cluster's nodes use.
type ReservedInstanceStatus struct {
	// InstanceType is the reserved type.
	InstanceType string `json:"instanceType"`
	// Zone is the reservation's zone; none for a regional one.
	// +optional
	Zone string `json:"zone,omitempty"`
	// Count is how many instances the reservation pays for.
	Count int32 `json:"count"`
	// Used is how many running on-demand nodes the reservation pays for.
	Used int32 `json:"used"`
}

// SavingsPlanStatus is how much of a plan's hourly commitment the cluster's nodes
// use.
type SavingsPlanStatus struct {
	// Type is Compute or EC2Instance.
	Type SavingsPlanType `json:"type"`
	// Family is the family an EC2Instance plan covers.
	// +optional
	Family string `json:"family,omitempty"`
	// CommitmentPerHour is the plan's hourly commitment in dollars.
	CommitmentPerHour string `json:"commitmentPerHour"`
	// UsedPerHour is the commitment the covered nodes spend, in dollars per hour.
	UsedPerHour string `json:"usedPerHour"`
}

// CommitmentStatus says whether the controller plans with the commitment and how
// much of it the cluster uses.
type CommitmentStatus struct {
	// ReservedInstances are the spec's reservations, in order, with what is used.
	// +optional
	ReservedInstances []ReservedInstanceStatus `json:"reservedInstances,omitempty"`
	// SavingsPlans are the spec's plans, in order, with what is used.
	// +optional
	SavingsPlans []SavingsPlanStatus `json:"savingsPlans,omitempty"`
	// CoveredNodes is how many nodes the commitment pays for, wholly or in part.
	// +optional
	CoveredNodes int32 `json:"coveredNodes,omitempty"`
	// Conditions: Ready is True when the engine plans with the commitment.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// Commitment is a set of Reserved Instances and Savings Plans the engine plans
// with: an on-demand node they pay for is priced at what it adds to the bill (0
// for a reserved instance, the plan's rate while its commitment lasts).
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=commitments,scope=Cluster,categories=dovetail
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Covered",type=integer,JSONPath=`.status.coveredNodes`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Commitment struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              CommitmentSpec   `json:"spec,omitempty"`
	Status            CommitmentStatus `json:"status,omitempty"`
}

// CommitmentList is a list of Commitments.
// +kubebuilder:object:root=true
type CommitmentList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Commitment `json:"items"`
}
