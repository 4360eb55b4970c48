package scheduling

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	csitranslation "k8s.io/csi-translation-lib"
	"k8s.io/csi-translation-lib/plugins"
)

// AttachedVolumes are the volumes pods attach to their node, by CSI driver, each
// claim as namespace/name: pods sharing a claim attach it once, as kube-scheduler's
// NodeVolumeLimits counts them.
type AttachedVolumes map[string]sets.Set[string]

// exceeds reports whether attaching more beside what a is over a node's limits,
// per driver (a driver without a limit attaches any number). It runs for every
// node a pod with volumes is tried on, so it counts without building the union.
func (a AttachedVolumes) exceeds(limits map[string]int, more AttachedVolumes) bool {
	for driver, claims := range more {
		limit, ok := limits[driver]
		if !ok {
			continue
		}
		n := a[driver].Len()
		for claim := range claims {
			if !a[driver].Has(claim) {
				n++
			}
		}
		if n > limit {
			return true
		}
	}
	return false
}

// add records more as attached; a is the caller's own.
func (a AttachedVolumes) add(more AttachedVolumes) {
	for driver, claims := range more {
		if a[driver] == nil {
			a[driver] = sets.New[string]()
		}
		a[driver].Insert(claims.UnsortedList()...)
	}
}

var inTree = csitranslation.New()

// Attachments are the volumes the pod attaches, by the CSI driver each claim's
// volume is (or will be) provisioned by, as Karpenter counts them: a bound claim's
// PersistentVolume names its driver (an in-tree EBS volume counts as the EBS CSI
// driver's), an unbound one its StorageClass's provisioner. A claim, volume or class
// not found, or a volume no CSI driver attaches, counts toward no limit.
func (v *Volumes) Attachments(pod *corev1.Pod) AttachedVolumes {
	var out AttachedVolumes
	for _, vol := range pod.Spec.Volumes {
		name, ok := claimName(pod, vol)
		if !ok {
			continue
		}
		pvc, ok := v.claims[pod.Namespace+"/"+name]
		if !ok {
			continue
		}
		driver := v.driverOf(pvc)
		if driver == "" {
			continue
		}
		if out == nil {
			out = AttachedVolumes{}
		}
		if out[driver] == nil {
			out[driver] = sets.New[string]()
		}
		out[driver].Insert(pvc.Namespace + "/" + pvc.Name)
	}
	return out
}

func (v *Volumes) driverOf(pvc *corev1.PersistentVolumeClaim) string {
	if pvc.Spec.VolumeName != "" {
		pv, ok := v.volumes[pvc.Spec.VolumeName]
		switch {
		case !ok:
			return ""
		case pv.Spec.CSI != nil:
			return pv.Spec.CSI.Driver
		case pv.Spec.AWSElasticBlockStore != nil:
			return plugins.AWSEBSDriverName
		}
		return ""
	}
	if pvc.Spec.StorageClassName == nil || *pvc.Spec.StorageClassName == "" {
		return ""
	}
	sc, ok := v.classes[*pvc.Spec.StorageClassName]
	if !ok {
		return ""
	}
	if csi, err := inTree.GetCSINameFromInTreeName(sc.Provisioner); err == nil {
		return csi
	}
	return sc.Provisioner
}
