// Package v1beta1 holds the autoscaling.x-k8s.io/v1beta1 CapacityBuffer, which
// Karpenter v1.14 serves behind its CapacityBuffer feature gate. The CRD is installed
// so that manifests written for Karpenter apply; the controller does not provision
// buffers yet (its CapacityBuffer gate is refused at start).
//
// +kubebuilder:object:generate=true
// +groupName=autoscaling.x-k8s.io
package v1beta1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	SchemeGroupVersion = schema.GroupVersion{Group: "autoscaling.x-k8s.io", Version: "v1beta1"}
	SchemeBuilder      = &scheme.Builder{GroupVersion: SchemeGroupVersion}
	AddToScheme        = SchemeBuilder.AddToScheme
)

func init() {
	SchemeBuilder.Register(&CapacityBuffer{}, &CapacityBufferList{})
}
