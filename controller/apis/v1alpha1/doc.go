// Package v1alpha1 holds the karpenter.sh/v1alpha1 API types: NodeOverlay, which
// Karpenter v1.14 serves behind its NodeOverlay feature gate; the controller applies
// overlays with that gate on.
//
// +kubebuilder:object:generate=true
// +groupName=karpenter.sh
package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	SchemeGroupVersion = schema.GroupVersion{Group: "karpenter.sh", Version: "v1alpha1"}
	SchemeBuilder      = &scheme.Builder{GroupVersion: SchemeGroupVersion}
	AddToScheme        = SchemeBuilder.AddToScheme
)

func init() {
	SchemeBuilder.Register(&NodeOverlay{}, &NodeOverlayList{})
}
