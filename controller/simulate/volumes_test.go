package simulate

import (
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/controller/catalog"
)

// Volumes decide zones offline as they do in the cluster: a bound volume's node
// affinity, a WaitForFirstConsumer class's allowed topologies; a pod whose claim is
// missing is not planned, and says why.
func TestSimulatePlansPodsInTheirVolumesZones(t *testing.T) {
	const manifests = `
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: default}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements:
        - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
---
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: gp3-zonal}
provisioner: ebs.csi.aws.com
volumeBindingMode: WaitForFirstConsumer
allowedTopologies:
  - matchLabelExpressions:
      - {key: topology.ebs.csi.aws.com/zone, values: [us-west-2b]}
---
apiVersion: v1
kind: PersistentVolume
metadata: {name: pv-data}
spec:
  capacity: {storage: 10Gi}
  accessModes: [ReadWriteOnce]
  csi: {driver: ebs.csi.aws.com, volumeHandle: vol-0123456789abcdef0}
  nodeAffinity:
    required:
      nodeSelectorTerms:
        - matchExpressions:
            - {key: topology.ebs.csi.aws.com/zone, operator: In, values: [us-west-2c]}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata:
  name: data
  annotations: {pv.kubernetes.io/bind-completed: "yes"}
spec:
  accessModes: [ReadWriteOnce]
  resources: {requests: {storage: 10Gi}}
  volumeName: pv-data
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: scratch}
spec:
  accessModes: [ReadWriteOnce]
  storageClassName: gp3-zonal
  resources: {requests: {storage: 10Gi}}
---
apiVersion: v1
kind: Pod
metadata: {name: db}
spec:
  containers: [{name: db, image: postgres, resources: {requests: {cpu: "1", memory: 1Gi}}}]
  volumes: [{name: data, persistentVolumeClaim: {claimName: data}}]
---
apiVersion: v1
kind: Pod
metadata: {name: cache}
spec:
  containers: [{name: cache, image: redis, resources: {requests: {cpu: "1", memory: 1Gi}}}]
  volumes: [{name: scratch, persistentVolumeClaim: {claimName: scratch}}]
---
apiVersion: v1
kind: Pod
metadata: {name: orphan}
spec:
  containers: [{name: app, image: app, resources: {requests: {cpu: "1", memory: 1Gi}}}]
  volumes: [{name: gone, persistentVolumeClaim: {claimName: missing}}]
`
	in := &Inputs{}
	if err := in.Read(strings.NewReader(manifests), "volumes.yaml"); err != nil {
		t.Fatal(err)
	}
	cat, err := catalog.EmbeddedAWS()
	if err != nil {
		t.Fatal(err)
	}
	plan, err := Run(in, cat.InZones([]string{"us-west-2a", "us-west-2b", "us-west-2c"}), defaults(), clocktesting.NewFakePassiveClock(fakeNow))
	if err != nil {
		t.Fatal(err)
	}
	zoneOf := map[string]string{}
	for _, nc := range plan.NodeClaims {
		for _, p := range nc.Pods {
			zoneOf[p] = nc.Zone
		}
	}
	if zoneOf["default/db"] != "us-west-2c" || zoneOf["default/cache"] != "us-west-2b" {
		t.Errorf("zones planned: %v; want db with its volume in us-west-2c and cache where its class provisions, us-west-2b", zoneOf)
	}
	if len(plan.Unschedulable) != 1 || plan.Unschedulable[0].Pod != "default/orphan" || !strings.Contains(plan.Unschedulable[0].Reason, "persistentvolumeclaim default/missing not found") {
		t.Errorf("unschedulable: %+v; want the pod whose claim is missing, saying so", plan.Unschedulable)
	}
	for _, w := range in.Warnings {
		if strings.Contains(w, "PersistentVolumeClaim") || strings.Contains(w, "StorageClass") {
			t.Errorf("volumes were ignored: %s", w)
		}
	}
}

