package scheduling

import (
	"fmt"
	"sort"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/controller/scheduling/defaultspread"
)

// The scenarios of Karpenter's scheduling suite (kubernetes-sigs/karpenter,
// pkg/controllers/provisioning/scheduling and the Daemonsets and volume topology
// contexts of pkg/controllers/provisioning), written as our own table: the same
// workload on the same catalogue (karpenterCatalog), and the outcome Karpenter's
// test asserts. Where we differ on purpose the scenario says so and why; its
// outcome is ours. docs/scheduling-parity.md lists them. Scenarios whose point is
// Karpenter's own machinery (several provisioning rounds against its cluster
// state, CSI attach limits, metrics) are left out there too, with why.

// scenario is one of them.
type scenario struct {
	name string
	// differs says why our outcome is not Karpenter's, where it is not.
	differs string
	pools   []*v1.NodePool
	pods    []*corev1.Pod
	nodes   []*ExistingNode
	daemons []*corev1.Pod
	volumes *Volumes
	// types replaces the catalogue.
	types []*InstanceType
	// defaults are the cluster's default spread constraints (--scheduler-config),
	// applied to pods as the controller's view does, with selectors deduced from
	// workloads.
	defaults  []corev1.TopologySpreadConstraint
	workloads defaultspread.Workloads
	check     func(t *testing.T, r *Results)
}

const zone1, zone2, zone3 = "test-zone-1", "test-zone-2", "test-zone-3"

var testLabels = map[string]string{"test": "test"}

func labelled(p *corev1.Pod) { p.Labels["test"] = "test" }

func spread(key string, maxSkew int32) podOpt {
	return withSpread(key, maxSkew, corev1.DoNotSchedule, testLabels)
}

func withMinDomains(n int32) podOpt {
	return func(p *corev1.Pod) {
		for i := range p.Spec.TopologySpreadConstraints {
			p.Spec.TopologySpreadConstraints[i].MinDomains = &n
		}
	}
}

func inZones(zones ...string) podOpt {
	return withRequiredTerms([]corev1.NodeSelectorRequirement{{Key: v1.LabelTopologyZone, Operator: corev1.NodeSelectorOpIn, Values: zones}})
}

func withNamespace(ns string) podOpt { return func(p *corev1.Pod) { p.Namespace = ns } }

func withPreferredAffinity(anti bool, key string, match map[string]string) podOpt {
	return func(p *corev1.Pod) {
		a := ensureAffinity(p)
		term := corev1.WeightedPodAffinityTerm{Weight: 50, PodAffinityTerm: corev1.PodAffinityTerm{TopologyKey: key, LabelSelector: &metav1.LabelSelector{MatchLabels: match}}}
		if anti {
			if a.PodAntiAffinity == nil {
				a.PodAntiAffinity = &corev1.PodAntiAffinity{}
			}
			a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution = append(a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution, term)
			return
		}
		if a.PodAffinity == nil {
			a.PodAffinity = &corev1.PodAffinity{}
		}
		a.PodAffinity.PreferredDuringSchedulingIgnoredDuringExecution = append(a.PodAffinity.PreferredDuringSchedulingIgnoredDuringExecution, term)
	}
}

func withInit(cpu, memory string) podOpt {
	return func(p *corev1.Pod) {
		p.Spec.InitContainers = append(p.Spec.InitContainers, pod("init", cpu, memory).Spec.Containers[0])
	}
}

func withLimits(cpu, memory string) podOpt {
	return func(p *corev1.Pod) {
		p.Spec.Containers[0].Resources.Limits = corev1.ResourceList{corev1.ResourceCPU: mustQuantity(cpu), corev1.ResourceMemory: mustQuantity(memory)}
		delete(p.Spec.Containers[0].Resources.Requests, corev1.ResourceMemory)
	}
}

func withPoolTaint(key, value string, effect corev1.TaintEffect) poolOpt {
	return func(np *v1.NodePool) {
		np.Spec.Template.Spec.Taints = append(np.Spec.Template.Spec.Taints, corev1.Taint{Key: key, Value: value, Effect: effect})
	}
}

func withTolerationOf(key, value string) podOpt {
	return func(p *corev1.Pod) {
		p.Spec.Tolerations = append(p.Spec.Tolerations, corev1.Toleration{Key: key, Operator: corev1.TolerationOpEqual, Value: value})
	}
}

func withName(name string) poolOpt { return func(np *v1.NodePool) { np.Name = name } }

func poolReqs(reqs ...v1.NodePoolRequirement) poolOpt { return withRequirements(reqs...) }

// existingNode is a node with room of its own, carrying bound pods.
func existingNode(name string, nodeLabels map[string]string, cpu, memory string, bound ...*corev1.Pod) *ExistingNode {
	labels := map[string]string{v1.LabelHostname: name}
	for k, v := range nodeLabels {
		labels[k] = v
	}
	size := FromResourceList(corev1.ResourceList{corev1.ResourceCPU: mustQuantity(cpu), corev1.ResourceMemory: mustQuantity(memory), corev1.ResourcePods: mustQuantity("110")})
	for _, p := range bound {
		p.Spec.NodeName = name
	}
	return &ExistingNode{Name: name, Labels: labels, Capacity: size, Allocatable: size, Pods: bound}
}

// placedPods counts the pods planned onto new and existing nodes.
func placedPods(r *Results) int {
	n := 0
	for _, nc := range r.NodeClaims {
		n += len(nc.Pods)
	}
	for _, e := range r.Existing {
		n += len(e.Pods)
	}
	return n
}

// skew is the count of pods labelled test=test per value of key, over new claims,
// existing nodes' placements and the pods bound to existing nodes, sorted.
func skew(r *Results, nodes []*ExistingNode, key string) []int {
	counts := map[string]int{}
	count := func(pods []*corev1.Pod, domain string, ok bool) {
		if !ok {
			return
		}
		for _, p := range pods {
			if p.Labels["test"] == "test" {
				counts[domain]++
			}
		}
	}
	for _, nc := range r.NodeClaims {
		d := label(nc, key)
		if key == v1.LabelHostname {
			d = nc.Name
		}
		count(nc.Pods, d, d != "")
	}
	for _, e := range r.Existing {
		d, ok := e.Node.Labels[key]
		count(e.Pods, d, ok)
	}
	for _, n := range nodes {
		d, ok := n.Labels[key]
		count(n.Pods, d, ok)
	}
	out := []int{}
	for _, c := range counts {
		out = append(out, c)
	}
	sort.Ints(out)
	return out
}

// expect checks the number of pods placed, new nodes (-1: any), and the instance
// type of every new node ("": any).
func expect(placed, nodes int, instanceType string) func(*testing.T, *Results) {
	return func(t *testing.T, r *Results) {
		t.Helper()
		if got := placedPods(r); got != placed {
			t.Errorf("%d pods placed, want %d (%s)", got, placed, describePlan(r))
		}
		if nodes >= 0 && len(r.NodeClaims) != nodes {
			t.Errorf("%d new nodes, want %d (%s)", len(r.NodeClaims), nodes, describePlan(r))
		}
		for _, nc := range r.NodeClaims {
			if instanceType != "" && nc.InstanceType.Name != instanceType {
				t.Errorf("claim %s is a %s, want %s", nc.Name, nc.InstanceType.Name, instanceType)
			}
		}
	}
}

func expectSkew(key string, want ...int) func(*testing.T, *Results) {
	return expectSkewWith(nil, key, want...)
}

func expectSkewWith(nodes []*ExistingNode, key string, want ...int) func(*testing.T, *Results) {
	return func(t *testing.T, r *Results) {
		t.Helper()
		if got := skew(r, nodes, key); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("pods per %s: %v, want %v (%s; unschedulable %v)", key, got, want, describePlan(r), r.Unschedulable)
		}
	}
}

func all(checks ...func(*testing.T, *Results)) func(*testing.T, *Results) {
	return func(t *testing.T, r *Results) {
		t.Helper()
		for _, c := range checks {
			c(t, r)
		}
	}
}

