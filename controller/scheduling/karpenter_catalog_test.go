package scheduling

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
)

// karpenterCatalog is the catalogue Karpenter's scheduling suite plans against (its
// fake cloud provider's default types), rebuilt here so the scenarios its suite
// checks can be checked against the engine with the same sizes and prices: 0.1 an
// hour per core and per GB of memory (1.0 more for a GPU vendor's resource), 100m
// and 10Mi kube-reserved and nothing else held back, spot in zones 1 and 2 and
// on-demand in zones 1 to 3.
func karpenterCatalog() []*InstanceType {
	type spec struct {
		name, cpu, memory, pods, arch, gpu string
	}
	specs := []spec{
		{"default-instance-type", "4", "4Gi", "5", v1.ArchitectureAmd64, ""},
		{"small-instance-type", "2", "2Gi", "5", v1.ArchitectureAmd64, ""},
		{"gpu-vendor-instance-type", "4", "4Gi", "5", v1.ArchitectureAmd64, "fake.com/vendor-a"},
		{"gpu-vendor-b-instance-type", "4", "4Gi", "5", v1.ArchitectureAmd64, "fake.com/vendor-b"},
		{"arm-instance-type", "16", "128Gi", "5", v1.ArchitectureArm64, ""},
		{"single-pod-instance-type", "4", "4Gi", "1", v1.ArchitectureAmd64, ""},
	}
	settings := AllocatableSettings{
		KubeReserved: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("10Mi")},
		EvictionHard: map[string]string{"memory.available": "0", "nodefs.available": "0"},
	}
	var out []*InstanceType
	for _, s := range specs {
		capacity := corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse(s.cpu), corev1.ResourceMemory: resource.MustParse(s.memory),
			corev1.ResourcePods: resource.MustParse(s.pods), corev1.ResourceEphemeralStorage: resource.MustParse("20Gi"),
		}
		price := 0.1*float64(capacity.Cpu().MilliValue())/1000 + 0.1*float64(capacity.Memory().Value())/1e9
		if s.gpu != "" {
			capacity[corev1.ResourceName(s.gpu)] = resource.MustParse("2")
			price += 1
		}
		size := "small"
		if capacity.Cpu().Value() > 4 && capacity.Memory().Value() > 8<<30 {
			size = "large"
		}
		labels := map[string]string{v1.LabelArch: s.arch, v1.LabelOS: "linux", "integer": s.cpu, v1.LabelInstanceSize: size}
		var offerings []Offering
		for i, zone := range []string{"test-zone-1", "test-zone-2", "test-zone-3"} {
			if i < 2 {
				offerings = append(offerings, Offering{Zone: zone, CapacityType: v1.CapacityTypeSpot, Price: price, Available: true})
			}
			offerings = append(offerings, Offering{Zone: zone, CapacityType: v1.CapacityTypeOnDemand, Price: price, Available: true})
		}
		out = append(out, NewInstanceType(s.name, labels, capacity, offerings, settings))
	}
	return out
}

// karpenterPool is the suite's default NodePool: every capacity type, nothing else.
func karpenterPool(opts ...poolOpt) *v1.NodePool {
	return nodePool("default", append([]poolOpt{withRequirements(req(v1.LabelCapacityType, v1.OpIn, v1.CapacityTypeSpot, v1.CapacityTypeOnDemand, v1.CapacityTypeReserved))}, opts...)...)
}

// onKarpenterCatalog plans against karpenterCatalog instead of the test catalogue.
func onKarpenterCatalog(i *Input) {
	cat := karpenterCatalog()
	for _, np := range i.NodePools {
		i.InstanceTypes[np.Name] = cat
	}
}

func describePlan(r *Results) string {
	byType := map[string]int{}
	for _, nc := range r.NodeClaims {
		byType[nc.InstanceType.Name]++
	}
	return fmt.Sprintf("%d claims %v at $%.4f/h, %d unschedulable", len(r.NodeClaims), byType, r.PricePerHour(), len(r.Unschedulable))
}
