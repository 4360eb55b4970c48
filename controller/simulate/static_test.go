package simulate

import (
	"bytes"
	"strings"
	"testing"
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
