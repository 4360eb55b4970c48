package scheduling

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
)

func zonalVolume(name, key, zone string) corev1.PersistentVolume {
	return corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PersistentVolumeSpec{
		NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
			MatchExpressions: []corev1.NodeSelectorRequirement{{Key: key, Operator: corev1.NodeSelectorOpIn, Values: []string{zone}}}}}}}}}
}

func boundClaim(name, volume string) corev1.PersistentVolumeClaim {
	return corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Annotations: map[string]string{annBindCompleted: "yes"}},
		Spec: corev1.PersistentVolumeClaimSpec{VolumeName: volume}, Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound}}
}

func unboundClaim(name, class string) corev1.PersistentVolumeClaim {
	return corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}, Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: &class}}
}

func storageClass(name string, mode storagev1.VolumeBindingMode, zones ...string) storagev1.StorageClass {
	sc := storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Provisioner: "ebs.csi.aws.com", VolumeBindingMode: &mode}
	if len(zones) > 0 {
		sc.AllowedTopologies = []corev1.TopologySelectorTerm{{MatchLabelExpressions: []corev1.TopologySelectorLabelRequirement{{Key: v1.LabelTopologyZone, Values: zones}}}}
	}
	return sc
}

func withClaim(volume, claim string) podOpt {
	return func(p *corev1.Pod) {
		p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: volume, VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}})
	}
}

