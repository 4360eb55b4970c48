package simulate

import (
	"bytes"
	"strings"
	"testing"
)

const commitmentPool = `
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: default}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements:
      - {key: karpenter.k8s.aws/instance-category, operator: In, values: [c, m, r]}
      - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
      - {key: topology.kubernetes.io/zone, operator: In, values: [us-west-2a]}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 24
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - name: web
        image: web
        resources: {requests: {cpu: "1", memory: 2Gi}}
`

const riCommitment = `
---
apiVersion: dovetail.sh/v1alpha1
kind: Commitment
metadata: {name: ri-m5}
spec:
  reservedInstances:
  - {instanceType: m5.2xlarge, zone: us-west-2a, count: 4}
  savingsPlans:
  - {type: Compute, commitmentPerHour: "0.50", discount: "0.28"}
`

// TestSimulateCommitment: the example through simulate. With the
// Commitment in the input, the 24 pods go to the 4 reserved m5.2xlarge at $0
// effective; the table shows effective and list $/h per node and what each
// commitment has used.
func TestSimulateCommitment(t *testing.T) {
	plain := runManifests(t, commitmentPool)
	for _, nc := range plain.NodeClaims {
		if nc.InstanceType == "m5.2xlarge" {
			t.Fatalf("list prices already pick m5.2xlarge: %+v", plain.NodeClaims)
		}
	}
	plan := runManifests(t, commitmentPool+riCommitment)
	if len(plan.NodeClaims) != 4 || plan.Summary.PricePerHour != 0 || plan.Summary.ListPricePerHour <= 0 {
		t.Fatalf("claims %+v, summary %+v; want 4 reserved nodes at $0 effective", plan.NodeClaims, plan.Summary)
	}
	for _, nc := range plan.NodeClaims {
		if nc.InstanceType != "m5.2xlarge" || nc.PricePerHour != 0 || nc.ListPricePerHour == 0 || !strings.HasPrefix(nc.CoveredBy, "ri-m5: reserved m5.2xlarge") {
			t.Errorf("claim %+v; want a reserved m5.2xlarge", nc)
		}
	}
	if len(plan.Commitments) != 1 || plan.Commitments[0].Reserved[0] != "4/4 m5.2xlarge in us-west-2a" {
		t.Errorf("commitments %+v; want the 4 reservations used", plan.Commitments)
	}
	var out bytes.Buffer
	if err := plan.WriteTable(&out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"COMMITMENTS", "4/4 m5.2xlarge in us-west-2a", "LIST $/HOUR", "COVERED BY", "$0.0000/hour effective ($1.5360/hour at list prices)"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the table lacks %q:\n%s", want, out.String())
		}
	}
}

// TestSimulateCommitmentNamesTheBadField: a Commitment the engine cannot use is
// refused with the file, the object and the field.
func TestSimulateCommitmentNamesTheBadField(t *testing.T) {
	in := &Inputs{}
	err := in.Read(strings.NewReader(`apiVersion: dovetail.sh/v1alpha1
kind: Commitment
metadata: {name: sp}
spec:
  savingsPlans: [{type: Compute, commitmentPerHour: "10", discount: "28"}]
`), "c.yaml")
	if err == nil || !strings.Contains(err.Error(), "c.yaml") || !strings.Contains(err.Error(), "spec.savingsPlans[0].discount") {
		t.Errorf("error %v; want the file and spec.savingsPlans[0].discount named", err)
	}
}
