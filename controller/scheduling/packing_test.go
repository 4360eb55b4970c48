package scheduling_test

import (
	"testing"

	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/controller/catalog"
	"github.com/dovetail-sh/dovetail/controller/scheduling"
	"github.com/dovetail-sh/dovetail/controller/scheduling/schedulingtest"
)

// TestGeneratedWorkloadIsPackedTightAndCorrectly plans the benchmark's mixed workload
// and checks both that it costs within 5% of the price lower bound and that every
// constraint holds on the result.
func TestGeneratedWorkloadIsPackedTightAndCorrectly(t *testing.T) {
	if testing.Short() {
		t.Skip("plans 5000 pods")
	}
	cat, err := catalog.EmbeddedAWS()
	if err != nil {
		t.Fatal(err)
	}
	types := cat.ForEngine(scheduling.DefaultAllocatableSettings())
	pool := schedulingtest.BenchPool()
	compatible := schedulingtest.PoolTypes(pool, types)
	zones := []string{"us-east-1a", "us-east-1b", "us-east-1c"}
	pods := schedulingtest.GenerateWorkload(5000, zones, 7)
	r := scheduling.Solve(scheduling.Input{Pods: pods, NodePools: []*v1.NodePool{pool}, InstanceTypes: map[string][]*scheduling.InstanceType{"default": types}})
	if len(r.Unschedulable) != 0 {
		t.Fatalf("%d pods unschedulable, first: %s", len(r.Unschedulable), r.Unschedulable[0].Reason)
	}
	bound := schedulingtest.PriceLowerBound(pods, compatible)
	if ratio := r.PricePerHour() / bound; ratio > 1.05 {
		t.Errorf("plan costs %.3f× the lower bound ($%.2f vs $%.2f), want at most 1.05×", ratio, r.PricePerHour(), bound)
	}
	placed := 0
	zoneCounts := map[string]map[string]int{} // app -> zone -> pods
	for _, nc := range r.NodeClaims {
		placed += len(nc.Pods)
		var used scheduling.Resources
		antiGroups, spreadApps := map[string]bool{}, map[string]bool{}
		for _, p := range nc.Pods {
			used = used.Add(scheduling.PodRequests(p))
			if g, ok := p.Labels["anti"]; ok {
				if antiGroups[g] {
					t.Errorf("claim %s holds two pods of anti-affinity group %s", nc.Name, g)
				}
				antiGroups[g] = true
			}
			for _, c := range p.Spec.TopologySpreadConstraints {
				switch c.TopologyKey {
				case v1.LabelHostname:
					if spreadApps[p.Labels["app"]] {
						t.Errorf("claim %s holds two pods of hostname-spread %s", nc.Name, p.Labels["app"])
					}
					spreadApps[p.Labels["app"]] = true
				case v1.LabelTopologyZone:
					zone, ok := nc.Requirements[v1.LabelTopologyZone].Any()
					if !ok || nc.Requirements[v1.LabelTopologyZone].Len() != 1 {
						t.Fatalf("claim %s holds zone-spread pods but its zone is not pinned", nc.Name)
					}
					if zoneCounts[p.Labels["app"]] == nil {
						zoneCounts[p.Labels["app"]] = map[string]int{}
					}
					zoneCounts[p.Labels["app"]][zone]++
				}
			}
			if sel := p.Spec.NodeSelector[v1.LabelArch]; sel != "" {
				if got, _ := nc.InstanceType.Requirements[v1.LabelArch].Any(); got != sel {
					t.Errorf("pod %s wants %s, claim %s is %s", p.Name, sel, nc.Name, got)
				}
			}
			if sel := p.Spec.NodeSelector[v1.LabelTopologyZone]; sel != "" && nc.Offering.Zone != sel {
				t.Errorf("pod %s wants zone %s, claim %s launches in %s", p.Name, sel, nc.Name, nc.Offering.Zone)
			}
		}
		if !used.Fits(nc.InstanceType.Allocatable) || !nc.Requests.Fits(nc.InstanceType.Allocatable) {
			t.Errorf("claim %s (%s) is overcommitted", nc.Name, nc.InstanceType.Name)
		}
	}
	for app, counts := range zoneCounts {
		lo, hi := len(pods), 0
		for _, z := range zones {
			lo, hi = min(lo, counts[z]), max(hi, counts[z])
		}
		if hi-lo > 1 {
			t.Errorf("%s is spread %v across zones, skew %d > 1", app, counts, hi-lo)
		}
	}
	if placed != len(pods) {
		t.Errorf("placed %d of %d pods", placed, len(pods))
	}
}
