package provisioning

import "sigs.k8s.io/controller-runtime/pkg/controller"

func controllerOptions() controller.Options {
	return controller.Options{MaxConcurrentReconciles: 10}
}
