package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/tests/localstack"
	"github.com/dovetail-sh/dovetail/tests/testenv"
)

const (
	ebsZoneKey = "topology.ebs.csi.aws.com/zone"
	ebsDriver  = "ebs.csi.aws.com"
	// ebsAttachLimit is what the stand-in node plugin's CSINode allows each node.
	ebsAttachLimit = 1
)

// TestPodsFollowTheirVolumesZones: pods whose PersistentVolumeClaims are bound (by
// kube-controller-manager's binder) to zonal volumes, one volume per zone, each get a
// node in their volume's zone, which kube-scheduler then accepts; and when the
// pods go, their nodes go with them. The controller reads claims and volumes with
// the ClusterRole it ships.
func TestPodsFollowTheirVolumesZones(t *testing.T) {
	c := startCluster(t)
	ctx := context.Background()
	ebsNodePlugin(t, c)
	must(t, c.Create(ctx, consolidatingPool("default", "1s")))
	zones := testenv.TestZones
	for i, zone := range zones {
		name := fmt.Sprintf("data-%d", i)
		// The EBS CSI driver's own zone key, as its volumes carry it.
		key := ebsZoneKey
		if i == 0 {
			key = v1.LabelTopologyZone
		}
		staticVolume(t, c, name, key, zone)
	}
	eventually(t, 60*time.Second, "every claim bound by kube-controller-manager", func() error {
		var pvcs corev1.PersistentVolumeClaimList
		if err := c.List(ctx, &pvcs, client.InNamespace("default")); err != nil {
			return err
		}
		for _, p := range pvcs.Items {
			if p.Status.Phase != corev1.ClaimBound {
				return fmt.Errorf("%s is %s", p.Name, p.Status.Phase)
			}
		}
		return nil
	})
	// No workload names a zone: what keeps each in its zone is its volume alone.
	for i := range zones {
		claim := fmt.Sprintf("data-%d", i)
		must(t, c.Create(ctx, localstack.Deployment(fmt.Sprintf("db-%d", i), 1, "500m", "1Gi", func(s *corev1.PodSpec) {
			s.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}}}
		})))
	}
	for i, zone := range zones {
		app := fmt.Sprintf("db-%d", i)
		pods := allRunning(t, c, app, 1, 90*time.Second)
		var node corev1.Node
		must(t, c.Get(ctx, client.ObjectKey{Name: pods[0].Spec.NodeName}, &node))
		if got := node.Labels[v1.LabelTopologyZone]; got != zone {
			t.Errorf("%s runs in %s, its volume is in %s", app, got, zone)
		}
	}
	t.Run("a node whose CSINode attaches no more volumes takes no pod with one", func(t *testing.T) {
		// db-0's node has room for the pod but attaches its one EBS volume already:
		// kube-scheduler's NodeVolumeLimits keeps the pod off it, so the controller
		// plans a node of its own in the volume's zone.
		full := allRunning(t, c, "db-0", 1, 10*time.Second)[0].Spec.NodeName
		staticVolume(t, c, "extra", v1.LabelTopologyZone, zones[0])
		eventually(t, 60*time.Second, "the claim bound by kube-controller-manager", func() error {
			var pvc corev1.PersistentVolumeClaim
			if err := c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "extra"}, &pvc); err != nil {
				return err
			}
			if pvc.Status.Phase != corev1.ClaimBound {
				return fmt.Errorf("extra is %s", pvc.Status.Phase)
			}
			return nil
		})
		must(t, c.Create(ctx, localstack.Deployment("extra", 1, "100m", "128Mi", func(s *corev1.PodSpec) {
			s.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "extra"}}}}
		})))
		pod := allRunning(t, c, "extra", 1, 90*time.Second)[0]
		if pod.Spec.NodeName == full {
			t.Fatalf("extra runs on %s, whose CSINode allows one volume, taken by db-0's", full)
		}
		for _, e := range eventsFor(t, c, "default", pod.Name, "Nominated") {
			if strings.Contains(e.Message, "node/"+full) {
				t.Errorf("the controller nominated extra to %s, which attaches no more volumes: %s", full, e.Message)
			}
		}
	})
	for i := range zones {
		scale(t, c, fmt.Sprintf("db-%d", i), 0)
	}
	scale(t, c, "extra", 0)
	noNodesLeft(t, c)
}

// staticVolume creates an EBS volume in the zone (under the label key) and a claim
// of the same name bound to it, as a statically provisioned volume is.
func staticVolume(t *testing.T, c client.Client, name, key, zone string) {
	t.Helper()
	ctx := context.Background()
	must(t, c.Create(ctx, &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PersistentVolumeSpec{
		Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("10Gi")},
		AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
		PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
		PersistentVolumeSource:        corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: ebsDriver, VolumeHandle: "vol-" + name}},
		NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
			MatchExpressions: []corev1.NodeSelectorRequirement{{Key: key, Operator: corev1.NodeSelectorOpIn, Values: []string{zone}}}}}}},
	}}))
	empty := ""
	must(t, c.Create(ctx, &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}, Spec: corev1.PersistentVolumeClaimSpec{
		AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}, VolumeName: name, StorageClassName: &empty,
		Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("10Gi")}},
	}}))
}

// ebsNodePlugin stands in for the EBS CSI driver's node plugin, which on a real
// node makes the kubelet label the Node with the driver's zone key once it
// registers, and register the driver with its attach limit in the node's CSINode;
// kube-scheduler matches volumes carrying that key against it, and counts each
// node's volumes against the limit.
func ebsNodePlugin(t *testing.T, c client.Client) {
	standIn(t, func(ctx context.Context) {
		var nodes corev1.NodeList
		if err := c.List(ctx, &nodes); err != nil {
			return
		}
		for i := range nodes.Items {
			n := &nodes.Items[i]
			// The kubelet registers the driver's attach limit in the node's CSINode.
			limit := int32(ebsAttachLimit)
			_ = c.Create(ctx, &storagev1.CSINode{ObjectMeta: metav1.ObjectMeta{Name: n.Name}, Spec: storagev1.CSINodeSpec{Drivers: []storagev1.CSINodeDriver{{
				Name: ebsDriver, NodeID: n.Name, TopologyKeys: []string{ebsZoneKey}, Allocatable: &storagev1.VolumeNodeResources{Count: &limit}}}}})
			zone, ok := n.Labels[v1.LabelTopologyZone]
			if !ok || n.Labels[ebsZoneKey] == zone {
				continue
			}
			patch := client.MergeFrom(n.DeepCopy())
			n.Labels[ebsZoneKey] = zone
			_ = c.Patch(ctx, n, patch)
		}
	})
}
