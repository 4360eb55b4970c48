package scheduling

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"

	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
)

// annBindCompleted is what the PersistentVolume controller writes on a claim once
// it is bound; kube-scheduler treats a claim without it as unbound.
const annBindCompleted = "pv.kubernetes.io/bind-completed"

// Volumes are the storage objects pods' volumes name, as values.
type Volumes struct {
	claims  map[string]*corev1.PersistentVolumeClaim // namespace/name
	volumes map[string]*corev1.PersistentVolume
	classes map[string]*storagev1.StorageClass
}

// NewVolumes indexes the cluster's claims, volumes and storage classes.
func NewVolumes(pvcs []corev1.PersistentVolumeClaim, pvs []corev1.PersistentVolume, classes []storagev1.StorageClass) *Volumes {
	v := &Volumes{claims: map[string]*corev1.PersistentVolumeClaim{}, volumes: map[string]*corev1.PersistentVolume{}, classes: map[string]*storagev1.StorageClass{}}
	for i := range pvcs {
		v.claims[pvcs[i].Namespace+"/"+pvcs[i].Name] = &pvcs[i]
	}
	for i := range pvs {
		v.volumes[pvs[i].Name] = &pvs[i]
	}
	for i := range classes {
		v.classes[classes[i].Name] = &classes[i]
	}
	return v
}

// Requirements is what the pod's volumes require of the node it runs on: a bound
// volume's node affinity (its zone, for EBS), or for a claim still to be
// provisioned when the pod is scheduled, its storage class's allowed topologies. An
// error says why kube-scheduler would not place the pod on any node now (a claim
// missing, being deleted, or unbound with Immediate binding), so launching a node
// for it would only launch an empty node.
func (v *Volumes) Requirements(pod *corev1.Pod) (Requirements, error) {
	var out Requirements
	for _, vol := range pod.Spec.Volumes {
		name := ""
		switch {
		case vol.PersistentVolumeClaim != nil:
			name = vol.PersistentVolumeClaim.ClaimName
		case vol.Ephemeral != nil:
			// A generic ephemeral volume's claim is the pod's own and is created anew
			// for a new pod: a bound pod being moved is not held to its zone.
			if pod.Spec.NodeName != "" {
				continue
			}
			name = pod.Name + "-" + vol.Name
		default:
			continue
		}
		rs, err := v.claimRequirements(pod, vol, name)
		if err != nil {
			return nil, fmt.Errorf("volume %q: %w", vol.Name, err)
		}
		if len(rs) == 0 {
			continue
		}
		if out == nil {
			out = Requirements{}
		}
		for _, r := range rs {
			out.Add(r)
		}
	}
	return out, nil
}

func (v *Volumes) claimRequirements(pod *corev1.Pod, vol corev1.Volume, name string) (Requirements, error) {
	pvc, ok := v.claims[pod.Namespace+"/"+name]
	if !ok {
		if vol.Ephemeral != nil && vol.Ephemeral.VolumeClaimTemplate != nil {
			// The ephemeral-volume controller has not created the claim yet; its
			// template says which class it will have.
			return v.classRequirements(vol.Ephemeral.VolumeClaimTemplate.Spec.StorageClassName)
		}
		return nil, fmt.Errorf("persistentvolumeclaim %s/%s not found", pod.Namespace, name)
	}
	if pvc.DeletionTimestamp != nil {
		return nil, fmt.Errorf("persistentvolumeclaim %s/%s is being deleted", pvc.Namespace, pvc.Name)
	}
	if pvc.Status.Phase == corev1.ClaimLost {
		return nil, fmt.Errorf("persistentvolumeclaim %s/%s lost its volume %s", pvc.Namespace, pvc.Name, pvc.Spec.VolumeName)
	}
	if pvc.Spec.VolumeName != "" {
		if _, bound := pvc.Annotations[annBindCompleted]; bound {
			return v.volumeRequirements(pvc.Spec.VolumeName)
		}
	}
	class := ""
	if pvc.Spec.StorageClassName != nil {
		class = *pvc.Spec.StorageClassName
	}
	if class == "" {
		return nil, fmt.Errorf("persistentvolumeclaim %s/%s is not bound and names no storage class", pvc.Namespace, pvc.Name)
	}
	sc, ok := v.classes[class]
	if !ok {
		return nil, fmt.Errorf("storageclass %s of persistentvolumeclaim %s/%s not found", class, pvc.Namespace, pvc.Name)
	}
	if sc.VolumeBindingMode == nil || *sc.VolumeBindingMode == storagev1.VolumeBindingImmediate {
		return nil, fmt.Errorf("persistentvolumeclaim %s/%s is not bound yet and storageclass %s binds immediately: the pod waits for the volume, not for a node", pvc.Namespace, pvc.Name, class)
	}
	return v.classRequirements(pvc.Spec.StorageClassName)
}

// volumeRequirements are a bound volume's node affinity. Only its first term is
// used: the terms are alternatives, and a node launched for the first holds.
func (v *Volumes) volumeRequirements(name string) (Requirements, error) {
	pv, ok := v.volumes[name]
	if !ok {
		return nil, fmt.Errorf("persistentvolume %s not found", name)
	}
	if pv.DeletionTimestamp != nil {
		return nil, fmt.Errorf("persistentvolume %s is being deleted", name)
	}
	if pv.Spec.NodeAffinity == nil || pv.Spec.NodeAffinity.Required == nil || len(pv.Spec.NodeAffinity.Required.NodeSelectorTerms) == 0 {
		return nil, nil
	}
	term := pv.Spec.NodeAffinity.Required.NodeSelectorTerms[0]
	var exprs []corev1.NodeSelectorRequirement
	for _, e := range term.MatchExpressions {
		// A local or hostPath volume names the node it lives on; a node launched now
		// can never be that node, and holding the pod to it would only launch
		// nodes it cannot use. The volume's other terms (a zone) still hold.
		if e.Key == v1.LabelHostname && (pv.Spec.Local != nil || pv.Spec.HostPath != nil) {
			continue
		}
		exprs = append(exprs, e)
	}
	rs, err := FromNodeSelectorTerm(corev1.NodeSelectorTerm{MatchExpressions: exprs})
	if err != nil {
		return nil, fmt.Errorf("persistentvolume %s: node affinity: %w", name, err)
	}
	return rs, nil
}

// classRequirements are a storage class's allowed topologies (the first term, as
// for a volume).
func (v *Volumes) classRequirements(class *string) (Requirements, error) {
	if class == nil || *class == "" {
		return nil, nil
	}
	sc, ok := v.classes[*class]
	if !ok {
		return nil, fmt.Errorf("storageclass %s not found", *class)
	}
	if len(sc.AllowedTopologies) == 0 {
		return nil, nil
	}
	rs := Requirements{}
	for _, e := range sc.AllowedTopologies[0].MatchLabelExpressions {
		r, err := NewRequirement(e.Key, v1.OpIn, e.Values...)
		if err != nil {
			return nil, fmt.Errorf("storageclass %s: allowed topologies: %w", sc.Name, err)
		}
		rs.Add(r)
	}
	return rs, nil
}
