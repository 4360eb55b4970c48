// Package v1alpha1 holds Dovetail's own API, group dovetail.sh: Commitment, the
// Reserved Instances and Savings Plans the engine plans with (no Karpenter release
// has them).
//
// +kubebuilder:object:generate=true
// +groupName=dovetail.sh
package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	SchemeGroupVersion = schema.GroupVersion{Group: "dovetail.sh", Version: "v1alpha1"}
	SchemeBuilder      = &scheme.Builder{GroupVersion: SchemeGroupVersion}
	AddToScheme        = SchemeBuilder.AddToScheme
)

func init() {
	SchemeBuilder.Register(&Commitment{}, &CommitmentList{})
}