// Consolidation moves no pod away from a volume that holds it: with every pod of the
// half-empty nodes on a local volume of its node, nothing can be removed.
func TestConsolidateKeepsPodsWithTheirVolumes(t *testing.T) {
	in := readSnapshot(t, "half-empty.yaml")
	if r := consolidate(t, in, fakeNow); len(r.Remove) == 0 {
		t.Fatal("without volumes the snapshot should consolidate")
	}
	in = readSnapshot(t, "half-empty.yaml")
	for i, p := range in.BoundPods {
		claim, volume := fmt.Sprintf("data-%d", i), fmt.Sprintf("local-%d", i)
		p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}})
		in.Claims = append(in.Claims, corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Name: claim, Namespace: p.Namespace, Annotations: map[string]string{"pv.kubernetes.io/bind-completed": "yes"}},
			Spec:       corev1.PersistentVolumeClaimSpec{VolumeName: volume},
		})
		in.Volumes = append(in.Volumes, corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: volume}, Spec: corev1.PersistentVolumeSpec{
			NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
				{Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: []string{p.Spec.NodeName}}}}}}},
		}})
	}
	r := consolidate(t, in, fakeNow)
	if len(r.Remove) != 0 || len(r.PodsMoved) != 0 {
		t.Errorf("removed %d nodes and moved %d pods though every pod is held by a local volume", len(r.Remove), len(r.PodsMoved))
	}
	if w := strings.Join(in.AllWarnings(), "\n"); strings.Contains(w, "mount PersistentVolumeClaims") {
		t.Errorf("with the claims and volumes in the input, a warning says they are missing: %s", w)
	}
	// A snapshot without them cannot say where the volumes are, and says so.
	in.Claims, in.Volumes = nil, nil
	if w := strings.Join(in.AllWarnings(), "\n"); !strings.Contains(w, fmt.Sprintf("%d pod(s) mount PersistentVolumeClaims, but the input holds no", len(in.BoundPods))) {
		t.Errorf("without claims, volumes or classes in the input: warnings %q; want one naming the pods whose volumes are not taken into account", w)
	}
}

// A node's CSINode limit holds in simulate as in the controller: the node holds one
// EBS volume, so a pending pod with a second goes to a new node though the first
// has room.
func TestSimulateRespectsCSINodeAttachLimits(t *testing.T) {
	types := westCatalog(t, "us-west-2a")
	sc := newSnapshotCluster(t, types, onlyM6i, onDemandOnly)
	node := sc.node("m6i.xlarge", "us-west-2a", v1.CapacityTypeOnDemand)
	one := int32(1)
	sc.objects = append(sc.objects, &storagev1.CSINode{TypeMeta: metav1.TypeMeta{APIVersion: "storage.k8s.io/v1", Kind: "CSINode"}, ObjectMeta: metav1.ObjectMeta{Name: node},
		Spec: storagev1.CSINodeSpec{Drivers: []storagev1.CSINodeDriver{{Name: "ebs.csi.aws.com", NodeID: "i-1", Allocatable: &storagev1.VolumeNodeResources{Count: &one}}}}})
	for _, name := range []string{"a", "b"} {
		sc.objects = append(sc.objects,
			&corev1.PersistentVolume{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "PersistentVolume"}, ObjectMeta: metav1.ObjectMeta{Name: "pv-" + name},
				Spec: corev1.PersistentVolumeSpec{PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: "ebs.csi.aws.com", VolumeHandle: "vol-" + name}}}},
			&corev1.PersistentVolumeClaim{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "PersistentVolumeClaim"},
				ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "shop", Annotations: map[string]string{"pv.kubernetes.io/bind-completed": "yes"}},
				Spec:       corev1.PersistentVolumeClaimSpec{VolumeName: "pv-" + name}, Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound}})
	}
	withVolume := func(p *corev1.Pod, claim string) {
		p.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}}}
	}
	withVolume(sc.pod(node, "100m", "128Mi", map[string]string{"app": "db"}), "a")
	pending := sc.pod("", "100m", "128Mi", map[string]string{"app": "db"})
	withVolume(pending, "b")
	pending.Status = corev1.PodStatus{Phase: corev1.PodPending}
	plan, err := Run(sc.read(), types, defaults(), clocktesting.NewFakePassiveClock(fakeNow))
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.NodeClaims) != 1 || len(plan.NodeClaims[0].Pods) != 1 || plan.NodeClaims[0].Pods[0] != "shop/"+pending.Name {
		t.Errorf("plan %+v, existing %+v; want the pending pod on a new node: %s attaches its one volume", plan.NodeClaims, plan.ExistingNodes, node)
	}
}
