package simulate

import (
	"bytes"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
)

// staticPool is a static pool of 3 m5.large, its spend limit room for 2 ($0.096/h
// each), beside a dynamic pool.
const staticPool = `
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: fixed}
spec:
  replicas: 3
  limits: {dovetail.sh/usd-per-hour: "0.2"}
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements:
      - {key: node.kubernetes.io/instance-type, operator: In, values: [m5.large]}
      - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
`

// TestSimulateShowsStaticPools: with the StaticCapacity gate on, simulate shows
// what the static controller launches for a static pool (its own decision, within
// the spend limit: 2 of 3 replicas, and why not the third); with the gate off, as
// the controller runs by default, none, and why.
func TestSimulateShowsStaticPools(t *testing.T) {
	plan := runManifests(t, overlayPool+"---"+staticPool, "StaticCapacity=true")
	if len(plan.StaticPools) != 1 {
		t.Fatalf("static pools %+v; want fixed", plan.StaticPools)
	}
	s := plan.StaticPools[0]
	if s.NodePool != "fixed" || s.Replicas != 3 || s.Existing != 0 || s.Launch != 2 || s.InstanceType != "m5.large" || !strings.Contains(s.Problem, "at its spend limit") {
		t.Errorf("static pool %+v; want 2 m5.large launched, the third held by the spend limit", s)
	}
	for _, nc := range plan.NodeClaims {
		if nc.NodePool == "fixed" {
			t.Errorf("a pending pod planned onto the static pool: %+v", nc)
		}
	}
	var table bytes.Buffer
	if err := plan.WriteTable(&table); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(table.String(), "STATIC NODEPOOLS") || !strings.Contains(table.String(), "launch 2 m5.large") {
		t.Errorf("the table lacks the static pool:\n%s", table.String())
	}
	off := runManifests(t, overlayPool+"---"+staticPool)
	if len(off.StaticPools) != 1 || off.StaticPools[0].Launch != 0 || !strings.Contains(off.StaticPools[0].Problem, "StaticCapacity=true") {
		t.Errorf("gate off: %+v; want nothing launched and the gate named", off.StaticPools)
	}
}

// A static pool of 2 whose drifted node is being replaced (tainted
// karpenter.sh/disrupted, its successor already running) has 3 claims; the static
// controller removes none, as the disrupted node is going anyway, and simulate
// says the same rather than "remove 1".
func TestSimulateStaticPoolWithANodeBeingReplaced(t *testing.T) {
	in := &Inputs{}
	if err := in.Read(strings.NewReader(overlayPool+"---"+strings.Replace(staticPool, "replicas: 3", "replicas: 2", 1)), "test.yaml"); err != nil {
		t.Fatal(err)
	}
	for i, name := range []string{"fixed-a", "fixed-b", "fixed-c"} {
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{v1.LabelNodePool: "fixed", v1.LabelInstanceType: "m5.large"}},
			Spec: corev1.NodeSpec{ProviderID: "aws:///us-west-2a/i-" + name}}
		if i == 0 {
			node.Spec.Taints = []corev1.Taint{v1.DisruptedNoScheduleTaint}
		}
		in.Nodes = append(in.Nodes, node)
		in.NodeClaims = append(in.NodeClaims, &v1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: node.Labels},
			Status: v1.NodeClaimStatus{ProviderID: node.Spec.ProviderID, NodeName: name}})
	}
	plan, err := Run(in, testTypes(t), defaults("StaticCapacity=true"), clocktesting.NewFakePassiveClock(fakeNow))
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.StaticPools) != 1 {
		t.Fatalf("static pools %+v", plan.StaticPools)
	}
	if s := plan.StaticPools[0]; s.Existing != 2 || s.Disrupting != 1 || s.Remove != 0 || s.Launch != 0 {
		t.Errorf("static pool %+v; want 2 existing, 1 being replaced, nothing removed or launched", s)
	}
}
