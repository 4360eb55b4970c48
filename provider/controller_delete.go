package provider

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Delete removes nothing while a NodePool or EC2NodeClass exists in the cluster.
// Deleting the CRDs would delete every one of them, including those another state,
// kubectl or GitOps made, and race the finalizers that terminate their nodes and
// launch templates; so the destroy is refused, naming them, and the user decides.
// The resources of this state go first when they depend on this one. Then it refuses
// while NodeClaims exist: without the controller their instances would be left
// running. CRDs go first, while the controller still runs to finalize what they
// hold; then the controller and its objects.
func (r *controllerResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var state controllerModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	cl := kubeClient(r.clients, &resp.Diagnostics)
	if resp.Diagnostics.HasError() {
		return
	}
	ctx, cancel, timeout := withOperationTimeout(ctx, state.Timeouts, opDelete, defaultDeleteTimeout, &resp.Diagnostics)
	defer cancel()
	if state.KeepCRDsOnDestroy.ValueBool() {
		r.handOver(ctx, cl, &state, timeout, &resp.Diagnostics)
		return
	}
	live, deleting, err := nodeObjects(ctx, cl)
	if err != nil {
		resp.Diagnostics.AddError("Cannot check for NodePools and EC2NodeClasses", err.Error())
		return
	}
	if len(live) > 0 {
		resp.Diagnostics.AddError("NodePools or EC2NodeClasses still exist", refuseDestroyMessage(live))
		return
	}
	// Those already being deleted finish while the controller runs to finalize them.
	if len(deleting) > 0 {
		if err := nodeObjectsGone(ctx, cl); err != nil {
			resp.Diagnostics.AddError("NodePools or EC2NodeClasses are still terminating", err.Error()+" "+timedOut(opDelete, timeout)+".")
			return
		}
	}
	if live := liveNodeClaims(ctx, cl); len(live) > 0 {
		resp.Diagnostics.AddError("NodeClaims still exist",
			fmt.Sprintf("%d NodeClaims (%s) still hold instances. Delete their NodePools first (Terraform does when they depend on this resource) and let the controller terminate the instances; removing the controller now would leave them running.",
				len(live), strings.Join(live, ", ")))
		return
	}
	// Claims already being deleted (their pool went first) finish while the controller runs.
	if err := nodeClaimsGone(ctx, cl, nil); err != nil {
		resp.Diagnostics.AddError("NodeClaims are still terminating", err.Error()+" "+timedOut(opDelete, timeout)+".")
		return
	}
	objs, _, err := r.render(&state)
	if err != nil {
		resp.Diagnostics.AddError("Cannot render the controller's manifests", err.Error())
		return
	}
	var crds, rest []*unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == "CustomResourceDefinition" {
			crds = append(crds, o)
		} else {
			rest = append([]*unstructured.Unstructured{o}, rest...)
		}
	}
	if !deleteObjects(ctx, cl, append(crds, rest...), &resp.Diagnostics) {
		return
	}
	waitDeleted(ctx, objs, cl, timeout, &resp.Diagnostics)
}

// deleteObjects deletes objs in order, each in the foreground, and reports whether
// all went. One already gone, or of a kind no longer served (a ServiceMonitor after
// prometheus-operator went), has nothing left to delete.
func deleteObjects(ctx context.Context, cl client.Client, objs []*unstructured.Unstructured, diags *diag.Diagnostics) bool {
	for _, o := range objs {
		if err := cl.Delete(ctx, o, client.PropagationPolicy(metav1.DeletePropagationForeground)); err != nil && !apierrors.IsNotFound(err) && !meta.IsNoMatchError(err) {
			diags.AddError("Cannot delete "+o.GetKind()+" "+objectName(o), err.Error())
			return false
		}
	}
	return true
}

// waitDeleted waits until objs are gone. Deletion is asynchronous: CRDs go once their
// objects do, the Deployment once its pods do (foreground). Waiting, destroy ends
// with nothing left and a following apply does not race terminating objects. A
// namespace is left to the namespace controller, which can take much longer.
func waitDeleted(ctx context.Context, objs []*unstructured.Unstructured, cl client.Client, timeout time.Duration, diags *diag.Diagnostics) {
	var remaining []string
	err := wait.PollUntilContextCancel(ctx, time.Second, true, func(ctx context.Context) (bool, error) {
		remaining = remaining[:0]
		for _, o := range objs {
			if o.GetKind() == "Namespace" {
				continue
			}
			live := &unstructured.Unstructured{}
			live.SetGroupVersionKind(o.GroupVersionKind())
			if err := cl.Get(ctx, client.ObjectKeyFromObject(o), live); !apierrors.IsNotFound(err) && !meta.IsNoMatchError(err) {
				remaining = append(remaining, o.GetKind()+" "+objectName(o))
			}
		}
		return len(remaining) == 0, nil
	})
	if err != nil {
		diags.AddError("The controller's objects are still terminating",
			fmt.Sprintf("These remain %s: %s. Custom resources with finalizers can hold a CRD, and pods that do not stop hold the Deployment.", timedOut(opDelete, timeout), strings.Join(remaining, ", ")))
	}
}

