package provisioning

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/dovetail-sh/dovetail/controller/engineinput"
)

// PodController wakes the provisioner when kube-scheduler marks a pod unschedulable.
type PodController struct {
	kube        client.Client
	provisioner *Provisioner
}

// NewPodController wires the trigger.
func NewPodController(kube client.Client, p *Provisioner) *PodController {
	return &PodController{kube: kube, provisioner: p}
}

func (c *PodController) Name() string { return "provisioner.trigger.pod" }

func (c *PodController) Register(_ context.Context, mgr manager.Manager) error {
	unbound := predicate.NewPredicateFuncs(func(o client.Object) bool {
		pod, ok := o.(*corev1.Pod)
		return ok && pod.Spec.NodeName == ""
	})
	return builder.ControllerManagedBy(mgr).Named(c.Name()).
		For(&corev1.Pod{}, builder.WithPredicates(unbound)).
		WithOptions(controllerOptions()).
		Complete(reconcile.AsReconciler(mgr.GetClient(), c))
}

func (c *PodController) Reconcile(ctx context.Context, pod *corev1.Pod) (reconcile.Result, error) {
	if engineinput.IsProvisionable(pod) && c.provisioner.TriggerFor(pod) {
		log.FromContext(ctx).V(1).Info("pod needs capacity")
	}
	return reconcile.Result{}, nil
}