// together checks that the named pods share one node; apart that they do not.
func together(names ...string) func(*testing.T, *Results) {
	return func(t *testing.T, r *Results) {
		t.Helper()
		first := claimOf(r, names[0])
		for _, n := range names {
			if nc := claimOf(r, n); nc == nil || nc != first {
				t.Errorf("%v are not on one node (%s; unschedulable %v)", names, describePlan(r), r.Unschedulable)
				return
			}
		}
	}
}

func apart(key string, names ...string) func(*testing.T, *Results) {
	return func(t *testing.T, r *Results) {
		t.Helper()
		seen := map[string]string{}
		for _, n := range names {
			nc := claimOf(r, n)
			if nc == nil {
				t.Errorf("%s was not placed: %s", n, unschedulable(r, n))
				return
			}
			d := label(nc, key)
			if key == v1.LabelHostname {
				d = nc.Name
			}
			if other, ok := seen[d]; ok {
				t.Errorf("%s and %s share %s %s", other, n, key, d)
			}
			seen[d] = n
		}
	}
}

func notPlaced(names ...string) func(*testing.T, *Results) {
	return func(t *testing.T, r *Results) {
		t.Helper()
		for _, n := range names {
			if unschedulable(r, n) == "" {
				t.Errorf("%s was placed; want it unschedulable", n)
			}
		}
	}
}

func inZone(zone string, names ...string) func(*testing.T, *Results) {
	return func(t *testing.T, r *Results) {
		t.Helper()
		for _, n := range names {
			nc := claimOf(r, n)
			if nc == nil {
				t.Errorf("%s was not placed: %s", n, unschedulable(r, n))
				continue
			}
			if z := label(nc, v1.LabelTopologyZone); z != zone {
				t.Errorf("%s is in %s, want %s", n, z, zone)
			}
		}
	}
}

func onNodeOfSize(cpu int64, names ...string) func(*testing.T, *Results) {
	return func(t *testing.T, r *Results) {
		t.Helper()
		for _, n := range names {
			nc := claimOf(r, n)
			if nc == nil {
				t.Errorf("%s was not placed: %s", n, unschedulable(r, n))
				continue
			}
			if got := nc.InstanceType.Capacity.MilliCPU / 1000; got != cpu {
				t.Errorf("%s is on a %d-cpu %s, want a %d-cpu node (daemonset overhead %s)", n, got, nc.InstanceType.Name, cpu, nc.Requests)
			}
		}
	}
}

func named(name string, opts ...podOpt) *corev1.Pod { return pod(name, "0", "0", opts...) }

func sized(name, cpu, memory string, opts ...podOpt) *corev1.Pod {
	return pod(name, cpu, memory, opts...)
}

func bulk(n int, prefix string, opts ...podOpt) []*corev1.Pod {
	return pods(n, prefix, "0", "0", opts...)
}

func join(groups ...[]*corev1.Pod) []*corev1.Pod {
	var out []*corev1.Pod
	for _, g := range groups {
		out = append(out, g...)
	}
	return out
}

func runScenarios(t *testing.T, scenarios []scenario) {
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			pools := sc.pools
			if pools == nil {
				pools = []*v1.NodePool{karpenterPool()}
			}
			podsIn := sc.pods
			if len(sc.defaults) > 0 {
				injector := defaultspread.NewInjector(sc.defaults, sc.workloads)
				podsIn = make([]*corev1.Pod, len(sc.pods))
				for i, p := range sc.pods {
					podsIn[i] = injector.Pod(p)
				}
			}
			in := Input{Pods: podsIn, Nodes: sc.nodes, NodePools: pools, DaemonSetPods: sc.daemons, InstanceTypes: map[string][]*InstanceType{}}
			cat := sc.types
			if cat == nil {
				cat = karpenterCatalog()
			}
			for _, np := range pools {
				in.InstanceTypes[np.Name] = cat
			}
			if sc.volumes != nil {
				in.VolumeAttachments = map[types.UID]AttachedVolumes{}
				for _, n := range sc.nodes {
					for _, p := range n.Pods {
						p.UID = types.UID(p.Namespace + "/" + p.Name)
						in.VolumeAttachments[p.UID] = sc.volumes.Attachments(p)
					}
				}
				in.VolumeRequirements = map[types.UID]VolumeTopology{}
				var pending []*corev1.Pod
				for _, p := range sc.pods {
					p.UID = types.UID(p.Namespace + "/" + p.Name)
					vt, err := sc.volumes.Requirements(p)
					if err != nil {
						// The snapshot refuses such a pod before the engine sees it.
						continue
					}
					in.VolumeRequirements[p.UID] = vt
					in.VolumeAttachments[p.UID] = sc.volumes.Attachments(p)
					pending = append(pending, p)
				}
				in.Pods = pending
			}
			sc.check(t, Solve(in))
		})
	}
}

func TestKarpenterSuiteBinpacking(t *testing.T) {
	amd64 := withNodeSelector(v1.LabelArch, v1.ArchitectureAmd64)
	overhead := func(p *corev1.Pod) { p.Spec.Overhead = corev1.ResourceList{corev1.ResourceCPU: mustQuantity("2")} }
	runScenarios(t, []scenario{
		{name: "should schedule a small pod on the smallest instance", pods: []*corev1.Pod{sized("p", "0", "100M")}, check: expect(1, 1, "small-instance-type")},
		{name: "should schedule a small pod on the smallest possible instance type", pods: []*corev1.Pod{sized("p", "0", "2000M")}, check: expect(1, 1, "small-instance-type")},
		{name: "should take pod runtime class into consideration", pods: []*corev1.Pod{sized("p", "1", "0", overhead)}, check: expect(1, 1, "default-instance-type")},
		{name: "should schedule multiple small pods on the smallest possible instance type", pods: pods(5, "p", "0", "10M"), check: expect(5, 1, "small-instance-type")},
		{name: "should create new nodes when a node is at capacity", pods: pods(40, "p", "0", "1.8G", amd64), check: expect(40, 20, "default-instance-type")},
		{name: "should pack small and large pods together", pods: join(pods(40, "large", "0", "1.8G", amd64), pods(20, "small", "0", "400M", amd64)), check: expect(60, 20, "default-instance-type")},
		{name: "should not schedule pods that exceed every instance type's capacity", pods: []*corev1.Pod{sized("p", "0", "2Ti")}, check: expect(0, 0, "")},
		{name: "should create new nodes when a node is at capacity due to pod limits per node", pods: pods(25, "p", "1m", "1m", amd64), check: expect(25, 5, "small-instance-type")},
		{name: "should take into account initContainer resource requests when binpacking", pods: []*corev1.Pod{sized("p", "1", "1Gi", withInit("2", "1Gi"))}, check: expect(1, 1, "default-instance-type")},
		{name: "should not schedule pods when initContainer resource requests are greater than available instance types", pods: []*corev1.Pod{sized("p", "1", "1Gi", withInit("2", "1Ti"))}, check: expect(0, 0, "")},
		{name: "should schedule pods with the same host port to different nodes", pods: []*corev1.Pod{named("a", withHostPort(8080)), named("b", withHostPort(8080))}, check: all(expect(2, 2, ""), apart(v1.LabelHostname, "a", "b"))},
	})
}