// nodeObjects names the cluster's NodePools and EC2NodeClasses ("NodePool general"):
// those nobody is deleting, and those being deleted. Without the CRDs there are none.
func nodeObjects(ctx context.Context, cl client.Client) (live, deleting []string, err error) {
	for _, gvk := range nodeObjectKinds {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(gvk)
		if err := cl.List(ctx, list); err != nil {
			if meta.IsNoMatchError(err) || apierrors.IsNotFound(err) {
				continue
			}
			return nil, nil, fmt.Errorf("listing %ss, %w", strings.TrimSuffix(gvk.Kind, "List"), err)
		}
		for _, o := range list.Items {
			name := strings.TrimSuffix(gvk.Kind, "List") + " " + o.GetName()
			if o.GetDeletionTimestamp() != nil {
				deleting = append(deleting, name)
			} else {
				live = append(live, name)
			}
		}
	}
	return live, deleting, nil
}

// refuseDestroyMessage names what blocks the destroy and the ways on.
func refuseDestroyMessage(live []string) string {
	shown := live
	more := ""
	if len(shown) > 20 {
		shown, more = shown[:20], fmt.Sprintf(" and %d more", len(live)-20)
	}
	return fmt.Sprintf("The cluster still has %s%s. Destroying dovetail_controller deletes Dovetail's CRDs, and deleting a CRD deletes every object of its kind in the cluster, "+
		"including those this Terraform state does not manage; so nothing was deleted.\n\n"+
		"Destroy the dovetail_node_pool and dovetail_ec2_node_class resources that manage them first: Terraform does that by itself when they depend on this resource (depends_on = [dovetail_controller.this]). "+
		"Delete the others where they were made, or with kubectl delete nodepool NAME and kubectl delete ec2nodeclass NAME, and let the controller terminate their nodes. Then destroy again.",
		strings.Join(shown, ", "), more)
}

// nodeObjectsGone waits until no NodePool or EC2NodeClass is left, or ctx's deadline.
func nodeObjectsGone(ctx context.Context, cl client.Client) error {
	var left []string
	err := wait.PollUntilContextCancel(ctx, time.Second, true, func(ctx context.Context) (bool, error) {
		live, deleting, err := nodeObjects(ctx, cl)
		if err != nil {
			return false, err
		}
		left = append(live, deleting...)
		return len(left) == 0, nil
	})
	if err != nil {
		return fmt.Errorf("these remain: %s. Is the Dovetail controller running? Its finalizers terminate the nodes and launch templates they hold", strings.Join(left, ", "))
	}
	return nil
}

// liveNodeClaims are claims nothing is deleting: neither they nor their NodePool.
func liveNodeClaims(ctx context.Context, cl client.Client) []string {
	claims := &unstructured.UnstructuredList{}
	claims.SetGroupVersionKind(nodeClaimListGVK)
	if err := cl.List(ctx, claims); err != nil {
		return nil
	}
	var live []string
	for _, c := range claims.Items {
		if c.GetDeletionTimestamp() != nil {
			continue
		}
		pool := &unstructured.Unstructured{}
		pool.SetGroupVersionKind(k8sschema.GroupVersionKind{Group: "karpenter.sh", Version: "v1", Kind: "NodePool"})
		err := cl.Get(ctx, client.ObjectKey{Name: c.GetLabels()["karpenter.sh/nodepool"]}, pool)
		if apierrors.IsNotFound(err) || (err == nil && pool.GetDeletionTimestamp() != nil) {
			continue
		}
		live = append(live, c.GetName())
	}
	return live
}

// nodeObjectKinds are the kinds the CRDs hold that users make: deleting a CRD deletes them all.
var nodeObjectKinds = []k8sschema.GroupVersionKind{
	{Group: "karpenter.sh", Version: "v1", Kind: "NodePoolList"},
	{Group: "karpenter.k8s.aws", Version: "v1", Kind: "EC2NodeClassList"},
}
