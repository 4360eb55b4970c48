package simulate

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	awsv1 "github.com/dovetail-sh/dovetail/controller/apis/aws/v1"
	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/controller/catalog"
	"github.com/dovetail-sh/dovetail/controller/operator/settings"
)

func impactOf(t *testing.T, mutate func(np *v1.NodePool)) *Impact {
	t.Helper()
	return impactWith(t, defaults(), mutate)
}

func impactWith(t *testing.T, ctl *settings.Options, mutate func(np *v1.NodePool)) *Impact {
	t.Helper()
	in := readSnapshot(t, "blocked.yaml")
	var np *v1.NodePool
	for _, p := range in.NodePools {
		if p.Name == "default" {
			np = p.DeepCopy()
		}
	}
	mutate(np)
	impact, err := PlanImpact(in, westTypes(t), ctl, fakeNow, Change{NodePool: np})
	if err != nil {
		t.Fatal(err)
	}
	return impact
}

// TestPlanImpactOfANodePoolChange: on the blocked snapshot's pool "default" (five
// claims, one in flight; budget 100%), an unchanged spec drifts nothing; new template labels
// apply in place; a taint drifts every node by the pool hash, but the nodes a
// do-not-disrupt pod and a PDB block wait, as the controller skips them: the other
// three go in one wave (the budget is 100% of the four initialized nodes, as
// Karpenter counts them: the claim in flight takes no share), their pods moving
// onto the two that stay; requirements that exclude m6i drift them by their
// requirements, the same three going; with a budget of 0 the replacement waits,
// and the impact says so.
func TestPlanImpactOfANodePoolChange(t *testing.T) {
	same := impactOf(t, func(*v1.NodePool) {})
	if same.Nodes != 5 || len(same.Drifted)+len(same.InPlace) != 0 || same.PricePerHourBefore != same.PricePerHourAfter || same.PricePerHourBefore == 0 {
		t.Fatalf("unchanged: %+v; want 5 nodes, nothing drifted, the same $/h", same)
	}
	labels := impactOf(t, func(np *v1.NodePool) { np.Spec.Template.Labels = map[string]string{"team": "checkout"} })
	if len(labels.InPlace) != 5 || len(labels.Drifted) != 0 || !strings.Contains(labels.String(), "5 are updated in place") {
		t.Errorf("new labels: %+v\n%s; want the 5 claims updated in place", labels, labels)
	}
	// With --drift-on-metadata the controller replaces them instead, as Karpenter
	// does, and the impact says so.
	onMetadata := defaults()
	onMetadata.DriftOnMetadata = true
	replaced := impactWith(t, onMetadata, func(np *v1.NodePool) { np.Spec.Template.Labels = map[string]string{"team": "checkout"} })
	if len(replaced.InPlace) != 0 || len(replaced.Drifted) != 5 || replaced.Drifted[0].Reason != "NodePoolDrift" {
		t.Errorf("new labels with --drift-on-metadata: %+v\n%s; want the 5 claims drifted", replaced, replaced)
	}
	taint := impactOf(t, func(np *v1.NodePool) {
		np.Spec.Template.Spec.Taints = []corev1.Taint{{Key: "dedicated", Value: "shop", Effect: corev1.TaintEffectNoSchedule}}
	})
	if len(taint.Drifted) != 5 || taint.Drifted[0].Reason != "NodePoolDrift" || taint.Waves != 1 || taint.PerWave != 3 || taint.EstimatedDuration != WavePace {
		t.Errorf("a taint: %s; want 5 NodePoolDrift, 3 replaced in one wave", taint)
	}
	waits := map[string]string{}
	for _, d := range taint.Drifted {
		if d.Waits != "" {
			waits[d.Node] = d.Waits
		}
	}
	if len(waits) != 2 || waits["ip-10-0-1-21.us-west-2.compute.internal"] != "pod batch/report-29410560-x7k2q has the karpenter.sh/do-not-disrupt annotation" ||
		waits["ip-10-0-2-22.us-west-2.compute.internal"] != "pdb payments/ledger prevents evicting pod ledger-0" {
		t.Errorf("waiting %v; want the nodes the do-not-disrupt pod and the PDB block", waits)
	}
	family := impactOf(t, func(np *v1.NodePool) {
		np.Spec.Template.Spec.Requirements[1].Values = []string{"c6i"}
	})
	if len(family.Drifted) != 5 || family.Drifted[0].Reason != "RequirementsDrift" || len(family.Unplaced) != 0 || family.PricePerHourAfter == family.PricePerHourBefore {
		t.Errorf("m6i to c6i: %+v; want every node drifted by its requirements and its pods placed on c6i at another $/h", family)
	}
	for _, want := range []string{"Drift: 5 RequirementsDrift.", "of which 3 are replaced and 2 wait", "Pacing: 1 wave(s) of up to 3 node(s)", "Cost: $"} {
		if !strings.Contains(family.String(), want) {
			t.Errorf("the impact lacks %q:\n%s", want, family)
		}
	}
	frozen := impactOf(t, func(np *v1.NodePool) {
		np.Spec.Template.Spec.Requirements[1].Values = []string{"c6i"}
		np.Spec.Disruption.Budgets = []v1.Budget{{Nodes: "0"}}
	})
	if frozen.Waves != -1 || !strings.Contains(frozen.String(), "allow no drift replacement now") {
		t.Errorf("budget 0: %+v\n%s; want the replacement said to wait for a budget window", frozen, frozen)
	}
}

