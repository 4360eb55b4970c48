package provider

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/types"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// waitNamespaceTerminated waits out the deletion of a namespace a previous destroy
// left terminating (destroy does not wait for it: its finalizers run in the
// cluster's namespace controller), since nothing can be created in it meanwhile.
// It waits until ctx's deadline.
func waitNamespaceTerminated(ctx context.Context, cl client.Client, name string) error {
	err := wait.PollUntilContextCancel(ctx, time.Second, true, func(ctx context.Context) (bool, error) {
		var ns corev1.Namespace
		err := cl.Get(ctx, client.ObjectKey{Name: name}, &ns)
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return err == nil && ns.DeletionTimestamp == nil, err
	})
	if err != nil {
		return fmt.Errorf("namespace %s is still terminating; check what holds it with `kubectl get namespace %s -o yaml` (status.conditions)", name, name)
	}
	return nil
}

type stateSetter interface {
	Set(ctx context.Context, val any) diag.Diagnostics
}

type planGetter interface {
	Get(ctx context.Context, target any) diag.Diagnostics
}

// install applies the CRDs, waits until they are served, applies the rest in order and
// waits for the rollout. State is recorded as soon as objects exist, so a failed
// rollout leaves a tainted resource rather than unrecorded objects.
// Every wait shares the operation's timeout (timeouts { create, update }, whose
// default is rollout_timeout).
func (r *controllerResource) install(ctx context.Context, planned planGetter, state stateSetter, op operation, diags *diag.Diagnostics) {
	var plan controllerModel
	diags.Append(planned.Get(ctx, &plan)...)
	cl := kubeClient(r.clients, diags)
	if diags.HasError() {
		return
	}
	rollout, _ := time.ParseDuration(plan.RolloutTimeout.ValueString())
	ctx, cancel, timeout := withOperationTimeout(ctx, plan.Timeouts, op, rollout, diags)
	defer cancel()
	objs, digest, err := r.render(&plan)
	if err != nil {
		diags.AddError("Cannot render the controller's manifests", err.Error())
		return
	}
	plan.ManifestsSHA256 = types.StringValue(digest)
	plan.ID = types.StringValue(plan.Namespace.ValueString() + "/" + plan.Name.ValueString())
	var crdNames []string
	for i, obj := range objs {
		if obj.GetKind() == "Namespace" {
			if err := waitNamespaceTerminated(ctx, cl, obj.GetName()); err != nil {
				diags.AddError("The controller's namespace is still being deleted", err.Error()+" "+timedOut(op, timeout)+".")
				return
			}
		}
		if err := cl.Patch(ctx, obj, client.Apply, client.ForceOwnership, client.FieldOwner(FieldManager)); err != nil {
			if i > 0 {
				diags.Append(state.Set(ctx, &plan)...)
			}
			diags.AddError(fmt.Sprintf("Cannot apply %s %s", obj.GetKind(), objectName(obj)), err.Error())
			return
		}
		if obj.GetKind() == "CustomResourceDefinition" {
			crdNames = append(crdNames, obj.GetName())
			continue
		}
		if len(crdNames) > 0 {
			// Upgrade order: the new CRDs are served before the controller that needs them starts.
			if err := waitEstablished(ctx, cl, crdNames); err != nil {
				diags.Append(state.Set(ctx, &plan)...)
				diags.AddError("The CRDs are not served", err.Error())
				return
			}
			crdNames = nil
		}
	}
	diags.Append(state.Set(ctx, &plan)...)
	if !plan.WaitForRollout.ValueBool() {
		return
	}
	if err := r.waitForRollout(ctx, cl, plan.Namespace.ValueString(), plan.Name.ValueString()); err != nil {
		diags.AddError("The controller did not roll out", err.Error()+"\n\nGave up "+timedOut(op, timeout)+".")
	}
}

func objectName(o client.Object) string {
	if o.GetNamespace() != "" {
		return o.GetNamespace() + "/" + o.GetName()
	}
	return o.GetName()
}

