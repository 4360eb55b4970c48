package scheduling

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"

	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
)

// annBindCompleted is what the PersistentVolume controller writes on a claim once
// it is bound; kube-scheduler treats a claim without it as unbound.
const annBindCompleted = "pv.kubernetes.io/bind-completed"

// The annotations that mark a cluster's default StorageClass.
const (
	annDefaultClass     = "storageclass.kubernetes.io/is-default-class"
	annBetaDefaultClass = "storageclass.beta.kubernetes.io/is-default-class"
)

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

// VolumeTopology is what a pod's volumes require of its node, as alternatives: the
// node must meet one of them. A volume's node-affinity terms and a storage class's
// allowed topologies are ORed, so a volume reachable from zone a or zone b is two
// alternatives (merged into one requirement when they constrain the same key). Nil
// means the volumes constrain nothing.
type VolumeTopology []Requirements

func (vt VolumeTopology) String() string {
	parts := make([]string, len(vt))
	for i, rs := range vt {
		parts[i] = rs.String()
	}
	return strings.Join(parts, " or ")
}

// and is the topology of a pod with both volumes: each pair of alternatives that
// can hold together. When no pair can, every pair is kept, so the pod is reported
// with the contradiction rather than placed as if one volume did not exist.
func (vt VolumeTopology) and(o VolumeTopology) VolumeTopology {
	if len(vt) == 0 {
		return o
	}
	if len(o) == 0 {
		return vt
	}
	var compatible, all VolumeTopology
	for _, a := range vt {
		for _, b := range o {
			merged := a.Copy()
			for _, r := range b {
				merged.Add(r)
			}
			all = append(all, merged)
			if a.Intersects(b) == nil {
				compatible = append(compatible, merged)
			}
		}
	}
	if len(compatible) > 0 {
		return compatible.merged()
	}
	return all.merged()
}

// merged folds alternatives that each require one key to be In some values, the
// same key for all (zone a or zone b), into one requirement: the engine then
// chooses among them like any other requirement instead of trying them in turn.
func (vt VolumeTopology) merged() VolumeTopology {
	if len(vt) < 2 {
		return vt
	}
	key := ""
	var values []string
	for _, rs := range vt {
		if len(rs) != 1 {
			return vt
		}
		for k, r := range rs {
			if r.complement || (key != "" && k != key) {
				return vt
			}
			key = k
			values = append(values, r.Values()...)
		}
	}
	return VolumeTopology{NewRequirements(MustRequirement(key, v1.OpIn, values...))}
}

// Requirements is what the pod's volumes require of the node it runs on: a bound
// volume's node affinity (its zone, for EBS), or for a claim still to be
// provisioned when the pod is scheduled, its storage class's allowed topologies. An
// error says why kube-scheduler would not place the pod on any node now (a claim or
// class missing, a claim being deleted, unbound with Immediate binding or without a
// class, or naming a volume the binder has not finished with), so launching a node
// for it would only launch an empty node. The error names the volume.
func (v *Volumes) Requirements(pod *corev1.Pod) (VolumeTopology, error) {
	var out VolumeTopology
	for _, vol := range pod.Spec.Volumes {
		name, ok := claimName(pod, vol)
		// A generic ephemeral volume's claim is the pod's own and is created anew
		// for a new pod: a bound pod being moved is not held to its zone.
		if !ok || vol.Ephemeral != nil && pod.Spec.NodeName != "" {
			continue
		}
		alts, err := v.claimTopology(pod, vol, name)
		if err != nil {
			return nil, fmt.Errorf("volume %q: %w", vol.Name, err)
		}
		out = out.and(alts)
	}
	return out, nil
}

// claimName is the PersistentVolumeClaim a volume of the pod uses: its own, or the
// one a generic ephemeral volume's claim is named for.
func claimName(pod *corev1.Pod, vol corev1.Volume) (string, bool) {
	switch {
	case vol.PersistentVolumeClaim != nil:
		return vol.PersistentVolumeClaim.ClaimName, true
	case vol.Ephemeral != nil:
		return pod.Name + "-" + vol.Name, true
	}
	return "", false
}