// TestPlanImpactOfAnEC2NodeClassChange: claims stamped with the class's hash
// drift by NodeClassDrift when its spec changes, across the pools that use it;
// an unchanged class drifts nothing.
func TestPlanImpactOfAnEC2NodeClassChange(t *testing.T) {
	in := readSnapshot(t, "blocked.yaml")
	class := &awsv1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: "default"}, Spec: awsv1.EC2NodeClassSpec{Role: "KarpenterNodeRole-shop"}}
	for _, nc := range in.NodeClaims {
		nc.Annotations[awsv1.AnnotationEC2NodeClassHash], nc.Annotations[awsv1.AnnotationEC2NodeClassHashVersion] = class.Hash(), awsv1.EC2NodeClassHashVersion
	}
	same, err := PlanImpact(in, westTypes(t), defaults(), fakeNow, Change{EC2NodeClass: class})
	if err != nil {
		t.Fatal(err)
	}
	if same.Nodes != 6 || len(same.Drifted) != 0 {
		t.Errorf("unchanged class: %+v; want its 6 claims, none drifted", same)
	}
	changed := class.DeepCopy()
	userData := "#!/bin/bash\necho hello"
	changed.Spec.UserData = &userData
	impact, err := PlanImpact(in, westTypes(t), defaults(), fakeNow, Change{EC2NodeClass: changed})
	if err != nil {
		t.Fatal(err)
	}
	if len(impact.Drifted) != 6 || impact.Drifted[0].Reason != "NodeClassDrift" || impact.Waves != -1 {
		t.Errorf("new user data: %+v\n%s; want all 6 drifted, the frozen pool's budget holding its node", impact, impact)
	}

	// Selector terms are not in the hash: a new AMI alias drifts every node once
	// resolved after apply, and the impact says so.
	class.Spec.AMISelectorTerms = []awsv1.AMISelectorTerm{{Alias: "al2023@v20251101"}}
	in.NodeClasses = append(in.NodeClasses, class)
	newAMI := class.DeepCopy()
	newAMI.Spec.AMISelectorTerms = []awsv1.AMISelectorTerm{{Alias: "al2023@v20251120"}}
	impact, err = PlanImpact(in, westTypes(t), defaults(), fakeNow, Change{EC2NodeClass: newAMI})
	if err != nil {
		t.Fatal(err)
	}
	if len(impact.Drifted) != 6 || !strings.HasPrefix(impact.Drifted[0].Reason, "AMIDrift") {
		t.Errorf("a new AMI alias: %+v\n%s; want all 6 drifted by AMIDrift", impact, impact)
	}
}

