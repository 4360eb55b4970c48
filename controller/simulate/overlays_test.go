package simulate

import (
	"bytes"
	"strings"
	"testing"
)

const overlayPool = `
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: default}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements:
      - {key: node.kubernetes.io/instance-type, operator: In, values: [m6i.large, m7i.large]}
      - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 1
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - name: web
        image: web
        resources: {requests: {cpu: "1", memory: 1Gi}}
`

// overlays are an overlay that prices m6i.large at $5/h and one of the same weight
// over the same type.
const overlays = `
---
apiVersion: karpenter.sh/v1alpha1
kind: NodeOverlay
metadata: {name: m6i-dear}
spec:
  weight: 10
  requirements: [{key: node.kubernetes.io/instance-type, operator: In, values: [m6i.large]}]
  price: "5"
---
apiVersion: karpenter.sh/v1alpha1
kind: NodeOverlay
metadata: {name: a-clash}
spec:
  weight: 10
  requirements: [{key: karpenter.k8s.aws/instance-family, operator: In, values: [m6i]}]
  priceAdjustment: "-50%"
`

// TestSimulateNodeOverlay: with the NodeOverlay gate on, an overlay that prices
// m6i.large (the cheaper of the pool's two types) at $5/h turns the plan to
// m7i.large; an overlay of the same weight over the same type conflicts and
// changes nothing; the table and JSON say which applied. With the gate off, as the
// controller runs by default, no overlay applies and each says why.
func TestSimulateNodeOverlay(t *testing.T) {
	plain := runManifests(t, overlayPool)
	if len(plain.NodeClaims) != 1 || plain.NodeClaims[0].InstanceType != "m6i.large" || plain.Overlays != nil {
		t.Fatalf("without overlays: %+v; want one m6i.large (the test needs it cheaper than m7i.large)", plain.NodeClaims)
	}
	plan := runManifests(t, overlayPool+overlays, "NodeOverlay=true")
	if len(plan.NodeClaims) != 1 || plan.NodeClaims[0].InstanceType != "m7i.large" {
		t.Fatalf("with m6i.large at $5/h: %+v; want m7i.large", plan.NodeClaims)
	}
	if len(plan.Overlays) != 2 || plan.Overlays[0].Name != "a-clash" || plan.Overlays[0].Applied || plan.Overlays[0].Reason != "Conflict" ||
		!plan.Overlays[1].Applied || plan.Overlays[1].PricedTypes != 1 {
		t.Errorf("overlays %+v; want a-clash in conflict and m6i-dear repricing one type", plan.Overlays)
	}
	var table bytes.Buffer
	if err := plan.WriteTable(&table); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"NODE OVERLAYS", "m6i-dear  true     price of 1 type(s), capacity of 0", "a-clash   false    Conflict: conflict with another overlay of weight 10"} {
		if !strings.Contains(table.String(), want) {
			t.Errorf("the table lacks %q:\n%s", want, table.String())
		}
	}
	off := runManifests(t, overlayPool+overlays)
	if len(off.NodeClaims) != 1 || off.NodeClaims[0].InstanceType != "m6i.large" {
		t.Errorf("gate off: %+v; want m6i.large, as the controller launches", off.NodeClaims)
	}
	if len(off.Overlays) != 2 || off.Overlays[0].Applied || off.Overlays[1].Applied || off.Overlays[1].Reason != "FeatureGateOff" ||
		!strings.Contains(off.Overlays[1].Message, "--feature-gates NodeOverlay=true") {
		t.Errorf("gate off: overlays %+v; want neither applied, each naming the gate", off.Overlays)
	}
}