func TestKarpenterSuiteTopology(t *testing.T) {
	pool := func(opts ...poolOpt) []*v1.NodePool { return []*v1.NodePool{karpenterPool(opts...)} }
	zonesIn := func(zones ...string) poolOpt {
		return poolReqs(req(v1.LabelCapacityType, v1.OpExists), req(v1.LabelTopologyZone, v1.OpIn, zones...))
	}
	zoneNode := existingNode("n1", map[string]string{v1.LabelTopologyZone: zone1}, "100m", "100Mi", named("n1-p", labelled))
	fakeLabel := func(values ...string) v1.NodePoolRequirement { return req("fake-label", v1.OpIn, values...) }
	honor, ignore := corev1.NodeInclusionPolicyHonor, corev1.NodeInclusionPolicyIgnore
	taintedNode := func(name, value string) *ExistingNode {
		n := existingNode(name, map[string]string{"fake-label": value}, "100m", "100Mi")
		n.Taints = []corev1.Taint{{Key: "taintname", Value: "taintvalue", Effect: corev1.TaintEffectNoSchedule}}
		return n
	}
	mismatchedNode := func(name, value string) *ExistingNode {
		return existingNode(name, map[string]string{"fake-label": value, "selector": "mismatch"}, "100m", "100Mi")
	}
	taintedNodes := []*ExistingNode{taintedNode("foo-node", "foo"), taintedNode("bar-node", "bar")}
	mismatchedNodes := []*ExistingNode{mismatchedNode("foo-node", "foo"), mismatchedNode("bar-node", "bar")}
	runScenarios(t, []scenario{
		{name: "should not spread when a nil label selector is defined", pods: bulk(2, "p", labelled, withSpread(v1.LabelTopologyZone, 1, corev1.DoNotSchedule, nil), func(p *corev1.Pod) { p.Spec.TopologySpreadConstraints[0].LabelSelector = nil }),
			check: expectSkew(v1.LabelTopologyZone, 2)},
		{name: "Zonal: should balance pods across zones (match labels)", pods: bulk(4, "p", labelled, spread(v1.LabelTopologyZone, 1)), check: expectSkew(v1.LabelTopologyZone, 1, 1, 2)},
		{name: "Zonal: should respect NodePool zonal constraints (subset) with requirements", pools: pool(zonesIn(zone1, zone2)), pods: bulk(4, "p", labelled, spread(v1.LabelTopologyZone, 1)), check: expectSkew(v1.LabelTopologyZone, 2, 2)},
		{name: "Zonal: should respect NodePool zonal constraints (subset) with labels", pools: pool(withLabel(v1.LabelTopologyZone, zone1)), pods: bulk(4, "p", labelled, spread(v1.LabelTopologyZone, 1)), check: expectSkew(v1.LabelTopologyZone, 4)},
		{name: "Zonal: should respect NodePool zonal constraints (subset) with labels across NodePools",
			pools: []*v1.NodePool{karpenterPool(withName("a"), zonesIn(zone1, zone2), withLabel(v1.LabelTopologyZone, zone1)), karpenterPool(withName("b"), withLabel(v1.LabelTopologyZone, zone2))},
			pods:  bulk(4, "p", labelled, spread(v1.LabelTopologyZone, 1)), check: expectSkew(v1.LabelTopologyZone, 2, 2)},
		{name: "Zonal: should not violate max-skew when unsat = do not schedule", pools: pool(zonesIn(zone2, zone3)), nodes: []*ExistingNode{zoneNode},
			pods: pods(10, "p", "1100m", "0", labelled, spread(v1.LabelTopologyZone, 1)), check: all(expectSkewWith([]*ExistingNode{zoneNode}, v1.LabelTopologyZone, 1, 2, 2), expect(4, -1, ""))},
		{name: "Zonal: should respect minDomains constraints", pools: pool(zonesIn(zone1, zone2)), pods: bulk(3, "p", labelled, spread(v1.LabelTopologyZone, 1), withMinDomains(3)),
			check: all(expectSkew(v1.LabelTopologyZone, 1, 1), expect(2, -1, ""))},
		{name: "Zonal: satisfied minDomains constraints (equal) should allow expected pod scheduling", pools: pool(zonesIn(zone1, zone2, zone3)), pods: bulk(11, "p", labelled, spread(v1.LabelTopologyZone, 1), withMinDomains(3)),
			check: expectSkew(v1.LabelTopologyZone, 3, 4, 4)},
		{name: "Zonal: satisfied minDomains constraints (greater than minimum) should allow expected pod scheduling", pools: pool(zonesIn(zone1, zone2, zone3)), pods: bulk(11, "p", labelled, spread(v1.LabelTopologyZone, 1), withMinDomains(2)),
			check: expectSkew(v1.LabelTopologyZone, 3, 4, 4)},
		{name: "Zonal: should handle interdependent selectors", pods: bulk(5, "p", spread(v1.LabelHostname, 1)), check: expect(5, 1, "")},
		{name: "Hostname: should balance pods across nodes", pods: bulk(4, "p", labelled, spread(v1.LabelHostname, 1)), check: all(expectSkew(v1.LabelHostname, 1, 1, 1, 1), expect(4, 4, ""))},
		{name: "Hostname: should balance pods on the same hostname up to maxskew", pods: bulk(4, "p", labelled, spread(v1.LabelHostname, 4)), check: expect(4, 1, "")},
		{name: "Hostname: balance multiple deployments with hostname topology spread & varying arch",
			pods: join(bulk(2, "a", withPodLabel("app", "app1"), withSpread(v1.LabelHostname, 1, corev1.DoNotSchedule, map[string]string{"app": "app1"}), withNodeSelector(v1.LabelArch, v1.ArchitectureAmd64)),
				bulk(2, "b", withPodLabel("app", "app2"), withSpread(v1.LabelHostname, 1, corev1.DoNotSchedule, map[string]string{"app": "app2"}), withNodeSelector(v1.LabelArch, v1.ArchitectureArm64))),
			check: expect(4, 4, "")},
		{name: "CapacityType: should balance pods across capacity types", pods: bulk(4, "p", labelled, spread(v1.LabelCapacityType, 1)), check: expectSkew(v1.LabelCapacityType, 2, 2)},
		{name: "CapacityType: should not violate max-skew when unsat = do not schedule (capacity type)", pools: pool(poolReqs(req(v1.LabelCapacityType, v1.OpIn, v1.CapacityTypeOnDemand))),
			nodes: []*ExistingNode{existingNode("n1", map[string]string{v1.LabelCapacityType: v1.CapacityTypeSpot}, "100m", "100Mi", named("n1-p", labelled))},
			pods:  pods(5, "p", "1100m", "0", labelled, spread(v1.LabelCapacityType, 1)), check: expect(2, -1, "")},
		{name: "MatchLabelKeys: should support matchLabelKeys",
			pods: join(bulk(2, "a", labelled, withPodLabel("test-label", "value-a"), spread(v1.LabelHostname, 1), withMatchLabelKeys("test-label")),
				bulk(2, "b", labelled, withPodLabel("test-label", "value-b"), spread(v1.LabelHostname, 1), withMatchLabelKeys("test-label"))),
			check: all(expect(4, 2, ""), expectSkew(v1.LabelHostname, 2, 2))},
		{name: "MatchLabelKeys: should ignore unknown labels specified in matchLabelKeys", pods: bulk(4, "p", labelled, spread(v1.LabelHostname, 1), withMatchLabelKeys("test-label")),
			check: expectSkew(v1.LabelHostname, 1, 1, 1, 1)},
		{name: "NodeTaintsPolicy: should balance pods across a label (NodeTaintsPolicy=ignore)", pools: pool(withLabel("fake-label", "baz")), nodes: taintedNodes,
			pods: pods(5, "p", "1", "0", labelled, spread("fake-label", 1), withNodeInclusion(nil, &ignore)), check: expect(1, 1, "")},
		{name: "NodeTaintsPolicy: should balance pods across a label (NodeTaintsPolicy=honor)", pools: pool(withLabel("fake-label", "baz")), nodes: taintedNodes,
			pods: pods(5, "p", "1", "0", labelled, spread("fake-label", 1), withNodeInclusion(nil, &honor)), check: expect(5, -1, "")},
		{name: "NodeTaintsPolicy: should balance pods across a label when discovered from the nodepool (NodeTaintsPolicy=ignore)",
			pools: []*v1.NodePool{karpenterPool(withName("a"), poolReqs(req(v1.LabelCapacityType, v1.OpExists), fakeLabel("foo"))), karpenterPool(withName("b"), poolReqs(req(v1.LabelCapacityType, v1.OpExists), fakeLabel("bar")), withPoolTaint("taint-key", "taint-value", corev1.TaintEffectNoSchedule))},
			pods:  bulk(2, "p", labelled, spread("fake-label", 1), withNodeInclusion(nil, &ignore)), check: expect(1, 1, "")},
		{name: "NodeTaintsPolicy: should balance pods across a label when discovered from the nodepool (NodeTaintsPolicy=honor)",
			pools: []*v1.NodePool{karpenterPool(withName("a"), poolReqs(req(v1.LabelCapacityType, v1.OpExists), fakeLabel("foo"))), karpenterPool(withName("b"), poolReqs(req(v1.LabelCapacityType, v1.OpExists), fakeLabel("bar")), withPoolTaint("taint-key", "taint-value", corev1.TaintEffectNoSchedule))},
			pods:  bulk(2, "p", labelled, spread("fake-label", 1), withNodeInclusion(nil, &honor)), check: expect(2, -1, "")},
		{name: "NodeTaintsPolicy: should balance pods across a label when mutually exclusive NodePools (by taints) share domains (NodeTaintsPolicy=honor)",
			pools: []*v1.NodePool{karpenterPool(withName("pool-0"), poolReqs(req(v1.LabelCapacityType, v1.OpExists), fakeLabel("foo", "bar")), withPoolTaint("taint-key", "nodepool-0", corev1.TaintEffectNoSchedule)),
				karpenterPool(withName("pool-1"), poolReqs(req(v1.LabelCapacityType, v1.OpExists), fakeLabel("foo", "baz")), withPoolTaint("taint-key", "nodepool-1", corev1.TaintEffectNoSchedule))},
			pods: join(bulk(2, "zero", labelled, spread("fake-label", 1), withTolerationOf("taint-key", "nodepool-0"), withNodeInclusion(nil, &honor)),
				bulk(4, "one", labelled, spread("fake-label", 1), withTolerationOf("taint-key", "nodepool-1"), withNodeInclusion(nil, &honor))),
			check: all(expect(6, -1, ""), expectSkew("fake-label", 1, 2, 3))},
		{name: "NodeAffinityPolicy: should balance pods across a label (NodeAffinityPolicy=ignore)", pools: pool(withLabel("fake-label", "baz"), withLabel("selector", "value")), nodes: mismatchedNodes,
			pods: pods(5, "p", "1", "0", labelled, withNodeSelector("selector", "value"), spread("fake-label", 1), withNodeInclusion(&ignore, nil)), check: expect(1, 1, "")},
		{name: "NodeAffinityPolicy: should balance pods across a label (NodeAffinityPolicy=honor)", pools: pool(withLabel("fake-label", "baz"), withLabel("selector", "value")), nodes: mismatchedNodes,
			pods: pods(5, "p", "1", "0", labelled, withNodeSelector("selector", "value"), spread("fake-label", 1), withNodeInclusion(&honor, nil)), check: expect(5, -1, "")},
		{name: "Combined Zonal Topology and Node Affinity: should limit spread options by nodeSelector",
			pods:  join(bulk(5, "a", labelled, spread(v1.LabelTopologyZone, 1), withNodeSelector(v1.LabelTopologyZone, zone1)), bulk(10, "b", labelled, spread(v1.LabelTopologyZone, 1), withNodeSelector(v1.LabelTopologyZone, zone2))),
			check: expectSkew(v1.LabelTopologyZone, 5, 10)},
		{name: "Combined Zonal Topology and Node Affinity: should limit spread options by node requirements", pods: bulk(10, "p", labelled, spread(v1.LabelTopologyZone, 1), inZones(zone1, zone2)),
			check: expectSkew(v1.LabelTopologyZone, 5, 5)},
		{name: "Combined Zonal Topology and Node Affinity: should not limit spread options by preferred node affinity",
			pods:  bulk(6, "p", labelled, spread(v1.LabelTopologyZone, 1), withPreferred(10, corev1.NodeSelectorRequirement{Key: v1.LabelTopologyZone, Operator: corev1.NodeSelectorOpIn, Values: []string{zone1, zone2}})),
			check: expectSkew(v1.LabelTopologyZone, 2, 2, 2)},
		{name: "Combined Capacity Type Topology and Node Affinity: should limit spread options by nodeSelector",
			pods:  join(bulk(5, "a", labelled, withSpread(v1.LabelCapacityType, 1, corev1.ScheduleAnyway, testLabels), withNodeSelector(v1.LabelCapacityType, v1.CapacityTypeSpot)), bulk(5, "b", labelled, withSpread(v1.LabelCapacityType, 1, corev1.ScheduleAnyway, testLabels), withNodeSelector(v1.LabelCapacityType, v1.CapacityTypeOnDemand))),
			check: expectSkew(v1.LabelCapacityType, 5, 5)},
	})
}

