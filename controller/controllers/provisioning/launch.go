package provisioning

import (
	"context"
	"fmt"
	"strconv"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	dovetailv1alpha1 "github.com/dovetail-sh/dovetail/controller/apis/dovetail/v1alpha1"
	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/controller/apis/v1alpha1"
	"github.com/dovetail-sh/dovetail/controller/controllers/nodeclaim/metadata"
	"github.com/dovetail-sh/dovetail/controller/engineinput"
	"github.com/dovetail-sh/dovetail/controller/metrics"
	"github.com/dovetail-sh/dovetail/controller/scheduling"
)

// create writes one planned NodeClaim.
func (p *Provisioner) create(ctx context.Context, np *v1.NodePool, plan *scheduling.NodeClaimPlan, reason string) (*v1.NodeClaim, error) {
	if np == nil {
		return nil, fmt.Errorf("nodepool %s disappeared", plan.NodePool)
	}
	plan, err := hostable(ctx, plan, engineinput.MaxInstanceTypes)
	if err != nil {
		return nil, fmt.Errorf("checking the planned nodeclaim, %w", err)
	}
	reqs := engineinput.NodeClaimRequirements(plan)
	// The pool comes from the cache uncopied; the create's response is decoded into
	// the new claim, so it must not share the pool's slices and pointers.
	tmpl := np.Spec.Template.DeepCopy()
	labels := map[string]string{v1.LabelNodePool: np.Name}
	for k, v := range tmpl.Labels {
		labels[k] = v
	}
	annotations := map[string]string{v1.NodePoolHashAnnotationKey: np.Hash(), v1.NodePoolHashVersionAnnotationKey: v1.NodePoolHashVersion}
	for k, v := range tmpl.Annotations {
		annotations[k] = v
	}
	annotations[dovetailv1alpha1.TemplateLabelsAnnotationKey] = metadata.Keys(tmpl.Labels)
	annotations[dovetailv1alpha1.TemplateAnnotationsAnnotationKey] = metadata.Keys(tmpl.Annotations)
	for _, it := range plan.InstanceTypeOptions[:min(len(plan.InstanceTypeOptions), engineinput.MaxInstanceTypes)] {
		// Karpenter's marks: a NodeOverlay changed what the claim was planned with.
		if it.PriceOverlaid {
			annotations[v1alpha1.PriceOverlayAppliedAnnotationKey] = "true"
		}
		if it.CapacityOverlaid {
			annotations[v1alpha1.CapacityOverlayAppliedAnnotationKey] = "true"
		}
	}
	annotations[dovetailv1alpha1.PlannedPriceAnnotationKey] = strconv.FormatFloat(plan.Offering.Price, 'f', 6, 64)
	if plan.CoveredBy != "" {
		annotations[dovetailv1alpha1.CoveredByAnnotationKey] = plan.CoveredBy
	}
	nc := &v1.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName: np.Name + "-",
			Labels:       labels,
			Annotations:  annotations,
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: v1.SchemeGroupVersion.String(), Kind: "NodePool", Name: np.Name, UID: np.UID,
				BlockOwnerDeletion: ptrTo(true),
			}},
			Finalizers: []string{v1.TerminationFinalizer},
		},
		Spec: v1.NodeClaimSpec{
			Taints: tmpl.Spec.Taints, StartupTaints: tmpl.Spec.StartupTaints,
			Requirements: reqs, NodeClassRef: tmpl.Spec.NodeClassRef,
			Resources:              v1.ResourceRequirements{Requests: plan.Requests.ToResourceList()},
			TerminationGracePeriod: tmpl.Spec.TerminationGracePeriod,
			ExpireAfter:            tmpl.Spec.ExpireAfter,
		},
	}
	if err := p.kube.Create(ctx, nc); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("creating nodeclaim, the NodeClaim CRD is not installed: %w", err)
		}
		return nil, fmt.Errorf("creating nodeclaim, %w", err)
	}
	p.cluster.ClaimCreated(nc)
	// The engine keeps every minValues (minValuesPolicy Strict): never relaxed.
	metrics.NodeClaimsCreated.WithLabelValues(reason, np.Name, "false").Inc()
	return nc, nil
}

func ptrTo[T any](v T) *T { return &v }

// Launch creates the NodeClaim a plan describes, as a replacement for disrupted
// capacity; reason ("drifted", "underutilized", ...) labels the created metric.
func (p *Provisioner) Launch(ctx context.Context, np *v1.NodePool, plan *scheduling.NodeClaimPlan, reason string) (*v1.NodeClaim, error) {
	return p.create(ctx, np, plan, reason)
}