func (v *Volumes) claimTopology(pod *corev1.Pod, vol corev1.Volume, name string) (VolumeTopology, error) {
	pvc, ok := v.claims[pod.Namespace+"/"+name]
	if !ok {
		if vol.Ephemeral != nil && vol.Ephemeral.VolumeClaimTemplate != nil {
			// The ephemeral-volume controller has not created the claim yet; its
			// template says which class it will have (the default class when it
			// names none, as admission fills it in).
			class := vol.Ephemeral.VolumeClaimTemplate.Spec.StorageClassName
			if class == nil {
				class = v.defaultClass()
			}
			if class == nil || *class == "" {
				return nil, fmt.Errorf("the ephemeral volume's claim template names no storage class and the cluster has no default one: a claim without a class is never provisioned; set spec.volumeClaimTemplate.spec.storageClassName")
			}
			return v.unboundTopology(*class, fmt.Sprintf("ephemeral volume claim %s/%s", pod.Namespace, name))
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
		// kube-scheduler treats a claim that names its volume as bound only once
		// the binder has marked it so; until then the pod waits for the binder.
		if _, bound := pvc.Annotations[annBindCompleted]; !bound {
			return nil, fmt.Errorf("persistentvolumeclaim %s/%s names volume %s but has no %s annotation: kube-scheduler treats it as not bound yet, and the pod waits for the volume binder, not for a node", pvc.Namespace, pvc.Name, pvc.Spec.VolumeName, annBindCompleted)
		}
		return v.volumeTopology(pvc.Spec.VolumeName)
	}
	class := ""
	if pvc.Spec.StorageClassName != nil {
		class = *pvc.Spec.StorageClassName
	}
	if class == "" {
		return nil, fmt.Errorf("persistentvolumeclaim %s/%s is not bound and names no storage class: nothing will provision its volume; set spec.storageClassName or bind it to a volume", pvc.Namespace, pvc.Name)
	}
	return v.unboundTopology(class, fmt.Sprintf("persistentvolumeclaim %s/%s", pvc.Namespace, pvc.Name))
}

// unboundTopology is where a claim still to be provisioned may have its volume: its
// class's allowed topologies, if the class binds when a pod is scheduled.
func (v *Volumes) unboundTopology(class, claim string) (VolumeTopology, error) {
	sc, ok := v.classes[class]
	if !ok {
		return nil, fmt.Errorf("storageclass %s of %s not found", class, claim)
	}
	if sc.VolumeBindingMode == nil || *sc.VolumeBindingMode == storagev1.VolumeBindingImmediate {
		return nil, fmt.Errorf("%s is not bound yet and storageclass %s binds immediately: the pod waits for the volume, not for a node", claim, class)
	}
	var out VolumeTopology
	for _, term := range sc.AllowedTopologies {
		rs := Requirements{}
		for _, e := range term.MatchLabelExpressions {
			r, err := NewRequirement(e.Key, v1.OpIn, e.Values...)
			if err != nil {
				return nil, fmt.Errorf("storageclass %s: allowed topologies: %w", sc.Name, err)
			}
			rs.Add(r)
		}
		if len(rs) > 0 {
			out = append(out, rs)
		}
	}
	return out.merged(), nil
}

// defaultClass is the class admission gives a claim that names none.
func (v *Volumes) defaultClass() *string {
	for name, sc := range v.classes {
		if sc.Annotations[annDefaultClass] == "true" || sc.Annotations[annBetaDefaultClass] == "true" {
			return &name
		}
	}
	return nil
}

// volumeTopology is a bound volume's node affinity: each of its terms is an
// alternative.
func (v *Volumes) volumeTopology(name string) (VolumeTopology, error) {
	pv, ok := v.volumes[name]
	if !ok {
		return nil, fmt.Errorf("persistentvolume %s not found", name)
	}
	if pv.DeletionTimestamp != nil {
		return nil, fmt.Errorf("persistentvolume %s is being deleted", name)
	}
	if pv.Spec.NodeAffinity == nil || pv.Spec.NodeAffinity.Required == nil {
		return nil, nil
	}
	var out VolumeTopology
	for _, term := range pv.Spec.NodeAffinity.Required.NodeSelectorTerms {
		var exprs []corev1.NodeSelectorRequirement
		for _, e := range term.MatchExpressions {
			// A local or hostPath volume names the node it lives on; a node launched
			// now can never be that node, and holding the pod to it would only
			// launch nodes it cannot use. The term's other expressions (a zone)
			// still hold.
			if e.Key == v1.LabelHostname && (pv.Spec.Local != nil || pv.Spec.HostPath != nil) {
				continue
			}
			exprs = append(exprs, e)
		}
		rs, err := FromNodeSelectorTerm(corev1.NodeSelectorTerm{MatchExpressions: exprs})
		if err != nil {
			return nil, fmt.Errorf("persistentvolume %s: node affinity: %w", name, err)
		}
		if len(rs) == 0 {
			// A term that constrains nothing we can launch lets the pod go anywhere.
			return nil, nil
		}
		out = append(out, rs)
	}
	return out.merged(), nil
}