func withMatchLabelKeys(keys ...string) podOpt {
	return func(p *corev1.Pod) {
		for i := range p.Spec.TopologySpreadConstraints {
			p.Spec.TopologySpreadConstraints[i].MatchLabelKeys = keys
		}
	}
}

func TestKarpenterSuitePodAffinity(t *testing.T) {
	s2 := map[string]string{"security": "s2"}
	sec := func(v string) podOpt { return withPodLabel("security", v) }
	tsc := bulk(10, "spread", labelled, spread(v1.LabelHostname, 1))
	anti := func(key string, match map[string]string) podOpt { return withAntiAffinity(key, match) }
	inverseAnti := func(name, zone string, preferred bool) *corev1.Pod {
		opt := anti(v1.LabelTopologyZone, s2)
		if preferred {
			opt = withPreferredAffinity(true, v1.LabelTopologyZone, s2)
		}
		return sized(name, "2", "0", withNodeSelector(v1.LabelTopologyZone, zone), opt)
	}
	runScenarios(t, []scenario{
		{name: "should respect pod affinity (hostname)", pods: join(tsc, []*corev1.Pod{named("aff1", sec("s2")), named("aff2", withAffinity(v1.LabelHostname, s2))}), check: together("aff1", "aff2")},
		{name: "should respect pod affinity (arch)", pods: []*corev1.Pod{
			sized("aff1", "2", "0", sec("s2"), withNodeSelector(v1.LabelArch, v1.ArchitectureArm64), withSpread(v1.LabelHostname, 1, corev1.DoNotSchedule, s2)),
			sized("aff2", "1", "0", sec("s2"), withAffinity(v1.LabelArch, s2), withSpread(v1.LabelHostname, 1, corev1.DoNotSchedule, s2))},
			check: all(expect(2, 2, ""), apart(v1.LabelHostname, "aff1", "aff2"), func(t *testing.T, r *Results) {
				if a, b := label(claimOf(r, "aff1"), v1.LabelArch), label(claimOf(r, "aff2"), v1.LabelArch); a != b {
					t.Errorf("arch %s and %s, want the same", a, b)
				}
			})},
		{name: "should respect self pod affinity (hostname)", pods: bulk(3, "p", sec("s2"), withAffinity(v1.LabelHostname, s2)), check: together("p-0", "p-1", "p-2")},
		{name: "should respect self pod affinity for first empty topology domain only (hostname)", pods: bulk(10, "p", sec("s2"), withAffinity(v1.LabelHostname, s2)), check: expect(5, 1, "")},
		{name: "should respect self pod affinity (zone w/ constraint)", pods: bulk(3, "p", sec("s2"), withAffinity(v1.LabelTopologyZone, s2), inZones(zone3)),
			check: all(together("p-0", "p-1", "p-2"), inZone(zone3, "p-0"))},
		{name: "should allow two nodes to be created when two pods with matching affinities have incompatible selectors",
			pods:  []*corev1.Pod{named("a", sec("s1"), withAffinity(v1.LabelTopologyZone, map[string]string{"security": "s1"}), inZones(zone2)), named("b", sec("s1"), withAffinity(v1.LabelTopologyZone, map[string]string{"security": "s1"}), inZones(zone3))},
			check: all(expect(2, 2, ""), inZone(zone2, "a"), inZone(zone3, "b"))},
		{name: "should allow violation of preferred pod affinity", pods: join(tsc, []*corev1.Pod{named("pref", withPreferredAffinity(false, v1.LabelHostname, s2))}), check: expect(11, -1, "")},
		{name: "should allow violation of preferred pod anti-affinity", pods: join(bulk(3, "t", labelled, spread(v1.LabelTopologyZone, 1)), bulk(10, "pref", withPreferredAffinity(true, v1.LabelTopologyZone, testLabels))), check: expect(13, -1, "")},
		{name: "should separate nodes using simple pod anti-affinity on hostname", pods: []*corev1.Pod{named("aff2", anti(v1.LabelHostname, s2)), named("aff1", sec("s2"))}, check: apart(v1.LabelHostname, "aff1", "aff2")},
		{name: "should not violate pod anti-affinity on zone", pods: []*corev1.Pod{
			sized("z1", "2", "0", sec("s2"), withNodeSelector(v1.LabelTopologyZone, zone1)), sized("z2", "2", "0", sec("s2"), withNodeSelector(v1.LabelTopologyZone, zone2)),
			sized("z3", "2", "0", sec("s2"), withNodeSelector(v1.LabelTopologyZone, zone3)), named("aff", anti(v1.LabelTopologyZone, s2))},
			check: all(expect(3, -1, ""), notPlaced("aff"))},
		{name: "should not violate pod anti-affinity on zone (other schedules first)",
			differs: "we fix a claim's zone when it is planned, so the pod with anti-affinity goes to another zone in the same round; Karpenter leaves it for a later round because the first pod's zone is not known yet",
			pods:    []*corev1.Pod{sized("first", "2", "0", sec("s2")), named("aff", anti(v1.LabelTopologyZone, s2))}, check: all(expect(2, 2, ""), apart(v1.LabelTopologyZone, "first", "aff"))},
		{name: "should not violate pod anti-affinity (arch)", pods: []*corev1.Pod{
			sized("aff1", "2", "0", sec("s2"), withNodeSelector(v1.LabelArch, v1.ArchitectureArm64), withSpread(v1.LabelHostname, 1, corev1.DoNotSchedule, s2)),
			sized("aff2", "1", "0", sec("s2"), anti(v1.LabelArch, s2), withSpread(v1.LabelHostname, 1, corev1.DoNotSchedule, s2))},
			check: all(expect(2, 2, ""), apart(v1.LabelArch, "aff1", "aff2"))},
		{name: "should violate preferred pod anti-affinity on zone (inverse)", pods: []*corev1.Pod{inverseAnti("a", zone1, true), inverseAnti("b", zone2, true), inverseAnti("c", zone3, true), named("aff", sec("s2"))}, check: expect(4, -1, "")},
		{name: "should not violate pod anti-affinity on zone (inverse)", pods: []*corev1.Pod{inverseAnti("a", zone1, false), inverseAnti("b", zone2, false), inverseAnti("c", zone3, false), named("aff", sec("s2"))}, check: all(expect(3, -1, ""), notPlaced("aff"))},
		{name: "should not violate pod anti-affinity on zone (inverse w/existing nodes)", nodes: []*ExistingNode{
			existingNode("n1", map[string]string{v1.LabelTopologyZone: zone1}, "100m", "1Gi", inverseAnti("a", zone1, false)),
			existingNode("n2", map[string]string{v1.LabelTopologyZone: zone2}, "100m", "1Gi", inverseAnti("b", zone2, false)),
			existingNode("n3", map[string]string{v1.LabelTopologyZone: zone3}, "100m", "1Gi", inverseAnti("c", zone3, false))},
			pods: []*corev1.Pod{named("aff", sec("s2"))}, check: notPlaced("aff")},
		{name: "should not schedule pods with affinity to a non-existent pod", pods: bulk(10, "p", withAffinity(v1.LabelTopologyZone, s2)), check: expect(0, 0, "")},
		{name: "should support pod affinity with zone topology (unconstrained target)",
			differs: "the target's claim gets its zone when it is planned, so its ten followers join it in the same round; Karpenter places them in a later round, once the target's node has a zone",
			pods:    join([]*corev1.Pod{named("target", sec("s2"))}, bulk(10, "p", withAffinity(v1.LabelTopologyZone, s2))), check: expect(11, -1, "")},
		{name: "should support pod affinity with zone topology (constrained target)", pods: join([]*corev1.Pod{named("target", sec("s2"), inZones(zone1))}, bulk(10, "p", withAffinity(v1.LabelTopologyZone, s2))),
			check: all(expect(11, -1, ""), inZone(zone1, "target", "p-0", "p-9"))},
		{name: "should handle multiple dependent affinities", pods: []*corev1.Pod{
			named("db", withPodLabel("type", "db")), named("web", withPodLabel("type", "web"), withAffinity(v1.LabelHostname, map[string]string{"type": "db"})),
			named("cache", withPodLabel("type", "cache"), withAffinity(v1.LabelHostname, map[string]string{"type": "web"})), named("ui", withPodLabel("type", "ui"), withAffinity(v1.LabelHostname, map[string]string{"type": "cache"}))},
			check: expect(4, -1, "")},
		{name: "should fail to schedule pods with unsatisfiable dependencies", pods: []*corev1.Pod{named("db", withPodLabel("type", "db"), withAffinity(v1.LabelHostname, map[string]string{"type": "web"}))}, check: notPlaced("db")},
		{name: "should filter pod affinity topologies by namespace, no matching pods", pods: join(tsc, []*corev1.Pod{named("aff1", sec("s2"), withNamespace("other-ns-no-match")), named("aff2", withAffinity(v1.LabelHostname, s2))}),
			check: notPlaced("aff2")},
		{name: "should filter pod affinity topologies by namespace, matching pods namespace list", pods: join(tsc, []*corev1.Pod{named("aff1", sec("s2"), withNamespace("other-ns-list")), named("aff2", withAffinity(v1.LabelHostname, s2), func(p *corev1.Pod) {
			p.Spec.Affinity.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution[0].Namespaces = []string{"other-ns-list"}
		})}), check: together("aff1", "aff2")},
	})
}