// A change to a pool one of whose nodes is already being disrupted (tainted
// karpenter.sh/disrupted): that node is not counted again as drifting, and no pod
// is placed twice across the waves (its pods move once, before the waves).
func TestPlanImpactOfAChangeWhileANodeIsBeingDisrupted(t *testing.T) {
	in := readSnapshot(t, "blocked.yaml")
	const tainted = "ip-10-0-1-21.us-west-2.compute.internal"
	for _, n := range in.Nodes {
		if n.Name == tainted {
			n.Spec.Taints = append(n.Spec.Taints, v1.DisruptedNoScheduleTaint)
		}
	}
	var np *v1.NodePool
	for _, p := range in.NodePools {
		if p.Name == "default" {
			np = p.DeepCopy()
		}
	}
	np.Spec.Template.Spec.Taints = append(np.Spec.Template.Spec.Taints, corev1.Taint{Key: "team", Value: "checkout", Effect: corev1.TaintEffectNoSchedule})
	impact, err := PlanImpact(in, westTypes(t), defaults(), fakeNow, Change{NodePool: np})
	if err != nil {
		t.Fatal(err)
	}
	if len(impact.Drifted) == 0 {
		t.Fatalf("a new taint drifts nothing: %+v", impact)
	}
	for _, d := range impact.Drifted {
		if d.Node == tainted {
			t.Errorf("%s, already being disrupted, is counted as drifting: %+v", tainted, impact.Drifted)
		}
	}
	seen := map[string]bool{}
	for _, r := range impact.Replacements {
		for _, p := range r.Pods {
			if seen[p] {
				t.Errorf("pod %s is placed on two replacements: %+v", p, impact.Replacements)
			}
			seen[p] = true
		}
	}
	unplaced := map[string]bool{}
	for _, u := range impact.Unplaced {
		if unplaced[u.Pod] {
			t.Errorf("pod %s is reported unplaced twice: %+v", u.Pod, impact.Unplaced)
		}
		unplaced[u.Pod] = true
	}
}

// webPods are a pod of 1 cpu on each node, none two to a node (required
// anti-affinity by hostname), so each drifted node needs a node of its own.
func webPods(sc *snapshotCluster, nodes ...string) {
	for _, n := range nodes {
		p := sc.pod(n, "1", "1Gi", map[string]string{"app": "web"})
		p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}, TopologyKey: corev1.LabelHostname}}}}
	}
}

// A pool's cpu limit counts what earlier waves launched: two m6i.large (4 cpu of
// a 6 cpu limit) drift to m6i.xlarge one at a time. The first wave's m6i.xlarge
// leaves 6 cpu in the pool; the second m6i.xlarge would make it 8, so, as the
// controller's second pass finds, the second node waits and its pod has no place.
func TestPlanImpactChargesThePoolWithEarlierWaves(t *testing.T) {
	types := westCatalog(t, "us-west-2a")
	sc := newSnapshotCluster(t, types, onlyM6i, onDemandOnly)
	sc.pool.Spec.Limits = v1.Limits{corev1.ResourceCPU: resource.MustParse("6")}
	sc.pool.Spec.Disruption.Budgets = []v1.Budget{{Nodes: "1"}}
	first, second := sc.node("m6i.large", "us-west-2a", v1.CapacityTypeOnDemand), sc.node("m6i.large", "us-west-2a", v1.CapacityTypeOnDemand)
	webPods(sc, first, second)
	np := sc.pool.DeepCopy()
	np.Spec.Template.Spec.Requirements[0].Values = []string{"m6i.xlarge"}
	impact, err := PlanImpact(sc.read(), types, defaults(), fakeNow, Change{NodePool: np})
	if err != nil {
		t.Fatal(err)
	}
	if len(impact.Drifted) != 2 || len(impact.Replacements) != 1 || impact.Replacements[0].InstanceType != "m6i.xlarge" {
		t.Fatalf("%s\nwant both nodes drifted and one m6i.xlarge launched", impact)
	}
	waits := impact.Drifted[1]
	if impact.Drifted[0].Waits != "" || !strings.Contains(waits.Waits, "would have no place") || len(impact.Unplaced) != 1 {
		t.Errorf("%+v\n%s\nwant the second node waiting, its pod unplaced", impact.Drifted, impact)
	}
	for _, want := range []string{"2 drift, of which 1 are replaced and 1 wait", "Waiting: the controller does not replace " + waits.Node, "Replacements: 1 m6i.xlarge"} {
		if !strings.Contains(impact.String(), want) {
			t.Errorf("the impact lacks %q:\n%s", want, impact)
		}
	}
}

