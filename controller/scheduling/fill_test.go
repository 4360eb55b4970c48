package scheduling

import (
	"math"
	"testing"

	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
)

// TestFillLeavesNoResourceStrandedWhenTheMixFits packs two shapes whose total demand
// is close to the node's own cpu:memory ratio: memory-heavy pods and cpu-heavy ones. Taking
// the largest pod that fits (what a dot-product fill does) fills a node's memory with
// memory-heavy pods and strands half its cpu, and the cpu-heavy pods then need nodes
// of their own. Filling towards the demand's mix needs no more nodes than the demand
// takes in its binding resource, plus one for the rounding.
func TestFillLeavesNoResourceStrandedWhenTheMixFits(t *testing.T) {
	node := makeInstanceType(typeSpec{"c6g.16xlarge", "arm64", "64", "128Gi", 737, 0, 2.176})
	for _, tc := range []struct {
		name               string
		heavy, small       int
		heavyCPU, heavyMem string
	}{
		{"2 cpu 8Gi pods beside 1 cpu 1Gi", 100, 400, "2", "8Gi"},
		{"1 cpu 6Gi pods beside 1 cpu 1Gi", 60, 600, "1", "6Gi"},
		{"a few 2 cpu 10Gi pods beside 1 cpu 1Gi", 20, 900, "2", "10Gi"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := append(pods(tc.heavy, "heavy", tc.heavyCPU, tc.heavyMem), pods(tc.small, "small", "1", "1Gi")...)
			r := solve(t, in, []*v1.NodePool{nodePool("default")}, func(in *Input) {
				in.InstanceTypes["default"] = []*InstanceType{node}
			})
			if len(r.Unschedulable) > 0 {
				t.Fatalf("%d pods unschedulable: %s", len(r.Unschedulable), r.Unschedulable[0].Reason)
			}
			var demand Resources
			for _, p := range in {
				demand = demand.Add(PodRequests(p))
			}
			a := node.Allocatable
			need := math.Ceil(math.Max(float64(demand.MilliCPU)/float64(a.MilliCPU), float64(demand.Memory)/float64(a.Memory)))
			if got := len(r.NodeClaims); float64(got) > need+1 {
				for _, nc := range r.NodeClaims {
					var used Resources
					for _, p := range nc.Pods {
						used = used.Add(PodRequests(p))
					}
					t.Logf("node with %d pods: %.0f%% cpu, %.0f%% memory", len(nc.Pods), 100*float64(used.MilliCPU)/float64(a.MilliCPU), 100*float64(used.Memory)/float64(a.Memory))
				}
				t.Errorf("planned %d nodes; the demand fills %.0f", got, need)
			}
		})
	}
}
