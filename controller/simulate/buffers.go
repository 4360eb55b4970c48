package simulate

import (
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"

	"github.com/dovetail-sh/dovetail/controller/buffer"
	"github.com/dovetail-sh/dovetail/controller/scheduling"
)

// BufferPlan is where the plan keeps a CapacityBuffer's room: how many virtual
// pods it resolves to, and how many fit on existing nodes, need new ones, or fit
// nowhere; or why it resolves to none.
type BufferPlan struct {
	Name     string `json:"name"`
	Replicas int32  `json:"replicas"`
	Existing int    `json:"onExistingNodes"`
	New      int    `json:"onNewNodes"`
	Failed   int    `json:"failed"`
	Problem  string `json:"problem,omitempty"`
}

// bufferPods resolves the input's buffers against its PodTemplates and workloads,
// as the controller does against the cluster; with the CapacityBuffer gate off
// (gate), the controller keeps no room for them, and neither does the prediction.
func bufferPods(in *Inputs, gate bool) ([]*corev1.Pod, []BufferPlan) {
	var pods []*corev1.Pod
	var plans []BufferPlan
	for _, cb := range in.Buffers {
		bp := BufferPlan{Name: buffer.Key(cb.Namespace, cb.Name)}
		if !gate {
			bp.Problem = "the controller runs with the CapacityBuffer feature gate off and keeps no room for buffers; pass --feature-gates CapacityBuffer=true if it runs with it on"
			plans = append(plans, bp)
			continue
		}
		var template corev1.PodTemplateSpec
		var scalable *int32
		switch {
		case cb.Spec.PodTemplateRef != nil:
			t, ok := in.podTemplates[cb.Namespace+"/"+cb.Spec.PodTemplateRef.Name]
			if !ok {
				bp.Problem = fmt.Sprintf("PodTemplate %s/%s is not in the input", cb.Namespace, cb.Spec.PodTemplateRef.Name)
				plans = append(plans, bp)
				continue
			}
			template = t
		case cb.Spec.ScalableRef != nil:
			w, ok := in.workloads[cb.Spec.ScalableRef.Kind+"/"+cb.Namespace+"/"+cb.Spec.ScalableRef.Name]
			if !ok {
				bp.Problem = fmt.Sprintf("%s %s/%s is not in the input", cb.Spec.ScalableRef.Kind, cb.Namespace, cb.Spec.ScalableRef.Name)
				plans = append(plans, bp)
				continue
			}
			template, scalable = w.template, &w.replicas
		default:
			bp.Problem = "neither podTemplateRef nor scalableRef is set"
			plans = append(plans, bp)
			continue
		}
		bp.Replicas = buffer.Replicas(cb.Spec, scalable, template)
		pods = append(pods, buffer.VirtualPods(cb, template, bp.Replicas)...)
		plans = append(plans, bp)
	}
	sort.Slice(plans, func(i, j int) bool { return plans[i].Name < plans[j].Name })
	return pods, plans
}

// placeBuffers fills in where the plan put each buffer's pods.
func placeBuffers(plans []BufferPlan, r *scheduling.Results) {
	placed := buffer.Classify(r)
	for i := range plans {
		p := placed[plans[i].Name]
		plans[i].Existing, plans[i].New, plans[i].Failed = p.Existing, p.New, p.Failed
	}
}