// The controller takes one pool's drifted nodes per pass and plans them beside
// what the passes before launched. A class change drifts a node in each of two
// pools, each with a pod of 1.5 cpu: the first pool's pass launches an m6i.large
// for its pod, the second's another for its own (the first has no room left), not
// one m6i.xlarge for both.
func TestPlanImpactReplacesOnePoolAtATime(t *testing.T) {
	types := westCatalog(t, "us-west-2a")
	sc := newSnapshotCluster(t, types, onlyM6i, onDemandOnly)
	batch := sc.pool.DeepCopy()
	batch.Name = "batch"
	impact := amiChangeOfTwoPools(t, sc, types, batch, "1500m", "1500m")
	if len(impact.Drifted) != 2 || len(impact.Replacements) != 2 || !strings.Contains(impact.String(), "Replacements: 2 m6i.large (on-demand, us-west-2a).") {
		t.Errorf("%s\nwant both nodes drifted, each replaced by an m6i.large", impact)
	}
}

// A command refused for want of room is tried again after other pools' commands,
// as the controller tries it every pass: a class change drifts a node of "default"
// (limit 1 cpu: no replacement fits it) and one of "batch" (only m6i.xlarge). The
// default pool's pod has no place until batch's m6i.xlarge is launched; then it
// moves there, and no node waits.
func TestPlanImpactTriesARefusedCommandAgain(t *testing.T) {
	types := westCatalog(t, "us-west-2a")
	sc := newSnapshotCluster(t, types, onlyM6i, onDemandOnly)
	sc.pool.Spec.Limits = v1.Limits{corev1.ResourceCPU: resource.MustParse("1")}
	batch := sc.pool.DeepCopy()
	batch.Name = "batch"
	batch.Spec.Limits = v1.Limits{corev1.ResourceCPU: resource.MustParse("4")}
	batch.Spec.Template.Spec.Requirements[0].Values = []string{"m6i.xlarge"}
	impact := amiChangeOfTwoPools(t, sc, types, batch, "500m", "1800m")
	if len(impact.Drifted) != 2 || len(impact.Replacements) != 1 || impact.Replacements[0].InstanceType != "m6i.xlarge" || len(impact.Unplaced) != 0 {
		t.Fatalf("%s\nwant both replaced: batch's by an m6i.xlarge, default's pod moved onto it", impact)
	}
	noneWaits(t, impact)
}

// A static pool's drifted nodes are replaced one for one from its template, as the
// controller's StaticDrift does, its pods moving onto the new nodes; the engine
// never launches into a static pool, so planning them as a dynamic pool's would
// say every node waits.
func TestPlanImpactReplacesAStaticPoolFromItsTemplate(t *testing.T) {
	types := westCatalog(t, "us-west-2a")
	sc := newSnapshotCluster(t, types, onlyM6i, onDemandOnly)
	two := int64(2)
	sc.pool.Spec.Replicas = &two
	first, second := sc.node("m6i.large", "us-west-2a", v1.CapacityTypeOnDemand), sc.node("m6i.large", "us-west-2a", v1.CapacityTypeOnDemand)
	webPods(sc, first, second)
	np := sc.pool.DeepCopy()
	np.Spec.Template.Spec.Requirements[0].Values = []string{"m6i.xlarge"}
	impact, err := PlanImpact(sc.read(), types, defaults(), fakeNow, Change{NodePool: np})
	if err != nil {
		t.Fatal(err)
	}
	if len(impact.Drifted) != 2 || len(impact.Unplaced) != 0 || !strings.Contains(impact.String(), "Replacements: 2 m6i.xlarge (on-demand, us-west-2a).") {
		t.Fatalf("%s\nwant both nodes replaced by m6i.xlarge from the template, every pod placed", impact)
	}
	noneWaits(t, impact)
}

