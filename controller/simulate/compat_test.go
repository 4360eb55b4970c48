package simulate

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	clocktesting "k8s.io/utils/clock/testing"

	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/controller/catalog"
	"github.com/dovetail-sh/dovetail/controller/scheduling"
	"github.com/dovetail-sh/dovetail/tests/compat"
)

var compatZones = []string{"us-west-2a", "us-west-2b", "us-west-2c"}

func readInto(t *testing.T, in *Inputs, path string, edit func(string) string) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	text := string(raw)
	if edit != nil {
		text = edit(text)
	}
	if err := in.Read(strings.NewReader(text), filepath.Base(path)); err != nil {
		t.Fatalf("decoding: %v", err)
	}
}

func TestCompatCorpusDecodesStrictly(t *testing.T) {
	compat.Each(t, func(t *testing.T, c compat.Corpus) {
		karpenter, _ := c.Files(t)
		pools, classes := 0, 0
		for _, path := range karpenter {
			// Files reuse names such as "default"; each is its own cluster.
			in := &Inputs{}
			readInto(t, in, path, nil)
			if len(in.NodePools)+len(in.NodeClasses) == 0 {
				t.Errorf("%s: no NodePool or EC2NodeClass decoded", path)
			}
			pools += len(in.NodePools)
			classes += len(in.NodeClasses)
			if len(in.Warnings) != 0 {
				t.Errorf("%s: Karpenter's own files must decode without warnings: %v", path, in.Warnings)
			}
		}
		if wantPools, wantClasses, ok := c.Expected(t); ok && (pools != wantPools || classes != wantClasses) {
			t.Errorf("decoded %d NodePools and %d EC2NodeClasses, want %d and %d", pools, classes, wantPools, wantClasses)
		}
	})
}

// TestCompatWorkloadsArePlanned plans each workload against its own NodePools (or,
// for standalone examples, the blueprints' default pool) and checks every placement
// with Kubernetes' own node-affinity and toleration code, not the engine's.
func TestCompatWorkloadsArePlanned(t *testing.T) {
	compat.Each(t, planWorkloads)
}

func planWorkloads(t *testing.T, c compat.Corpus) {
	_, workloads := c.Files(t)
	cat, err := catalog.EmbeddedAWS()
	if err != nil {
		t.Fatal(err)
	}
	zoned := cat.InZones(compatZones)
	types := zoned.ForEngine(scheduling.DefaultAllocatableSettings())
	// Upstream examples ship scaled to zero; plan them at a size that exercises spreads.
	scaleUp := func(s string) string { return strings.ReplaceAll(s, "replicas: 0", "replicas: 6") }
	for _, w := range workloads {
		t.Run(strings.TrimSuffix(filepath.Base(w), ".workload.yaml"), func(t *testing.T) {
			in := &Inputs{}
			pools := strings.TrimSuffix(w, ".workload.yaml") + ".yaml"
			if _, err := os.Stat(pools); err != nil {
				pools = "testdata/standalone-nodepools.yaml"
			}
			readInto(t, in, pools, nil)
			readInto(t, in, w, scaleUp)
			if len(in.Pods) == 0 {
				t.Fatalf("no pods in %s", w)
			}
			plan, err := Run(in, zoned, defaults(), clocktesting.NewFakePassiveClock(fakeNow))
			if err != nil {
				t.Fatal(err)
			}
			if len(plan.Unschedulable) != 0 {
				t.Fatalf("unschedulable: %+v", plan.Unschedulable)
			}
			if plan.Summary.Scheduled != len(in.Pods) {
				t.Fatalf("scheduled %d of %d pods", plan.Summary.Scheduled, len(in.Pods))
			}
			verifyPlacements(t, in, types)
		})
	}
}

// verifyPlacements re-solves to get the engine's typed results and checks that the
// node each claim will become admits each of its pods.
func verifyPlacements(t *testing.T, in *Inputs, types []*scheduling.InstanceType) {
	t.Helper()
	input := scheduling.Input{Pods: in.Pods, NodePools: in.NodePools, DaemonSetPods: in.DaemonSetPods, InstanceTypes: map[string][]*scheduling.InstanceType{}}
	for _, np := range in.NodePools {
		input.InstanceTypes[np.Name] = types
	}
	for _, nc := range scheduling.Solve(input).NodeClaims {
		node := &corev1.Node{}
		node.Labels = map[string]string{}
		for k, r := range nc.InstanceType.Requirements {
			if vals := r.Values(); len(vals) == 1 {
				node.Labels[k] = vals[0]
			}
		}
		for k, v := range nc.Requirements.Labels() {
			if k != v1.LabelInstanceType {
				node.Labels[k] = v
			}
		}
		node.Labels[v1.LabelTopologyZone] = nc.Offering.Zone
		node.Labels[v1.LabelCapacityType] = nc.Offering.CapacityType
		node.Labels[v1.LabelInstanceType] = nc.InstanceType.Name
		var used scheduling.Resources
		for _, p := range nc.Pods {
			if ok, err := nodeaffinity.GetRequiredNodeAffinity(p).Match(node); !ok || err != nil {
				t.Errorf("pod %s/%s does not match node %s of %s: %v", p.Namespace, p.Name, nc.InstanceType.Name, nc.NodePool, err)
			}
			for _, taint := range nc.Taints {
				tolerated := taint.Effect == corev1.TaintEffectPreferNoSchedule
				for _, tol := range p.Spec.Tolerations {
					tolerated = tolerated || tol.ToleratesTaint(&taint)
				}
				if !tolerated {
					t.Errorf("pod %s/%s does not tolerate %s on %s", p.Namespace, p.Name, taint.ToString(), nc.NodePool)
				}
			}
			used = used.Add(scheduling.PodRequests(p))
		}
		if !used.Fits(nc.InstanceType.Allocatable) {
			t.Errorf("claim %s (%s) is overcommitted: pods request %s, allocatable %s", nc.Name, nc.InstanceType.Name, used, nc.InstanceType.Allocatable)
		}
	}
}