func TestVolumeRequirements(t *testing.T) {
	local := zonalVolume("local", v1.LabelHostname, "node-7")
	local.Spec.Local = &corev1.LocalVolumeSource{Path: "/mnt/disk"}
	local.Spec.NodeAffinity.Required.NodeSelectorTerms[0].MatchExpressions = append(local.Spec.NodeAffinity.Required.NodeSelectorTerms[0].MatchExpressions,
		corev1.NodeSelectorRequirement{Key: v1.LabelTopologyZone, Operator: corev1.NodeSelectorOpIn, Values: []string{"us-west-2c"}})
	deleting := boundClaim("deleting", "ebs-b")
	deleting.DeletionTimestamp = &metav1.Time{}
	notYetBound := boundClaim("binding", "ebs-b")
	notYetBound.Annotations = nil
	class, empty, missing := "gp3-wait", "", "missing"
	either := zonalVolume("either", v1.LabelTopologyZone, "us-west-2a")
	either.Spec.NodeAffinity.Required.NodeSelectorTerms = append(either.Spec.NodeAffinity.Required.NodeSelectorTerms, zonalVolume("", v1.LabelTopologyZone, "us-west-2b").Spec.NodeAffinity.Required.NodeSelectorTerms...)
	racks := zonalVolume("racks", v1.LabelTopologyZone, "us-west-2a")
	racks.Spec.NodeAffinity.Required.NodeSelectorTerms = append(racks.Spec.NodeAffinity.Required.NodeSelectorTerms, zonalVolume("", v1.LabelTopologyZone, "us-west-2b").Spec.NodeAffinity.Required.NodeSelectorTerms...)
	for i, rack := range []string{"r1", "r2"} {
		term := &racks.Spec.NodeAffinity.Required.NodeSelectorTerms[i]
		term.MatchExpressions = append(term.MatchExpressions, corev1.NodeSelectorRequirement{Key: "rack", Operator: corev1.NodeSelectorOpIn, Values: []string{rack}})
	}
	twoTerms := storageClass("two-terms", storagev1.VolumeBindingWaitForFirstConsumer, "us-west-2b")
	twoTerms.AllowedTopologies = append(twoTerms.AllowedTopologies, storageClass("", storagev1.VolumeBindingWaitForFirstConsumer, "us-west-2c").AllowedTopologies...)
	defaultClass := storageClass("gp3-default", storagev1.VolumeBindingWaitForFirstConsumer, "us-west-2b", "us-west-2c")
	defaultClass.Annotations = map[string]string{"storageclass.kubernetes.io/is-default-class": "true"}
	classless := unboundClaim("classless", "")
	classless.Spec.StorageClassName = nil
	vols := NewVolumes(
		[]corev1.PersistentVolumeClaim{boundClaim("data", "ebs-b"), boundClaim("csi", "csi-a"), boundClaim("local", "local"), deleting, notYetBound,
			unboundClaim("later", "gp3-wait"), unboundClaim("now", "gp3-now"), unboundClaim("nowhere", "missing"),
			boundClaim("either", "either"), boundClaim("racks", "racks"), unboundClaim("two-terms", "two-terms"), classless, unboundClaim("empty-class", ""), boundClaim("dangling", "gone")},
		[]corev1.PersistentVolume{zonalVolume("ebs-b", v1.LabelTopologyZone, "us-west-2b"), zonalVolume("csi-a", "topology.ebs.csi.aws.com/zone", "us-west-2a"), local, either, racks},
		[]storagev1.StorageClass{storageClass("gp3-wait", storagev1.VolumeBindingWaitForFirstConsumer, "us-west-2a", "us-west-2c"), storageClass("gp3-now", storagev1.VolumeBindingImmediate), twoTerms, defaultClass})
	ephemeralOf := func(class *string) podOpt {
		return func(p *corev1.Pod) {
			p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "scratch", VolumeSource: corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{
				VolumeClaimTemplate: &corev1.PersistentVolumeClaimTemplate{Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: class}}}}})
		}
	}
	ephemeral := func(p *corev1.Pod) {
		p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "scratch", VolumeSource: corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{
			VolumeClaimTemplate: &corev1.PersistentVolumeClaimTemplate{Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: &class}}}}})
	}
	bound := func(p *corev1.Pod) { p.Spec.NodeName = "node-1" }
	cases := []struct {
		name      string
		pod       *corev1.Pod
		want, err string
	}{
		{"no volumes", pod("p", "1", "1Gi"), "", ""},
		{"an emptyDir", pod("p", "1", "1Gi", func(p *corev1.Pod) {
			p.Spec.Volumes = []corev1.Volume{{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
		}), "", ""},
		{"a bound zonal volume", pod("p", "1", "1Gi", withClaim("d", "data")), v1.LabelTopologyZone + " In [us-west-2b]", ""},
		{"the EBS driver's zone key is the zone", pod("p", "1", "1Gi", withClaim("d", "csi")), v1.LabelTopologyZone + " In [us-west-2a]", ""},
		{"two volumes in different zones", pod("p", "1", "1Gi", withClaim("d", "data"), withClaim("e", "csi")), v1.LabelTopologyZone + " DoesNotExist", ""},
		{"a local volume keeps its zone, not its node", pod("p", "1", "1Gi", withClaim("d", "local")), v1.LabelTopologyZone + " In [us-west-2c]", ""},
		{"wait for first consumer: the class's zones", pod("p", "1", "1Gi", withClaim("d", "later")), v1.LabelTopologyZone + " In [us-west-2a,us-west-2c]", ""},
		{"an ephemeral volume to be created: its class's zones", pod("p", "1", "1Gi", ephemeral), v1.LabelTopologyZone + " In [us-west-2a,us-west-2c]", ""},
		{"a bound pod's ephemeral volume is made anew where it moves", pod("p", "1", "1Gi", ephemeral, bound), "", ""},
		{"a missing claim", pod("p", "1", "1Gi", withClaim("d", "gone")), "", "persistentvolumeclaim default/gone not found"},
		{"a claim being deleted", pod("p", "1", "1Gi", withClaim("d", "deleting")), "", "is being deleted"},
		{"immediate binding, not bound yet", pod("p", "1", "1Gi", withClaim("d", "now")), "", "binds immediately"},
		{"a class that does not exist", pod("p", "1", "1Gi", withClaim("d", "nowhere")), "", "storageclass missing"},
		{"a volume name without the binder's annotation is not bound", pod("p", "1", "1Gi", withClaim("d", "binding")), "", "has no pv.kubernetes.io/bind-completed annotation"},
		{"a volume in either of two zones", pod("p", "1", "1Gi", withClaim("d", "either")), v1.LabelTopologyZone + " In [us-west-2a,us-west-2b]", ""},
		{"a volume on either of two racks: alternatives", pod("p", "1", "1Gi", withClaim("d", "racks")), "rack In [r1], " + v1.LabelTopologyZone + " In [us-west-2a] or rack In [r2], " + v1.LabelTopologyZone + " In [us-west-2b]", ""},
		{"a class allowing either of two zones, term by term", pod("p", "1", "1Gi", withClaim("d", "two-terms")), v1.LabelTopologyZone + " In [us-west-2b,us-west-2c]", ""},
		{"two volumes: only the alternatives both allow", pod("p", "1", "1Gi", withClaim("d", "either"), withClaim("e", "data")), v1.LabelTopologyZone + " In [us-west-2b]", ""},
		{"an unbound claim with no class", pod("p", "1", "1Gi", withClaim("d", "classless")), "", "is not bound and names no storage class"},
		{"an unbound claim with an empty class", pod("p", "1", "1Gi", withClaim("d", "empty-class")), "", "is not bound and names no storage class"},
		{"an ephemeral claim template with an empty class", pod("p", "1", "1Gi", ephemeralOf(&empty)), "", "names no storage class"},
		{"an ephemeral claim template with no class: the default class's zones", pod("p", "1", "1Gi", ephemeralOf(nil)), v1.LabelTopologyZone + " In [us-west-2b,us-west-2c]", ""},
		{"an ephemeral claim template naming a class that does not exist", pod("p", "1", "1Gi", ephemeralOf(&missing)), "", "storageclass missing of ephemeral volume claim default/p-scratch not found"},
		{"a claim naming a volume that does not exist", pod("p", "1", "1Gi", withClaim("d", "dangling")), "", "persistentvolume gone not found"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := vols.Requirements(c.pod)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("error %v, want one saying %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.String() != c.want {
				t.Errorf("requirements %q, want %q", got.String(), c.want)
			}
		})
	}
}