// A drifted claim whose Node is being deleted goes whatever the change: it is not
// counted as drifting, and its pod is placed once.
func TestPlanImpactLeavesADeletedNodeOut(t *testing.T) {
	types := westCatalog(t, "us-west-2a")
	sc := newSnapshotCluster(t, types, onlyM6i, onDemandOnly)
	kept, deleted := sc.node("m6i.large", "us-west-2a", v1.CapacityTypeOnDemand), sc.node("m6i.large", "us-west-2a", v1.CapacityTypeOnDemand)
	webPods(sc, kept, deleted)
	in := sc.read()
	for _, n := range in.Nodes {
		if n.Name == deleted {
			now := metav1.NewTime(fakeNow)
			n.DeletionTimestamp, n.Finalizers = &now, []string{"karpenter.sh/termination"}
		}
	}
	np := sc.pool.DeepCopy()
	np.Spec.Template.Spec.Requirements[0].Values = []string{"m6i.xlarge"}
	impact, err := PlanImpact(in, types, defaults(), fakeNow, Change{NodePool: np})
	if err != nil {
		t.Fatal(err)
	}
	if len(impact.Drifted) != 1 || impact.Drifted[0].Node != kept || len(impact.Replacements) != 1 {
		t.Errorf("%s\nwant only %s drifted and replaced", impact, kept)
	}
}

// amiClass is the class "default" selecting the AMI alias: a change of alias
// drifts every node of the class (AMIDrift).
func amiClass(alias string) *awsv1.EC2NodeClass {
	return &awsv1.EC2NodeClass{TypeMeta: metav1.TypeMeta{APIVersion: "karpenter.k8s.aws/v1", Kind: "EC2NodeClass"}, ObjectMeta: metav1.ObjectMeta{Name: "default"},
		Spec: awsv1.EC2NodeClassSpec{Role: "KarpenterNodeRole-shop", AMISelectorTerms: []awsv1.AMISelectorTerm{{Alias: alias}}}}
}

// amiChangeOfTwoPools is the impact of a new AMI alias on the class of the pool
// and batch, each with an m6i.large running a pod of that cpu (the pool's first).
func amiChangeOfTwoPools(t *testing.T, sc *snapshotCluster, types *catalog.File, batch *v1.NodePool, poolCPU, batchCPU string) *Impact {
	t.Helper()
	sc.objects = append(sc.objects, batch, amiClass("al2023@v20251101"))
	sc.pod(sc.node("m6i.large", "us-west-2a", v1.CapacityTypeOnDemand), poolCPU, "1Gi", map[string]string{"app": "web"})
	jobs := sc.node("m6i.large", "us-west-2a", v1.CapacityTypeOnDemand)
	sc.pod(jobs, batchCPU, "1Gi", map[string]string{"app": "jobs"})
	in := sc.read()
	inPool(in, jobs, batch.Name)
	impact, err := PlanImpact(in, types, defaults(), fakeNow, Change{EC2NodeClass: amiClass("al2023@v20251120")})
	if err != nil {
		t.Fatal(err)
	}
	return impact
}

// noneWaits fails the test for each drifted node the impact says waits.
func noneWaits(t *testing.T, impact *Impact) {
	t.Helper()
	for _, d := range impact.Drifted {
		if d.Waits != "" {
			t.Errorf("%s waits (%s)", d.Node, d.Waits)
		}
	}
}

// inPool moves a node and its claim into another pool.
func inPool(in *Inputs, node, pool string) {
	for _, nc := range in.NodeClaims {
		if nc.Status.NodeName == node {
			nc.Labels[v1.LabelNodePool] = pool
		}
	}
	for _, n := range in.Nodes {
		if n.Name == node {
			n.Labels[v1.LabelNodePool] = pool
		}
	}
}

