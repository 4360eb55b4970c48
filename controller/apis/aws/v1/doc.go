// Package v1 holds the karpenter.k8s.aws/v1 API types: the EC2NodeClass, which says
// how nodes are launched on EC2 (subnets, security groups, AMIs, role, user data).
//
// +kubebuilder:object:generate=true
// +groupName=karpenter.k8s.aws
package v1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

// Group is the API group of the EC2NodeClass.
const Group = "karpenter.k8s.aws"

var (
	SchemeGroupVersion = schema.GroupVersion{Group: Group, Version: "v1"}
	SchemeBuilder      = &scheme.Builder{GroupVersion: SchemeGroupVersion}
	AddToScheme        = SchemeBuilder.AddToScheme
)

func init() { SchemeBuilder.Register(&EC2NodeClass{}, &EC2NodeClassList{}) }
