package provider

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	awsv1 "github.com/dovetail-sh/dovetail/controller/apis/aws/v1"
	dovetailv1alpha1 "github.com/dovetail-sh/dovetail/controller/apis/dovetail/v1alpha1"
)

// dovetailAnnotationPrefix marks the annotations only Dovetail reads: its bookkeeping
// on NodeClaims (template keys, planned price, a disruption in flight).
var dovetailAnnotationPrefix = dovetailv1alpha1.SchemeGroupVersion.Group + "/"

// commitmentCRD is the one CRD of Dovetail's own kind; the others are Karpenter's
// (and CapacityBuffer and ProvisioningRequest are SIG Autoscaling's, whose objects
// Kueue and the next autoscaler own), which stay.
const commitmentCRD = "commitments.dovetail.sh"

// handOver is the destroy of keep_crds_on_destroy: the controller goes first (its
// pods gone, so nothing of it runs), then its other objects; the CRDs stay, and with
// them every NodePool, EC2NodeClass and NodeClaim, whose nodes keep running for the
// next controller (Karpenter's) to take over. What is left of Dovetail's own goes too
// (stripDovetailAnnotations), and the Commitment CRD unless Commitments still exist,
// which deleting it would delete.
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
	if !deleteObjects(ctx, cl, deployments, diags) {
		return
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
	if !deleteObjects(ctx, cl, rest, diags) {
		return
	}
	waitDeleted(ctx, rest, cl, timeout, diags)
	if diags.HasError() {
		return
	}
	retiring, err := stripDovetailAnnotations(ctx, cl)
	if err != nil {
		diags.AddError("Cannot take Dovetail's annotations off the NodeClaims, Nodes and EC2NodeClasses", err.Error()+" The controller is gone and the CRDs stay; destroy again to retry.")
		return
	}
	if len(retiring) > 0 {
		diags.AddWarning("Instance profiles left to delete",
			fmt.Sprintf("Dovetail was retiring instance profiles %s, made for an EC2NodeClass's former role, once no instance used them; nothing retires them now, and Karpenter only deletes profiles under its own /karpenter/ path. Delete each once no instance uses it "+
				"(aws iam remove-role-from-instance-profile, then aws iam delete-instance-profile).", strings.Join(retiring, ", ")))
	}
	commitments := &unstructured.UnstructuredList{}
	commitments.SetGroupVersionKind(dovetailv1alpha1.SchemeGroupVersion.WithKind("CommitmentList"))
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
		return fmt.Errorf("pods %s of Deployment %s remain. A pod on a node that is down never finishes terminating: once the node is confirmed gone, kubectl delete pod --force, and destroy again", strings.Join(left, ", "), objectName(d))
	}
	return nil
}

var (
	nodeListGVK      = corev1.SchemeGroupVersion.WithKind("NodeList")
	nodeClassListGVK = awsv1.SchemeGroupVersion.WithKind("EC2NodeClassList")
)

// stripDovetailAnnotations takes what only Dovetail reads off the objects the next
// controller keeps: dovetail.sh/ annotations from NodeClaims and Nodes (registration
// copies a claim's onto its node), and from EC2NodeClasses the class hash, for
// Karpenter to re-stamp the claims with its own, and the retiring profiles, which it
// returns: nothing deletes them any more.
func stripDovetailAnnotations(ctx context.Context, cl client.Client) (retiring []string, err error) {
	dovetails := func(k string) bool { return strings.HasPrefix(k, dovetailAnnotationPrefix) }
	for _, gvk := range []k8sschema.GroupVersionKind{nodeClaimListGVK, nodeListGVK} {
		if _, err := stripAnnotations(ctx, cl, gvk, dovetails); err != nil {
			return nil, err
		}
	}
	// A class's hash annotations are still Karpenter's from before the switch (Dovetail
	// never rewrites them); left there, Karpenter would take the claims' hashes,
	// Dovetail's, as current and never re-stamp them.
	classes, err := stripAnnotations(ctx, cl, nodeClassListGVK, func(k string) bool {
		return k == awsv1.AnnotationEC2NodeClassHash || k == awsv1.AnnotationEC2NodeClassHashVersion || k == awsv1.AnnotationRetiringInstanceProfiles
	})
	for _, c := range classes {
		var profiles map[string]string
		if raw := c.GetAnnotations()[awsv1.AnnotationRetiringInstanceProfiles]; raw != "" && json.Unmarshal([]byte(raw), &profiles) == nil {
			for name := range profiles {
				retiring = append(retiring, name)
			}
		}
	}
	slices.Sort(retiring)
	return retiring, err
}

// stripAnnotations removes the annotations drop picks from every object of the list
// kind, and returns the objects as they were before.
func stripAnnotations(ctx context.Context, cl client.Client, listGVK k8sschema.GroupVersionKind, drop func(string) bool) ([]unstructured.Unstructured, error) {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(listGVK)
	if err := cl.List(ctx, list); err != nil {
		if meta.IsNoMatchError(err) {
			return nil, nil
		}
		return nil, err
	}
	for i := range list.Items {
		removed := map[string]any{}
		for k := range list.Items[i].GetAnnotations() {
			if drop(k) {
				removed[k] = nil
			}
		}
		if len(removed) == 0 {
			continue
		}
		patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": removed}})
		if err != nil {
			return nil, err
		}
		if err := cl.Patch(ctx, list.Items[i].DeepCopy(), client.RawPatch(types.MergePatchType, patch)); err != nil && !apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("%s %s: %w", strings.TrimSuffix(listGVK.Kind, "List"), list.Items[i].GetName(), err)
		}
	}
	return list.Items, nil
}
