// Package v1 holds the autoscaling.x-k8s.io/v1 ProvisioningRequest, the API Kueue's
// ProvisioningRequest admission check talks to (Cluster Autoscaler defined it).
// Dovetail serves its two classes, check-capacity and best-effort-atomic-scale-up,
// so Kueue admits gangs onto capacity that exists or was launched for them as a whole.
//
// +kubebuilder:object:generate=true
// +groupName=autoscaling.x-k8s.io
package v1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	SchemeGroupVersion = schema.GroupVersion{Group: "autoscaling.x-k8s.io", Version: "v1"}
	SchemeBuilder      = &scheme.Builder{GroupVersion: SchemeGroupVersion}
	AddToScheme        = SchemeBuilder.AddToScheme
)

func init() {
	SchemeBuilder.Register(&ProvisioningRequest{}, &ProvisioningRequestList{})
}