func waitEstablished(ctx context.Context, cl client.Client, names []string) error {
	pending := names
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		var still []string
		for _, n := range pending {
			crd := &unstructured.Unstructured{}
			crd.SetGroupVersionKind(k8sschema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"})
			if err := cl.Get(ctx, client.ObjectKey{Name: n}, crd); err != nil {
				return false, err
			}
			conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
			established := false
			for _, c := range conds {
				m, _ := c.(map[string]any)
				if m["type"] == "Established" && m["status"] == "True" {
					established = true
				}
			}
			if !established {
				still = append(still, n)
			}
		}
		pending = still
		return len(pending) == 0, nil
	})
	if err != nil {
		return fmt.Errorf("%v not established after a minute: %w", pending, err)
	}
	return nil
}

// waitForRollout waits until the Deployment's new ReplicaSet is fully available, and
// otherwise says why: unschedulable pods, failing containers, warning events.
// It waits until ctx's deadline.
func (r *controllerResource) waitForRollout(ctx context.Context, cl client.Client, namespace, name string) error {
	deploy := &appsv1.Deployment{}
	err := wait.PollUntilContextCancel(ctx, time.Second, true, func(ctx context.Context) (bool, error) {
		if err := cl.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, deploy); err != nil {
			return false, nil
		}
		want := int32(1)
		if deploy.Spec.Replicas != nil {
			want = *deploy.Spec.Replicas
		}
		s := deploy.Status
		return s.ObservedGeneration >= deploy.Generation && s.UpdatedReplicas == want && s.AvailableReplicas == want && s.Replicas == want, nil
	})
	if err == nil {
		return nil
	}
	// The operation's deadline has passed: finding out why gets time of its own.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	reasons := []string{fmt.Sprintf("Deployment %s/%s: %d of %d replicas updated, %d available.", namespace, name,
		deploy.Status.UpdatedReplicas, ptrValue(deploy.Spec.Replicas), deploy.Status.AvailableReplicas)}
	for _, c := range deploy.Status.Conditions {
		if c.Status != corev1.ConditionTrue && c.Message != "" {
			reasons = append(reasons, fmt.Sprintf("%s: %s", c.Type, c.Message))
		}
	}
	pods := &corev1.PodList{}
	if err := cl.List(ctx, pods, client.InNamespace(namespace), client.MatchingLabels{"app.kubernetes.io/instance": name, "app.kubernetes.io/name": "dovetail"}); err == nil {
		for _, p := range pods.Items {
			reasons = append(reasons, podProblems(&p)...)
		}
	}
	events := &corev1.EventList{}
	if err := cl.List(ctx, events, client.InNamespace(namespace)); err == nil {
		sort.Slice(events.Items, func(i, j int) bool { return events.Items[i].LastTimestamp.After(events.Items[j].LastTimestamp.Time) })
		shown := 0
		for _, e := range events.Items {
			if e.Type == corev1.EventTypeWarning && shown < 5 {
				reasons = append(reasons, fmt.Sprintf("event %s %s: %s", e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Message))
				shown++
			}
		}
	}
	return fmt.Errorf("%s", strings.Join(reasons, "\n"))
}

func podProblems(p *corev1.Pod) []string {
	var out []string
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
			out = append(out, fmt.Sprintf("pod %s is not scheduled: %s", p.Name, c.Message))
		}
	}
	for _, cs := range p.Status.ContainerStatuses {
		if w := cs.State.Waiting; w != nil && w.Reason != "" {
			out = append(out, fmt.Sprintf("pod %s container %s is waiting: %s %s", p.Name, cs.Name, w.Reason, w.Message))
		}
		if t := cs.LastTerminationState.Terminated; t != nil {
			out = append(out, fmt.Sprintf("pod %s container %s exited %d: %s %s", p.Name, cs.Name, t.ExitCode, t.Reason, t.Message))
		}
	}
	return out
}

func ptrValue(p *int32) int32 {
	if p == nil {
		return 1
	}
	return *p
}
