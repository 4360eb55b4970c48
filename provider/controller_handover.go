package provider

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// dovetailAnnotationPrefix marks the annotations only Dovetail reads: its bookkeeping
// on NodeClaims (template keys, planned price, a disruption in flight).
const dovetailAnnotationPrefix = "dovetail.sh/"

// commitmentCRD is the one CRD of Dovetail's own kind; the others are Karpenter's
// (and CapacityBuffer is SIG Autoscaling's), which the next controller reads.
const commitmentCRD = "commitments.dovetail.sh"

// handOver is the destroy of keep_crds_on_destroy: the controller goes first (its
// pods gone, so nothing of it runs), then its other objects; the CRDs stay, and with
// them every NodePool, EC2NodeClass and NodeClaim, whose nodes keep running for the
// next controller (Karpenter's) to take over. What is left of Dovetail's own goes too: its annotations on NodeClaims, and the
// Commitment CRD unless Commitments still exist, which deleting it would delete.
func (r *controllerResource) handOver(ctx context.Context, cl client.Client, state *controllerModel, timeout time.Duration, diags *diag.Diagnostics) {
	objs, _, err := r.render(state)
	if err != nil {
		diags.AddError("Cannot render the controller's manifests", err.Error())
		return
	}
	var deployments, rest []*unstructured.Unstructured
	for _, o := range objs {
		switch o.GetKind() {
		case "CustomResourceDefinition":
		case "Deployment":
			deployments = append(deployments, o)
		default:
			// Reversed: the namespace last.
			rest = append([]*unstructured.Unstructured{o}, rest...)
		}
	}
	// The controller stops before anything it needs goes (its RBAC) and before its
	// annotations are taken off: a process still shutting down could write them back.
	// Its pods go only once their containers have exited.
	for _, d := range deployments {
		if err := cl.Delete(ctx, d, client.PropagationPolicy(metav1.DeletePropagationForeground)); err != nil && !apierrors.IsNotFound(err) {
			diags.AddError("Cannot delete Deployment "+objectName(d), err.Error())
			return
		}
	}
	waitDeleted(ctx, deployments, cl, timeout, diags)
	if diags.HasError() {
		return
	}
	for _, d := range deployments {
		if err := podsGone(ctx, cl, d); err != nil {
			diags.AddError("The controller's pods are still running", err.Error()+" "+timedOut(opDelete, timeout)+".")
			return
		}
	}
	for _, o := range rest {
		if err := cl.Delete(ctx, o, client.PropagationPolicy(metav1.DeletePropagationForeground)); err != nil && !apierrors.IsNotFound(err) {
			diags.AddError("Cannot delete "+o.GetKind()+" "+objectName(o), err.Error())
			return
		}
	}
	waitDeleted(ctx, rest, cl, timeout, diags)
	if diags.HasError() {
		return
	}
	if err := stripDovetailAnnotations(ctx, cl); err != nil {
		diags.AddError("Cannot take Dovetail's annotations off the NodeClaims", err.Error()+" The controller is gone and the CRDs stay; destroy again to retry.")
		return
	}
	commitments := &unstructured.UnstructuredList{}
	commitments.SetGroupVersionKind(k8sschema.GroupVersionKind{Group: "dovetail.sh", Version: "v1alpha1", Kind: "CommitmentList"})
	switch err := cl.List(ctx, commitments); {
	case meta.IsNoMatchError(err) || apierrors.IsNotFound(err):
		return
	case err != nil:
		diags.AddError("Cannot list Commitments", err.Error())
		return
	case len(commitments.Items) > 0:
		var names []string
		for _, c := range commitments.Items {
			names = append(names, c.GetName())
		}
		diags.AddWarning("Dovetail's Commitment CRD is kept",
			fmt.Sprintf("Commitments %s still exist, and deleting their CRD would delete them. Karpenter does not read them; delete them (kubectl delete commitments --all) and then the CRD (kubectl delete crd %s).", strings.Join(names, ", "), commitmentCRD))
		return
	}
	crd := &unstructured.Unstructured{}
	crd.SetGroupVersionKind(k8sschema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"})
	crd.SetName(commitmentCRD)
	if err := cl.Delete(ctx, crd); err != nil && !apierrors.IsNotFound(err) {
		diags.AddError("Cannot delete CustomResourceDefinition "+commitmentCRD, err.Error())
		return
	}
	waitDeleted(ctx, []*unstructured.Unstructured{crd}, cl, timeout, diags)
}

// podsGone waits until no pod of the Deployment d rendered is left.
func podsGone(ctx context.Context, cl client.Client, d *unstructured.Unstructured) error {
	selector, _, _ := unstructured.NestedStringMap(d.Object, "spec", "selector", "matchLabels")
	var left []string
	err := wait.PollUntilContextCancel(ctx, time.Second, true, func(ctx context.Context) (bool, error) {
		pods := &corev1.PodList{}
		if err := cl.List(ctx, pods, client.InNamespace(d.GetNamespace()), client.MatchingLabels(selector)); err != nil {
			return false, err
		}
		left = left[:0]
		for _, p := range pods.Items {
			left = append(left, p.Name)
		}
		return len(left) == 0, nil
	})
	if err != nil {
		return fmt.Errorf("pods %s of Deployment %s remain", strings.Join(left, ", "), objectName(d))
	}
	return nil
}

// stripDovetailAnnotations removes the dovetail.sh/ annotations from every NodeClaim.
func stripDovetailAnnotations(ctx context.Context, cl client.Client) error {
	claims := &unstructured.UnstructuredList{}
	claims.SetGroupVersionKind(nodeClaimListGVK)
	if err := cl.List(ctx, claims); err != nil {
		if meta.IsNoMatchError(err) {
			return nil
		}
		return err
	}
	for i := range claims.Items {
		drop := map[string]any{}
		for k := range claims.Items[i].GetAnnotations() {
			if strings.HasPrefix(k, dovetailAnnotationPrefix) {
				drop[k] = nil
			}
		}
		if len(drop) == 0 {
			continue
		}
		patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": drop}})
		if err != nil {
			return err
		}
		if err := cl.Patch(ctx, &claims.Items[i], client.RawPatch(types.MergePatchType, patch)); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("NodeClaim %s: %w", claims.Items[i].GetName(), err)
		}
	}
	return nil
}