// A drift replacement is planned as it will launch within its pool's capacity
// mix: 4 nodes (3 on-demand, 1 spot; base 2, at most 50% spot beyond it)
// drifted by a startup taint, spot at a third of on-demand, are replaced by 3 on-demand
// nodes and 1 spot, priced so, and the impact shows the mix before and after;
// without the mix all 4 would be spot. A change of the mix alone drifts nothing
// and says whether the nodes keep it (the annotation the change does not set
// stays as it is).
func TestPlanImpactHoldsTheCapacityMix(t *testing.T) {
	types := westCatalog(t, "us-west-2a")
	for i := range types.InstanceTypes {
		for j := range types.InstanceTypes[i].Offerings {
			if o := &types.InstanceTypes[i].Offerings[j]; o.CapacityType == v1.CapacityTypeSpot {
				o.Price /= 3
			}
		}
	}
	mix := map[string]string{"dovetail.sh/on-demand-base": "2", "dovetail.sh/spot-percent": "50"}
	impactOn := func(live map[string]string, change func(np *v1.NodePool)) *Impact {
		t.Helper()
		sc := newSnapshotCluster(t, types,
			v1.NodePoolRequirement{Key: v1.LabelInstanceType, RequirementBody: v1.RequirementBody{Operator: v1.OpIn, Values: []string{"m6i.large"}}},
			v1.NodePoolRequirement{Key: v1.LabelCapacityType, RequirementBody: v1.RequirementBody{Operator: v1.OpIn, Values: []string{v1.CapacityTypeSpot, v1.CapacityTypeOnDemand}}})
		sc.pool.Annotations = live
		for _, ct := range []string{v1.CapacityTypeOnDemand, v1.CapacityTypeOnDemand, v1.CapacityTypeOnDemand, v1.CapacityTypeSpot} {
			sc.pod(sc.node("m6i.large", "us-west-2a", ct), "1500m", "512Mi", map[string]string{"app": "web"})
		}
		// Launched from the pool as it is: a change of its template drifts them.
		for _, o := range sc.objects {
			if nc, ok := o.(*v1.NodeClaim); ok {
				nc.Annotations = map[string]string{v1.NodePoolHashAnnotationKey: sc.pool.Hash(), v1.NodePoolHashVersionAnnotationKey: v1.NodePoolHashVersion}
			}
		}
		np := sc.pool.DeepCopy()
		change(np)
		impact, err := PlanImpact(sc.read(), types, defaults(), fakeNow, Change{NodePool: np})
		if err != nil {
			t.Fatal(err)
		}
		return impact
	}
	taint := func(np *v1.NodePool) {
		np.Spec.Template.Spec.StartupTaints = []corev1.Taint{{Key: "agent-not-ready", Effect: corev1.TaintEffectNoSchedule}}
	}
	replacedBy := func(impact *Impact) map[string]int {
		out := map[string]int{}
		for _, r := range impact.Replacements {
			out[r.CapacityType]++
		}
		return out
	}
	free := impactOn(nil, taint)
	if got := replacedBy(free); got[v1.CapacityTypeSpot] != 4 || free.CapacityMix != nil {
		t.Fatalf("without a mix: replacements %v, mix %+v\n%s; want 4 spot and no mix", got, free.CapacityMix, free)
	}
	held := impactOn(mix, taint)
	if got := replacedBy(held); got[v1.CapacityTypeOnDemand] != 3 || got[v1.CapacityTypeSpot] != 1 {
		t.Fatalf("with the mix: replacements %v\n%s; want 3 on-demand and 1 spot", got, held)
	}
	if held.PricePerHourAfter <= free.PricePerHourAfter {
		t.Errorf("with the mix $%.4f/h after, without $%.4f/h; want the on-demand replacements priced on-demand", held.PricePerHourAfter, free.PricePerHourAfter)
	}
	want := "Capacity mix: on-demand base 2, at most 50% spot beyond it; nodes 3 on-demand, 1 spot before, 3 on-demand, 1 spot after."
	if m := held.CapacityMix; m == nil || !m.Holds || !strings.Contains(held.String(), want) {
		t.Errorf("the impact lacks %q:\n%s", want, held)
	}
	raised := impactOn(mix, func(np *v1.NodePool) { np.Annotations = map[string]string{"dovetail.sh/on-demand-base": "4"} })
	want = "Capacity mix: on-demand base 4, at most 50% spot beyond it (was: on-demand base 2, at most 50% spot beyond it); nodes 3 on-demand, 1 spot before, 3 on-demand, 1 spot after; the nodes after do not keep it"
	if len(raised.Drifted) != 0 || raised.CapacityMix == nil || raised.CapacityMix.Holds || !strings.Contains(raised.String(), want) {
		t.Errorf("a base raised to 4: %+v\n%s; want nothing drifted and %q", raised.CapacityMix, raised, want)
	}
}
