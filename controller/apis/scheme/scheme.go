// Package scheme is the API machinery the controller speaks, in a package of its own
// so that controllers' tests can build clients without importing the operator that
// wires them.
package scheme

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	autoscalingv1 "github.com/dovetail-sh/dovetail/controller/apis/autoscaling/v1"
	autoscalingv1beta1 "github.com/dovetail-sh/dovetail/controller/apis/autoscaling/v1beta1"
	awsv1 "github.com/dovetail-sh/dovetail/controller/apis/aws/v1"
	dovetailv1alpha1 "github.com/dovetail-sh/dovetail/controller/apis/dovetail/v1alpha1"
	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/controller/apis/v1alpha1"
)

// New is a scheme with Kubernetes' built-in kinds, CRDs, and Dovetail's and the AWS
// provider's kinds (NodeOverlay and CapacityBuffer included, which Karpenter v1.14
// serves), the ProvisioningRequest Kueue talks to, and Dovetail's own (Commitment).
func New() *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, apiextensionsv1.AddToScheme, v1.AddToScheme, awsv1.AddToScheme, v1alpha1.AddToScheme, autoscalingv1.AddToScheme, autoscalingv1beta1.AddToScheme, dovetailv1alpha1.AddToScheme} {
		if err := add(s); err != nil {
			panic(err)
		}
	}
	return s
}