func TestKarpenterSuiteDaemonsets(t *testing.T) {
	ds := func(cpu, memory string, opts ...podOpt) []*corev1.Pod {
		return []*corev1.Pod{sized("ds", cpu, memory, opts...)}
	}
	fooBar := func(p *corev1.Pod) {
		ensureAffinity(p).NodeAffinity = &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{
			{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "foo", Operator: corev1.NodeSelectorOpIn, Values: []string{"voo"}}}},
			{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "foo", Operator: corev1.NodeSelectorOpIn, Values: []string{"bar"}}}}}}}
	}
	size := func(v string) podOpt { return withNodeSelector(v1.LabelInstanceSize, v) }
	defaulted := func(p *corev1.Pod) { p.Spec = WithRequestsFromLimits(p.Spec) }
	runScenarios(t, []scenario{
		{name: "should account for daemonsets", daemons: ds("2", "2Gi"), pods: []*corev1.Pod{sized("p", "1", "1Gi")}, check: onNodeOfSize(4, "p")},
		{name: "should account for daemonset hostports", daemons: ds("2", "2Gi", withHostPort(8080)), pods: []*corev1.Pod{sized("p", "1", "1Gi", withHostPort(8080))}, check: expect(0, 0, "")},
		{name: "should account for daemonsets (with startup taint)", pools: []*v1.NodePool{karpenterPool(withStartupTaint("foo.com/taint"))}, daemons: ds("2", "2Gi"), pods: []*corev1.Pod{sized("p", "1", "1Gi")}, check: onNodeOfSize(4, "p")},
		{name: "should not schedule if daemonset overhead is too large", daemons: ds("10000", "10000Gi"), pods: []*corev1.Pod{named("p")}, check: expect(0, 0, "")},
		{name: "should not schedule if resource requests are not defined and limits (requests) are too large", daemons: ds("1", "0", withLimits("10000", "10000Gi"), defaulted), pods: []*corev1.Pod{named("p")}, check: expect(0, 0, "")},
		{name: "should schedule based on the max resource requests of containers and initContainers", daemons: ds("1", "1Gi", withInit("3", "3Gi")), pods: []*corev1.Pod{named("p")}, check: onNodeOfSize(4, "p")},
		{name: "should not schedule if initContainer resources are too large", daemons: ds("0", "0", withInit("10000", "10000Gi")), pods: []*corev1.Pod{named("p")}, check: expect(0, 0, "")},
		{name: "should be able to schedule pods if resource requests and limits are not defined", daemons: ds("0", "0"), pods: []*corev1.Pod{named("p")}, check: expect(1, 1, "")},
		{name: "should ignore daemonsets without matching tolerations", pools: []*v1.NodePool{karpenterPool(withPoolTaint("foo", "bar", corev1.TaintEffectNoSchedule))}, daemons: ds("2", "2Gi"),
			pods: []*corev1.Pod{sized("p", "1", "1Gi", withToleration("foo"))}, check: onNodeOfSize(2, "p")},
		{name: "should ignore daemonsets with an invalid selector", daemons: ds("2", "2Gi", withNodeSelector("node", "invalid")), pods: []*corev1.Pod{sized("p", "1", "1Gi")}, check: onNodeOfSize(2, "p")},
		{name: "should ignore daemonsets when no instance types meet the daemonset requirements", daemons: ds("2", "2Gi", withNodeSelector(v1.LabelInstanceType, "non-existent-instance-type")), pods: []*corev1.Pod{sized("p", "1", "1Gi")}, check: onNodeOfSize(2, "p")},
		{name: "should account for daemonsets with a custom label nodeSelector that matches the nodepool", pools: []*v1.NodePool{karpenterPool(withLabel("purpose", "monitoring"))}, daemons: ds("2", "2Gi", withNodeSelector("purpose", "monitoring")),
			pods: []*corev1.Pod{sized("p", "1", "1Gi")}, check: onNodeOfSize(4, "p")},
		{name: "should filter out daemonsets based on instance type requirements", daemons: []*corev1.Pod{sized("small-ds", "1", "0", size("small")), sized("large-ds", "10", "0", size("large"))},
			pods: []*corev1.Pod{sized("p", "1", "1Gi")}, check: onNodeOfSize(4, "p")},
		{name: "should account daemonsets with NotIn operator and unspecified key", daemons: ds("2", "2Gi", withRequiredTerms([]corev1.NodeSelectorRequirement{{Key: "foo", Operator: corev1.NodeSelectorOpNotIn, Values: []string{"bar"}}})),
			pods: []*corev1.Pod{sized("p", "1", "1Gi", inZones(zone2))}, check: onNodeOfSize(4, "p")},
		{name: "should consider a daemonset schedulable with multiple node affinity terms", pools: []*v1.NodePool{karpenterPool(withLabel("foo", "bar"))}, daemons: ds("2", "2Gi", fooBar),
			pods: []*corev1.Pod{sized("p", "1", "1Gi")}, check: onNodeOfSize(4, "p")},
		{name: "should consider a daemonset schedulable with an incompatible node affinity preference", daemons: ds("2", "2Gi", withPreferred(10, corev1.NodeSelectorRequirement{Key: v1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: []string{"invalid"}})),
			pods: []*corev1.Pod{sized("p", "1", "1Gi")}, check: onNodeOfSize(4, "p")},
		{name: "should consider a daemonset schedulable with a PreferNoSchedule taint", pools: []*v1.NodePool{karpenterPool(withPoolTaint("test", "", corev1.TaintEffectPreferNoSchedule))}, daemons: ds("2", "2Gi"),
			pods: []*corev1.Pod{sized("p", "1", "1Gi")}, check: onNodeOfSize(4, "p")},
		{name: "should not account for daemonset hostports when daemonset would not schedule on selected node",
			daemons: []*corev1.Pod{sized("large-ds", "4", "4Gi", size("large"), withHostPort(8080)), sized("small-ds", "2", "2Gi", size("small"), withHostPort(8081))},
			pods:    []*corev1.Pod{sized("p", "1", "1Gi", size("small"), withHostPort(8080))}, check: onNodeOfSize(4, "p")},
		{name: "should not subtract daemonset overhead that is not strictly compatible with an existing node", daemons: ds("100", "100Gi", inZones(zone1)),
			nodes: []*ExistingNode{existingNode("n1", nil, "1", "1Gi")}, pods: []*corev1.Pod{sized("p1", "1", "1Gi"), sized("p2", "1", "1Gi")},
			check: all(expect(1, 0, ""), notPlaced("p2"))},
	})
}

