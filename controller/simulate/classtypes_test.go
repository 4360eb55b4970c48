package simulate

import (
	"slices"
	"strings"
	"testing"

	"github.com/dovetail-sh/dovetail/controller/catalog"
	"github.com/dovetail-sh/dovetail/controller/scheduling"
)

// classPool is a pool of general-purpose types whose class is "limited".
const classPool = `
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: default}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: limited}
      requirements:
      - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: small}
spec:
  replicas: 30
  selector: {matchLabels: {app: small}}
  template:
    metadata: {labels: {app: small}}
    spec:
      containers:
      - name: c
        image: pause
        resources: {requests: {cpu: 10m, memory: 16Mi}}
`

// limitedClass is the class "limited" of classPool, its spec open for more fields.
const limitedClass = `
---
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: limited}
spec:
  role: KarpenterNodeRole
  amiSelectorTerms: [{alias: al2023@latest}]
`

// TestSimulatePlansWhatTheClassMakesOfTheTypes: the pool's EC2NodeClass shapes the
// types as the AWS provider shapes them. With kubelet.maxPods 10, no planned node
// holds more than 10 pods (kube-scheduler would bind no more); with cpuOptions
// nestedVirtualization enabled, only types whose processors support it are
// planned; with the class's status naming its subnets, only their zones.
func TestSimulatePlansWhatTheClassMakesOfTheTypes(t *testing.T) {
	class := func(spec, status string) string {
		return classPool + limitedClass + `  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: demo}}]
  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: demo}}]
` + spec + status
	}
	plain := runManifests(t, classPool)
	if !slices.ContainsFunc(plain.NodeClaims, func(nc PlannedNodeClaim) bool { return len(nc.Pods) > 10 }) {
		t.Fatalf("without the class: %+v; the test needs a claim of more than 10 pods", plain.NodeClaims)
	}
	limited := runManifests(t, class("  kubelet: {maxPods: 10}\n", ""))
	pods := 0
	for _, nc := range limited.NodeClaims {
		if len(nc.Pods) > 10 {
			t.Errorf("kubelet.maxPods 10: a %s with %d pods", nc.InstanceType, len(nc.Pods))
		}
		pods += len(nc.Pods)
	}
	if pods != 30 || len(limited.NodeClaims) < 3 {
		t.Errorf("kubelet.maxPods 10: %d pods on %d claims; want the 30 on at least 3", pods, len(limited.NodeClaims))
	}

	cat, err := catalog.EmbeddedAWS()
	if err != nil {
		t.Fatal(err)
	}
	nested := map[string]bool{}
	for _, e := range cat.InstanceTypes {
		nested[e.Name] = slices.Contains(e.ProcessorFeatures, "nested-virtualization")
	}
	virt := runManifests(t, class("  cpuOptions: {nestedVirtualization: enabled}\n", ""))
	if len(virt.NodeClaims) == 0 {
		t.Fatal("nested virtualization: nothing planned")
	}
	for _, nc := range virt.NodeClaims {
		for _, r := range nc.Requirements {
			if r.Key != "node.kubernetes.io/instance-type" {
				continue
			}
			for _, name := range r.Values {
				if !nested[name] {
					t.Errorf("nested virtualization: option %s lacks the processor feature", name)
				}
			}
		}
	}

	zoned := runManifests(t, class("", "status:\n  subnets: [{id: subnet-b, zone: us-west-2b}]\n"))
	if len(zoned.NodeClaims) == 0 {
		t.Fatal("subnets in us-west-2b only: nothing planned")
	}
	for _, nc := range zoned.NodeClaims {
		if nc.Zone != "us-west-2b" {
			t.Errorf("subnets in us-west-2b only: a claim in %s", nc.Zone)
		}
	}
}

// --reserved-enis lowers every type's pods in predictions, as the controller's
// list of types lowers them: a pool without a class and one whose class has no
// networkInterfaces both see an m5.large of 20 pods with one reserved (29 without).
func TestPredictionsKeepTheReservedENIs(t *testing.T) {
	in := &Inputs{}
	manifests := classPool + limitedClass + `---
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: classless}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: missing}
`
	if err := in.Read(strings.NewReader(manifests), "test.yaml"); err != nil {
		t.Fatal(err)
	}
	cat, err := catalog.EmbeddedAWS()
	if err != nil {
		t.Fatal(err)
	}
	for reserved, want := range map[int]int64{0: 29, 1: 20} {
		ctl := defaults()
		ctl.ReservedENIs = reserved
		p, err := prepare(in, cat, ctl)
		if err != nil {
			t.Fatal(err)
		}
		for _, np := range in.NodePools {
			i := slices.IndexFunc(p.typesOf(np), func(it *scheduling.InstanceType) bool { return it.Name == "m5.large" })
			if i < 0 {
				t.Fatalf("pool %s has no m5.large", np.Name)
			}
			capacity := p.typesOf(np)[i].Capacity.ToResourceList()
			if got := capacity.Pods().Value(); got != want {
				t.Errorf("reserved ENIs %d, pool %s: an m5.large holds %d pods, want %d", reserved, np.Name, got, want)
			}
		}
	}
}
