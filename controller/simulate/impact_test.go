package simulate

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	awsv1 "github.com/dovetail-sh/dovetail/controller/apis/aws/v1"
	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
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
// apply in place; a taint drifts every node by the pool hash, replaced at the same
// $/h in two waves (the budget is 100% of the four initialized nodes, as Karpenter
// counts them: the claim in flight takes no share); requirements that exclude m6i drift them by their
// requirements, replaced with other types; with a budget of 0 the replacement
// waits, and the impact says so.
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
	if len(taint.Drifted) != 5 || taint.Drifted[0].Reason != "NodePoolDrift" || taint.Waves != 2 || taint.PerWave != 4 || taint.EstimatedDuration != 2*WavePace {
		t.Errorf("a taint: %+v; want 5 NodePoolDrift in two waves of up to 4", taint)
	}
	family := impactOf(t, func(np *v1.NodePool) {
		np.Spec.Template.Spec.Requirements[1].Values = []string{"c6i"}
	})
	if len(family.Drifted) != 5 || family.Drifted[0].Reason != "RequirementsDrift" || len(family.Unplaced) != 0 || family.PricePerHourAfter == family.PricePerHourBefore {
		t.Errorf("m6i to c6i: %+v; want every node drifted by its requirements and its pods placed on c6i at another $/h", family)
	}
	for _, want := range []string{"Drift: 5 RequirementsDrift.", "Pacing: 2 wave(s) of up to 4 node(s)", "Cost: $"} {
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
