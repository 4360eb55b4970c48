// Package v1 holds the karpenter.sh/v1 API types (NodePool and NodeClaim) and the
// well-known labels and annotations. They mirror Karpenter v1 field for field so that
// manifests written for Karpenter apply unchanged.
//
// +kubebuilder:object:generate=true
// +groupName=karpenter.sh
package v1

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

// Group is the API group of NodePool and NodeClaim.
const Group = "karpenter.sh"

var (
	SchemeGroupVersion = schema.GroupVersion{Group: Group, Version: "v1"}
	SchemeBuilder      = &scheme.Builder{GroupVersion: SchemeGroupVersion}
	AddToScheme        = SchemeBuilder.AddToScheme
)

func init() {
	SchemeBuilder.Register(&NodePool{}, &NodePoolList{}, &NodeClaim{}, &NodeClaimList{})
}

// Kind returns the GroupKind of a kind in this group.
func Kind(kind string) schema.GroupKind { return SchemeGroupVersion.WithKind(kind).GroupKind() }

var _ runtime.Object = &NodePool{}