func TestKarpenterSuiteVolumeTopology(t *testing.T) {
	wait := storagev1.VolumeBindingWaitForFirstConsumer
	class := storageClass("sc", wait, zone2, zone3)
	multiZone := storageClass("multi", wait, zone1)
	multiZone.AllowedTopologies = append(multiZone.AllowedTopologies, storageClass("", wait, zone2).AllowedTopologies...)
	z3 := zonalVolume("pv-z3", v1.LabelTopologyZone, zone3)
	local := zonalVolume("pv-local", v1.LabelHostname, "random")
	local.Spec.Local = &corev1.LocalVolumeSource{Path: "/mnt"}
	csiHost := zonalVolume("pv-csi-host", v1.LabelHostname, "random")
	eitherZone := func(name string) corev1.PersistentVolume {
		pv := zonalVolume(name, v1.LabelTopologyZone, zone1)
		pv.Spec.NodeAffinity.Required.NodeSelectorTerms = append(pv.Spec.NodeAffinity.Required.NodeSelectorTerms, zonalVolume("", v1.LabelTopologyZone, zone2).Spec.NodeAffinity.Required.NodeSelectorTerms...)
		return pv
	}
	empty := unboundClaim("empty-class", "")
	boundEmpty := boundClaim("bound-empty", "pv-plain")
	boundEmpty.Spec.StorageClassName = new(string)
	vols := NewVolumes(
		[]corev1.PersistentVolumeClaim{unboundClaim("unbound", "sc"), boundClaim("bound-z3", "pv-z3"), boundClaim("local", "pv-local"), boundClaim("csi-host", "pv-csi-host"),
			boundClaim("multi-a", "pv-multi-a"), boundClaim("multi-b", "pv-multi-b"), unboundClaim("sc-multi-a", "multi"), unboundClaim("sc-multi-b", "multi"),
			empty, boundEmpty, unboundClaim("missing-class", "missing"), boundClaim("no-volume", "pv-absent")},
		[]corev1.PersistentVolume{z3, local, csiHost, eitherZone("pv-multi-a"), eitherZone("pv-multi-b"), {ObjectMeta: metav1.ObjectMeta{Name: "pv-plain"}}},
		[]storagev1.StorageClass{class, multiZone})
	anti := withAntiAffinity(v1.LabelTopologyZone, map[string]string{"app": "multi-zone-app"})
	multiApp := withPodLabel("app", "multi-zone-app")
	runScenarios(t, []scenario{
		{name: "should not schedule if invalid pvc", volumes: vols, pods: []*corev1.Pod{named("p", withClaim("d", "invalid"))}, check: expect(0, 0, "")},
		{name: "should schedule with an empty storage class if the pvc is bound", volumes: vols, pods: []*corev1.Pod{named("p", withClaim("d", "bound-empty"))}, check: expect(1, 1, "")},
		{name: "should not schedule with an empty storage class if the pvc is not bound", volumes: vols, pods: []*corev1.Pod{named("p", withClaim("d", "empty-class"))}, check: expect(0, 0, "")},
		{name: "should not schedule with a missing storage class if the pvc is not bound", volumes: vols, pods: []*corev1.Pod{named("p", withClaim("d", "missing-class"))}, check: expect(0, 0, "")},
		{name: "should schedule valid pods when a pod with an invalid pvc is encountered (volume name)", volumes: vols, pods: []*corev1.Pod{named("bad", withClaim("d", "no-volume")), named("good")}, check: expect(1, 1, "")},
		{name: "should schedule to storage class zones if volume does not exist", volumes: vols, pods: []*corev1.Pod{named("p", withClaim("d", "unbound"), inZones(zone1, zone3))}, check: inZone(zone3, "p")},
		{name: "should not schedule if storage class zones are incompatible", volumes: vols, pods: []*corev1.Pod{named("p", withClaim("d", "unbound"), inZones(zone1))}, check: notPlaced("p")},
		{name: "should schedule to volume zones if volume already bound", volumes: vols, pods: []*corev1.Pod{named("p", withClaim("d", "bound-z3"))}, check: inZone(zone3, "p")},
		{name: "should not schedule if volume zones are incompatible", volumes: vols, pods: []*corev1.Pod{named("p", withClaim("d", "bound-z3"), inZones(zone1))}, check: notPlaced("p")},
		{name: "should ignore hostname affinity scheduling when using local path volumes", volumes: vols, pods: []*corev1.Pod{named("p", withClaim("d", "local"))}, check: expect(1, 1, "")},
		{name: "should not ignore hostname affinity when using non-local path volumes", volumes: vols, pods: []*corev1.Pod{named("p", withClaim("d", "csi-host"))}, check: notPlaced("p")},
		{name: "should not relax an added volume topology zone node-selector away", volumes: vols, pods: []*corev1.Pod{named("p", withClaim("d", "bound-z3"), withRequiredTerms(
			[]corev1.NodeSelectorRequirement{{Key: "example.com/label", Operator: corev1.NodeSelectorOpIn, Values: []string{"unsupported"}}},
			[]corev1.NodeSelectorRequirement{{Key: v1.LabelCapacityType, Operator: corev1.NodeSelectorOpIn, Values: []string{v1.CapacityTypeOnDemand}}}))},
			check: inZone(zone3, "p")},
		{name: "should schedule pods using a PV with multiple zones", volumes: vols, pods: []*corev1.Pod{named("a", multiApp, anti, withClaim("d", "multi-a")), named("b", multiApp, anti, withClaim("d", "multi-b"))},
			check: all(expect(2, 2, ""), apart(v1.LabelTopologyZone, "a", "b"))},
		{name: "should schedule pods using a StorageClass with multiple zones in AllowedTopologies", volumes: vols, pods: []*corev1.Pod{named("a", multiApp, anti, withClaim("d", "sc-multi-a")), named("b", multiApp, anti, withClaim("d", "sc-multi-b"))},
			check: all(expect(2, 2, ""), apart(v1.LabelTopologyZone, "a", "b"))},
	})
}

