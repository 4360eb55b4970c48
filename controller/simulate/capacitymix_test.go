package simulate

import (
	"bytes"
	"strings"
	"testing"

	clocktesting "k8s.io/utils/clock/testing"
)

// A pool with a capacity mix is planned as the provisioner launches it: 6 nodes
// of a pool of on-demand base 2 and at most 50% spot beyond it are 4 on-demand
// and 2 spot, though spot is cheaper.
func TestSimulateHoldsThePoolsCapacityMix(t *testing.T) {
	in := &Inputs{}
	if err := in.Read(strings.NewReader(`
apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: default
  annotations: {dovetail.sh/on-demand-base: "2", dovetail.sh/spot-percent: "50"}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements:
      - {key: node.kubernetes.io/instance-type, operator: In, values: [m6i.xlarge]}
      - {key: karpenter.sh/capacity-type, operator: In, values: [spot, on-demand]}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 6
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - {name: web, image: web, resources: {requests: {cpu: "3", memory: 1Gi}}}
`), "test.yaml"); err != nil {
		t.Fatal(err)
	}
	// Spot at a third of on-demand, as spot price history would say.
	cat := testTypes(t)
	for i := range cat.InstanceTypes {
		for j := range cat.InstanceTypes[i].Offerings {
			if o := &cat.InstanceTypes[i].Offerings[j]; o.CapacityType == "spot" {
				o.Price /= 3
			}
		}
	}
	plan, err := Run(in, cat, defaults(), clocktesting.NewFakePassiveClock(fakeNow))
	if err != nil {
		t.Fatal(err)
	}
	byType := map[string]int{}
	for _, nc := range plan.NodeClaims {
		byType[nc.CapacityType]++
	}
	if byType["on-demand"] != 4 || byType["spot"] != 2 {
		t.Errorf("planned %v; want 4 on-demand and 2 spot", byType)
	}
	if len(plan.CapacityMixes) != 1 || plan.CapacityMixes[0].NodePool != "default" || plan.CapacityMixes[0].Before != (MixCounts{}) ||
		plan.CapacityMixes[0].After != (MixCounts{OnDemand: 4, Spot: 2}) {
		t.Errorf("the plan's mix report %+v; want default from none to 4 on-demand and 2 spot", plan.CapacityMixes)
	}
	var out bytes.Buffer
	if err := plan.WriteTable(&out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "CAPACITY MIXES") || !strings.Contains(out.String(), "4 on-demand, 2 spot") {
		t.Errorf("the table does not show the mix:\n%s", out.String())
	}
}
