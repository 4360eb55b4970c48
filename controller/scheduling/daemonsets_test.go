package scheduling

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"

	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
)

func daemon(name, cpu, memory string, opts ...podOpt) *corev1.Pod {
	return pod(name, cpu, memory, opts...)
}

func withStartupTaint(key string) poolOpt {
	return func(np *v1.NodePool) {
		np.Spec.Template.Spec.StartupTaints = append(np.Spec.Template.Spec.StartupTaints, corev1.Taint{Key: key, Effect: corev1.TaintEffectNoSchedule})
	}
}

// A DaemonSet runs on a node once its startup taints are removed, tolerated or
// not: its requests are reserved. Two 1-cpu pods and a 1-cpu DaemonSet do not fit
// the 2-cpu type the pods alone would.
func TestDaemonSetsThatDoNotTolerateStartupTaintsAreReserved(t *testing.T) {
	pool := nodePool("default", withRequirements(req(v1.LabelCapacityType, v1.OpIn, v1.CapacityTypeOnDemand), req(v1.LabelArch, v1.OpIn, v1.ArchitectureAmd64)), withStartupTaint("example.com/agent-not-ready"))
	r := solve(t, pods(1, "web", "900m", "1Gi"), []*v1.NodePool{pool}, func(i *Input) {
		i.DaemonSetPods = []*corev1.Pod{daemon("agent", "1200m", "512Mi")}
	})
	if len(r.NodeClaims) != 1 {
		t.Fatalf("claims %d, unschedulable %v", len(r.NodeClaims), r.Unschedulable)
	}
	nc := r.NodeClaims[0]
	if nc.Requests.MilliCPU != 2100 || nc.InstanceType.Allocatable.MilliCPU < 2100 {
		t.Errorf("planned %s with requests %s: the DaemonSet's 1200m is not reserved", nc.InstanceType.Name, nc.Requests)
	}
}

// A DaemonSet's host port is held on every node it runs on: a pod wanting the same
// port cannot be planned onto a new node of that pool.
func TestDaemonSetHostPortsAreHeld(t *testing.T) {
	agent := daemon("agent", "100m", "128Mi", withHostPort(9100))
	r := solve(t, []*corev1.Pod{pod("exporter", "100m", "128Mi", withHostPort(9100)), pod("web", "100m", "128Mi", withHostPort(8080))}, []*v1.NodePool{nodePool("default")}, func(i *Input) {
		i.DaemonSetPods = []*corev1.Pod{agent}
	})
	if reason := unschedulable(r, "exporter"); !containsAll(reason, "host port") {
		t.Errorf("exporter, whose host port the DaemonSet holds, got %q; want it refused naming the host port", reason)
	}
	if claimOf(r, "web") == nil {
		t.Errorf("web, on another port, was not placed: %s", unschedulable(r, "web"))
	}
}

// Whether a DaemonSet runs is decided per instance type: one that selects a type
// the pool does not have reserves nothing, and one that selects some of the pool's
// types reserves only on those.
func TestDaemonSetOverheadIsPerInstanceType(t *testing.T) {
	selecting := func(types ...string) podOpt {
		return withRequiredTerms([]corev1.NodeSelectorRequirement{{Key: v1.LabelInstanceType, Operator: corev1.NodeSelectorOpIn, Values: types}})
	}
	pool := nodePool("default", withRequirements(req(v1.LabelCapacityType, v1.OpIn, v1.CapacityTypeOnDemand), req(v1.LabelInstanceFamily, v1.OpIn, "c5")))
	t.Run("a type the pool lacks", func(t *testing.T) {
		r := solve(t, pods(1, "web", "1500m", "1Gi"), []*v1.NodePool{pool}, func(i *Input) {
			i.DaemonSetPods = []*corev1.Pod{daemon("gpu-agent", "1", "1Gi", selecting("p3.2xlarge"))}
		})
		if len(r.NodeClaims) != 1 || r.NodeClaims[0].InstanceType.Name != "c5.large" || r.NodeClaims[0].Requests.MilliCPU != 1500 {
			t.Errorf("want the pod alone on a c5.large; got %+v, unschedulable %v", r.NodeClaims, r.Unschedulable)
		}
	})
	t.Run("some of the pool's types", func(t *testing.T) {
		r := solve(t, pods(2, "web", "1500m", "1Gi"), []*v1.NodePool{pool}, func(i *Input) {
			i.DaemonSetPods = []*corev1.Pod{daemon("big-agent", "1", "1Gi", selecting("c5.large"))}
		})
		// On c5.large the agent leaves no room for a pod; on c5.xlarge it does not
		// run at all, so one holds both pods.
		if len(r.NodeClaims) != 1 || r.NodeClaims[0].InstanceType.Name != "c5.xlarge" {
			t.Fatalf("want one c5.xlarge; got %d claims, unschedulable %v", len(r.NodeClaims), r.Unschedulable)
		}
		for _, it := range r.NodeClaims[0].InstanceTypeOptions {
			if it.Name == "c5.large" {
				t.Errorf("c5.large is an option though the agent it runs leaves the pod no room")
			}
		}
	})
}