func TestKarpenterSuiteInstanceSelectionAndReserved(t *testing.T) {
	withoutArm := func() []*InstanceType {
		var out []*InstanceType
		for _, it := range karpenterCatalog() {
			if it.Name != "arm-instance-type" {
				out = append(out, it)
			}
		}
		return out
	}
	reserved := func() []*InstanceType {
		cat := karpenterCatalog()
		for _, it := range cat {
			if it.Name == "small-instance-type" {
				it.Offerings = append(it.Offerings, Offering{Zone: zone1, CapacityType: v1.CapacityTypeReserved, Price: it.CheapestPrice / 100000, Available: true, ReservationID: "r-small"})
				it.Requirements[v1.LabelCapacityType] = MustRequirement(v1.LabelCapacityType, v1.OpIn, v1.CapacityTypeSpot, v1.CapacityTypeOnDemand, v1.CapacityTypeReserved)
				it.CheapestPrice /= 100000
			}
		}
		return cat
	}
	minValues := func(np *v1.NodePool) {
		two := 2
		np.Spec.Template.Spec.Requirements = append(np.Spec.Template.Spec.Requirements, v1.NodePoolRequirement{Key: v1.LabelInstanceType,
			RequirementBody: v1.RequirementBody{Operator: v1.OpIn, MinValues: &two, Values: []string{"small-instance-type", "default-instance-type"}}})
	}
	runScenarios(t, []scenario{
		{name: "should schedule on one of the cheapest instances", pods: []*corev1.Pod{named("p")}, check: expect(1, 1, "small-instance-type")},
		{name: "should not schedule if no instance type matches selector (pod arch = arm)", types: withoutArm(), pods: []*corev1.Pod{named("p", withNodeSelector(v1.LabelArch, v1.ArchitectureArm64))}, check: notPlaced("p")},
		{name: "should schedule respecting the minValues from instance-type requirements", pools: []*v1.NodePool{karpenterPool(minValues)}, pods: pods(2, "p", "900m", "900Mi"),
			check: func(t *testing.T, r *Results) {
				expect(2, -1, "")(t, r)
				for _, nc := range r.NodeClaims {
					if len(nc.InstanceTypeOptions) < 2 {
						t.Errorf("claim %s has %d instance type options, minValues is 2", nc.Name, len(nc.InstanceTypeOptions))
					}
				}
			}},
		{name: "Reserved Instance Types: shouldn't fallback to on-demand or spot when compatible reserved offerings are available", types: reserved(), pods: []*corev1.Pod{sized("p", "1800m", "0")},
			check: func(t *testing.T, r *Results) {
				expect(1, 1, "small-instance-type")(t, r)
				if o := r.NodeClaims[0].Offering; o.CapacityType != v1.CapacityTypeReserved || o.ReservationID != "r-small" {
					t.Errorf("offering %+v, want the reservation", o)
				}
			}},
	})
}