// Replicas alike in every way but their volumes' zones each get a node in their
// volume's zone, and a pod whose volume is in a zone the pool does not allow is
// reported, not given a node elsewhere.
func TestVolumeZonesPlaceReplicas(t *testing.T) {
	general := nodePool("general", withRequirements(req(v1.LabelTopologyZone, v1.OpIn, "us-west-2a", "us-west-2b")))
	in := []*corev1.Pod{pod("db-0", "1", "1Gi"), pod("db-1", "1", "1Gi"), pod("db-2", "1", "1Gi")}
	zones := map[string]string{"db-0": "us-west-2a", "db-1": "us-west-2b", "db-2": "us-west-2c"}
	r := solve(t, in, []*v1.NodePool{general}, func(i *Input) {
		i.VolumeRequirements = map[types.UID]VolumeTopology{}
		for _, p := range i.Pods {
			p.UID = types.UID(p.Name)
			i.VolumeRequirements[p.UID] = VolumeTopology{NewRequirements(MustRequirement(v1.LabelTopologyZone, v1.OpIn, zones[p.Name]))}
		}
	})
	for _, name := range []string{"db-0", "db-1"} {
		nc := claimOf(r, name)
		if nc == nil {
			t.Fatalf("%s has no claim: %s", name, unschedulable(r, name))
		}
		if got := label(nc, v1.LabelTopologyZone); got != zones[name] {
			t.Errorf("%s's node is in %s, its volume in %s", name, got, zones[name])
		}
	}
	if claimOf(r, "db-2") != nil || unschedulable(r, "db-2") == "" {
		t.Errorf("db-2, whose volume is in a zone the pool does not allow, got a node")
	}
}