// A container that sets only limits asks for its limits: the API server defaults
// a Pod's requests so, and templates are defaulted the same way before planning.
func TestRequestsDefaultToLimits(t *testing.T) {
	p := pod("big", "0", "0")
	p.Spec.Containers[0].Resources = corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceCPU: p.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU]}}
	p.Spec.Containers[0].Resources.Limits[corev1.ResourceCPU] = mustQuantity("100")
	p.Spec.Containers[0].Resources.Limits[corev1.ResourceMemory] = mustQuantity("1Gi")
	p.Spec.InitContainers = []corev1.Container{{Name: "init", Resources: corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceMemory: mustQuantity("2Gi")}, Limits: corev1.ResourceList{corev1.ResourceCPU: mustQuantity("200"), corev1.ResourceMemory: mustQuantity("3Gi")}}}}
	before := p.DeepCopy()
	spec := WithRequestsFromLimits(p.Spec)
	got := PodRequests(&corev1.Pod{Spec: spec})
	if got.MilliCPU != 200_000 || got.Memory != 2<<30 {
		t.Errorf("requests %s; want cpu 200 (the init container's limit) and memory 2Gi (its request kept)", got)
	}
	if p.Spec.Containers[0].Resources.Requests != nil || p.Spec.InitContainers[0].Resources.Requests.Cpu().Value() != before.Spec.InitContainers[0].Resources.Requests.Cpu().Value() {
		t.Errorf("the template was modified")
	}
	r := solve(t, []*corev1.Pod{{ObjectMeta: p.ObjectMeta, Spec: spec}}, []*v1.NodePool{nodePool("default")})
	if len(r.NodeClaims) != 0 || unschedulable(r, "big") == "" {
		t.Errorf("a pod limited to 200 cpu was planned onto %d node(s)", len(r.NodeClaims))
	}
}

// A volume reachable from either of two zones (node-affinity terms are ORed) lets
// its pod run in either: with a pool that launches only into the second, the pod
// is placed there.
func TestVolumeInEitherOfTwoZones(t *testing.T) {
	either := zonalVolume("either", v1.LabelTopologyZone, "us-west-2a")
	either.Spec.NodeAffinity.Required.NodeSelectorTerms = append(either.Spec.NodeAffinity.Required.NodeSelectorTerms,
		zonalVolume("", v1.LabelTopologyZone, "us-west-2b").Spec.NodeAffinity.Required.NodeSelectorTerms...)
	racked := zonalVolume("racked", "rack", "r1")
	racked.Spec.NodeAffinity.Required.NodeSelectorTerms = append(racked.Spec.NodeAffinity.Required.NodeSelectorTerms,
		zonalVolume("", v1.LabelTopologyZone, "us-west-2b").Spec.NodeAffinity.Required.NodeSelectorTerms...)
	vols := NewVolumes([]corev1.PersistentVolumeClaim{boundClaim("data", "either"), boundClaim("racked", "racked")}, []corev1.PersistentVolume{either, racked}, nil)
	pool := nodePool("default", withRequirements(req(v1.LabelCapacityType, v1.OpIn, v1.CapacityTypeOnDemand), req(v1.LabelTopologyZone, v1.OpIn, "us-west-2b")))
	in := []*corev1.Pod{pod("db", "1", "1Gi", withClaim("d", "data")), pod("cache", "1", "1Gi", withClaim("d", "racked"))}
	r := solve(t, in, []*v1.NodePool{pool}, func(i *Input) {
		i.VolumeRequirements = map[types.UID]VolumeTopology{}
		for _, p := range i.Pods {
			p.UID = types.UID(p.Name)
			vt, err := vols.Requirements(p)
			if err != nil {
				t.Fatal(err)
			}
			i.VolumeRequirements[p.UID] = vt
		}
	})
	for _, p := range in {
		nc := claimOf(r, p.Name)
		if nc == nil {
			t.Fatalf("%s not placed: %s", p.Name, unschedulable(r, p.Name))
		}
		if z := label(nc, v1.LabelTopologyZone); z != "us-west-2b" {
			t.Errorf("%s in %s, want us-west-2b", p.Name, z)
		}
	}
}

func mustQuantity(s string) resource.Quantity { return resource.MustParse(s) }