// TestKarpenterSuiteV115 are scenarios Karpenter v1.15's scheduling suite added
// (suite_test.go "MinValuesPolicy / with zone requirements", reserved_fallback_test.go
// "Full-but-available") that our engine carries out. A reservation EC2 reports full
// reaches the engine as an unavailable offering: the AWS provider counts what each
// reservation can still take (DescribeCapacityReservations, and each launch).
func TestKarpenterSuiteV115(t *testing.T) {
	wait := storagev1.VolumeBindingWaitForFirstConsumer
	vols := NewVolumes([]corev1.PersistentVolumeClaim{unboundClaim("zone1-only", "z1")}, nil, []storagev1.StorageClass{storageClass("z1", wait, zone1)})
	three := 3
	zonesMinValues := func(np *v1.NodePool) {
		np.Spec.Template.Spec.Requirements = append(np.Spec.Template.Spec.Requirements, v1.NodePoolRequirement{Key: v1.LabelTopologyZone,
			RequirementBody: v1.RequirementBody{Operator: v1.OpIn, MinValues: &three, Values: []string{zone1, zone2, zone3}}})
	}
	reservation := func(available bool) []*InstanceType {
		cat := karpenterCatalog()
		for _, it := range cat {
			if it.Name == "small-instance-type" {
				it.Offerings = append(it.Offerings, Offering{Zone: zone1, CapacityType: v1.CapacityTypeReserved, Price: it.CheapestPrice / 100000, Available: available, ReservationID: "r-1"})
				it.Requirements[v1.LabelCapacityType] = MustRequirement(v1.LabelCapacityType, v1.OpIn, v1.CapacityTypeSpot, v1.CapacityTypeOnDemand, v1.CapacityTypeReserved)
				if available {
					it.CheapestPrice /= 100000
				}
			}
		}
		return cat
	}
	reservedOnly := karpenterPool(withRequirements(req(v1.LabelCapacityType, v1.OpIn, v1.CapacityTypeReserved), req(v1.LabelInstanceType, v1.OpIn, "small-instance-type")))
	mixed := karpenterPool(withRequirements(req(v1.LabelInstanceType, v1.OpIn, "small-instance-type")))
	offering := func(capacityType, reservationID string) func(*testing.T, *Results) {
		return func(t *testing.T, r *Results) {
			t.Helper()
			expect(1, 1, "small-instance-type")(t, r)
			if len(r.NodeClaims) == 1 {
				if o := r.NodeClaims[0].Offering; o.CapacityType != capacityType || o.ReservationID != reservationID {
					t.Errorf("offering %+v, want %s %q", o, capacityType, reservationID)
				}
			}
		}
	}
	runScenarios(t, []scenario{
		{name: "MinValuesPolicy Strict: should not schedule when volume topology leaves fewer zones than minValues", pools: []*v1.NodePool{karpenterPool(zonesMinValues)},
			volumes: vols, pods: []*corev1.Pod{named("p", withClaim("d", "zone1-only"))}, check: notPlaced("p")},
		{name: "Full-but-available: a full reservation on a reserved-only pool yields no NodeClaim", pools: []*v1.NodePool{reservedOnly}, types: reservation(false),
			pods: []*corev1.Pod{sized("p", "1", "0")}, check: all(expect(0, 0, ""), notPlaced("p"))},
		{name: "Full-but-available: a mixed pool with a full reservation schedules and holds no reservation", pools: []*v1.NodePool{mixed}, types: reservation(false),
			pods: []*corev1.Pod{sized("p", "1", "0")}, check: func(t *testing.T, r *Results) {
				t.Helper()
				expect(1, 1, "small-instance-type")(t, r)
				if len(r.NodeClaims) == 1 && r.NodeClaims[0].Offering.CapacityType == v1.CapacityTypeReserved {
					t.Errorf("offering %+v: planned into a full reservation", r.NodeClaims[0].Offering)
				}
			}},
		{name: "Full-but-available: a reservation with capacity is preferred over on-demand", pools: []*v1.NodePool{mixed}, types: reservation(true),
			pods: []*corev1.Pod{sized("p", "1", "0")}, check: offering(v1.CapacityTypeReserved, "r-1")},
	})

	// Topology/DefaultConstraints: pods a ReplicaSet selecting test=test controls.
	zonePool := func(zones ...string) []*v1.NodePool {
		return []*v1.NodePool{karpenterPool(poolReqs(req(v1.LabelCapacityType, v1.OpExists), req(v1.LabelTopologyZone, v1.OpIn, zones...)))}
	}
	rs := defaultspread.Workloads{ReplicaSets: []appsv1.ReplicaSet{{ObjectMeta: metav1.ObjectMeta{Name: "rs", Namespace: "default"},
		Spec: appsv1.ReplicaSetSpec{Selector: &metav1.LabelSelector{MatchLabels: testLabels}}}}}
	owned := func(p *corev1.Pod) {
		labelled(p)
		yes := true
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "rs", UID: "rs-uid", Controller: &yes}}
	}
	tsc := func(key string, action corev1.UnsatisfiableConstraintAction, minDomains int32) corev1.TopologySpreadConstraint {
		c := corev1.TopologySpreadConstraint{MaxSkew: 1, TopologyKey: key, WhenUnsatisfiable: action}
		if minDomains > 0 {
			c.MinDomains = &minDomains
		}
		return c
	}
	zoneDefault, hostnameDefault := tsc(v1.LabelTopologyZone, corev1.DoNotSchedule, 0), tsc(v1.LabelHostname, corev1.DoNotSchedule, 0)
	oneNode := func(t *testing.T, r *Results) {
		t.Helper()
		expect(3, 1, "")(t, r)
	}
	existingInZone1 := []*ExistingNode{existingNode("existing", map[string]string{v1.LabelTopologyZone: zone1}, "32", "128Gi", named("old-0", owned), named("old-1", owned))}
	// VolumeUsage: an existing node whose CSINode lets csiProvider attach 10 volumes.
	const csiProvider = "fake.csi.provider"
	csiNode := func(bound ...*corev1.Pod) []*ExistingNode {
		n := existingNode("csi-node", map[string]string{v1.LabelTopologyZone: zone1}, "1024", "1024Gi", bound...)
		n.VolumeLimits = map[string]int{csiProvider: 10}
		return []*ExistingNode{n}
	}
	limitedClass := storageClass("my-storage-class", wait, zone1)
	limitedClass.Provisioner = csiProvider
	unlimitedClass := storageClass("unlimited", wait, zone1)
	unlimitedClass.Provisioner = "other.csi.provider"
	var claims []corev1.PersistentVolumeClaim
	var twoClaims, unlimited []*corev1.Pod
	for i := range 6 {
		a, b := fmt.Sprintf("my-claim-a-%d", i), fmt.Sprintf("my-claim-b-%d", i)
		claims = append(claims, unboundClaim(a, "my-storage-class"), unboundClaim(b, "my-storage-class"), unboundClaim("u-"+a, "unlimited"), unboundClaim("u-"+b, "unlimited"))
		twoClaims = append(twoClaims, named(fmt.Sprintf("p-%d", i), withClaim("a", a), withClaim("b", b)))
		unlimited = append(unlimited, named(fmt.Sprintf("u-%d", i), withClaim("a", "u-"+a), withClaim("b", "u-"+b)))
	}
	shared := zonalVolume("my-volume", v1.LabelTopologyZone, zone1)
	shared.Spec.CSI = &corev1.CSIPersistentVolumeSource{Driver: csiProvider, VolumeHandle: "vol-1"}
	claims = append(claims, boundClaim("my-claim", "my-volume"))
	csiVolumes := NewVolumes(claims, []corev1.PersistentVolume{shared}, []storagev1.StorageClass{limitedClass, unlimitedClass})
	onCSINode := func(want int) func(*testing.T, *Results) {
		return func(t *testing.T, r *Results) {
			t.Helper()
			n := 0
			for _, e := range r.Existing {
				n += len(e.Pods)
			}
			if n != want {
				t.Errorf("%d pods on the existing node, want %d (%s)", n, want, describePlan(r))
			}
		}
	}
	runScenarios(t, []scenario{
		{name: "VolumeUsage: should launch multiple nodes if required due to volume limits", nodes: csiNode(), volumes: csiVolumes, pods: twoClaims,
			// the node holds 5 pods of two volumes each under its limit of 10; the sixth needs a new node
			check: all(onCSINode(5), expect(6, 1, ""))},
		{name: "VolumeUsage: should launch a single node if all pods use the same PVC", nodes: csiNode(), volumes: csiVolumes, pods: bulk(100, "p", withClaim("v", "my-claim")),
			check: all(onCSINode(100), expect(100, 0, ""))},
		{name: "VolumeUsage: should count the volumes of the node's bound pods", nodes: csiNode(named("bound", withClaim("a", "my-claim-a-5"), withClaim("b", "my-claim-b-5"))), volumes: csiVolumes, pods: twoClaims[:5],
			check: all(onCSINode(4), expect(5, 1, ""))},
		{name: "VolumeUsage: should not limit volumes for drivers without a declared limit", nodes: csiNode(), volumes: csiVolumes, pods: unlimited,
			check: all(onCSINode(6), expect(6, 0, ""))},
	})

	runScenarios(t, []scenario{
		{name: "DefaultConstraints: should apply default zonal spread to a pod that declares no constraints of its own",
			defaults: []corev1.TopologySpreadConstraint{zoneDefault}, workloads: rs, pods: bulk(4, "p", owned), check: expectSkew(v1.LabelTopologyZone, 1, 1, 2)},
		{name: "DefaultConstraints: should apply default hostname spread to a pod that declares no constraints of its own",
			defaults: []corev1.TopologySpreadConstraint{hostnameDefault}, workloads: rs, pods: bulk(3, "p", owned), check: expectSkew(v1.LabelHostname, 1, 1, 1)},
		{name: "DefaultConstraints: should NOT apply the default to a pod that declares its own constraints",
			defaults: []corev1.TopologySpreadConstraint{hostnameDefault}, workloads: rs, pods: bulk(3, "p", owned, spread(v1.LabelHostname, 3)), check: oneNode},
		{name: "DefaultConstraints: should carry minDomains through a synthesized default", pools: zonePool(zone1, zone2),
			defaults: []corev1.TopologySpreadConstraint{tsc(v1.LabelTopologyZone, corev1.DoNotSchedule, 3)}, workloads: rs, pods: bulk(3, "p", owned), check: expectSkew(v1.LabelTopologyZone, 1, 1)},
		{name: "DefaultConstraints: should NOT schedule past a synthesized DoNotSchedule default that can't be satisfied", pools: zonePool(zone1),
			defaults: []corev1.TopologySpreadConstraint{tsc(v1.LabelTopologyZone, corev1.DoNotSchedule, 3)}, workloads: rs, pods: bulk(3, "p", owned), check: expect(1, 1, "")},
		{name: "DefaultConstraints: should relax a synthesized ScheduleAnyway default when it can't be satisfied", pools: zonePool(zone1),
			defaults: []corev1.TopologySpreadConstraint{tsc(v1.LabelTopologyZone, corev1.ScheduleAnyway, 3)}, workloads: rs, pods: bulk(3, "p", owned), check: expect(3, -1, "")},
		{name: "DefaultConstraints: should be a no-op when no default constraints are configured", workloads: rs, pods: bulk(3, "p", owned), check: oneNode},
		{name: "DefaultConstraints: should not apply the default to a pod with no owner and no matching service",
			defaults: []corev1.TopologySpreadConstraint{hostnameDefault}, workloads: rs, pods: bulk(3, "p", labelled), check: oneNode},
		{name: "DefaultConstraints: should count pre-existing cluster pods through the deduced selector", pools: zonePool(zone1, zone2), nodes: existingInZone1,
			defaults: []corev1.TopologySpreadConstraint{zoneDefault}, workloads: rs, pods: bulk(2, "p", owned), check: expectSkewWith(existingInZone1, v1.LabelTopologyZone, 2, 2)},
	})
}
