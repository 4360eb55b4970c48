package simulate

import (
	"strings"
	"testing"

	clocktesting "k8s.io/utils/clock/testing"
)

// kwok's stock stages write a Node's allocatable over what its instance has; a
// snapshot of such a cluster crashed simulate (a nil map in the stand-in
// controller that flagged the node). The node must be planned with what its
// instance was launched with, as the controller plans it.
const oversizedSnapshot = `
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: default}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements:
      - {key: kubernetes.io/arch, operator: In, values: [amd64]}
---
apiVersion: karpenter.sh/v1
kind: NodeClaim
metadata:
  name: default-abcde
  labels: {karpenter.sh/nodepool: default, node.kubernetes.io/instance-type: m5.large}
spec:
  nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
  requirements:
  - {key: node.kubernetes.io/instance-type, operator: In, values: [m5.large]}
status:
  providerID: aws:///us-west-2a/i-0123456789abcdef0
  nodeName: ip-10-0-1-1.us-west-2.compute.internal
  capacity: {cpu: "2", memory: 8Gi, pods: "29"}
  allocatable: {cpu: 1930m, memory: 7Gi, pods: "29"}
  conditions:
  - {type: Launched, status: "True", lastTransitionTime: "2026-11-21T00:00:00Z", reason: Launched, message: ""}
  - {type: Registered, status: "True", lastTransitionTime: "2026-11-21T00:00:00Z", reason: Registered, message: ""}
  - {type: Initialized, status: "True", lastTransitionTime: "2026-11-21T00:00:00Z", reason: Initialized, message: ""}
---
apiVersion: v1
kind: Node
metadata:
  name: ip-10-0-1-1.us-west-2.compute.internal
  labels:
    karpenter.sh/nodepool: default
    node.kubernetes.io/instance-type: m5.large
    topology.kubernetes.io/zone: us-west-2a
    kubernetes.io/arch: amd64
    kubernetes.io/os: linux
    karpenter.sh/capacity-type: on-demand
spec:
  providerID: aws:///us-west-2a/i-0123456789abcdef0
status:
  capacity: {cpu: "32", memory: 256Gi, pods: "110"}
  allocatable: {cpu: "32", memory: 256Gi, pods: "110"}
  conditions:
  - {type: Ready, status: "True"}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: default}
spec:
  replicas: 4
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - name: web
        image: nginx
        resources: {requests: {cpu: "1", memory: 1Gi}}
`

func TestSimulateSurvivesANodeReportingMoreThanItsInstance(t *testing.T) {
	in := &Inputs{}
	if err := in.Read(strings.NewReader(oversizedSnapshot), "oversized.yaml"); err != nil {
		t.Fatal(err)
	}
	plan, err := Run(in, westTypes(t), defaults(), clocktesting.NewFakeClock(fakeNow))
	if err != nil {
		t.Fatal(err)
	}
	placedOnNode := 0
	for _, e := range plan.ExistingNodes {
		placedOnNode += len(e.Pods)
	}
	// The instance has 1930m allocatable: one pod of 1 cpu, not the 32 the Node claims.
	if placedOnNode != 1 || plan.Summary.Scheduled != 4 {
		t.Errorf("placed %d pod(s) on the node and %d in all; want 1 there (its instance's allocatable) and 4 in all", placedOnNode, plan.Summary.Scheduled)
	}
	if _, err := Consolidate(in, westTypes(t), defaults(), fakeNow); err != nil {
		t.Fatal(err)
	}
}

// A Node labelled with a pool but with no NodeClaim (adopted, or read from a
// snapshot without its claim) is in the pool: at limits {nodes: 1} it is the one
// node, and nothing more launches.
const claimlessNodeSnapshot = `
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: default}
spec:
  limits: {nodes: "1"}
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
---
apiVersion: v1
kind: Node
metadata:
  name: ip-10-0-1-1.us-west-2.compute.internal
  labels:
    karpenter.sh/nodepool: default
    node.kubernetes.io/instance-type: m5.large
    topology.kubernetes.io/zone: us-west-2a
    kubernetes.io/arch: amd64
    kubernetes.io/os: linux
spec:
  providerID: aws:///us-west-2a/i-0123456789abcdef0
status:
  capacity: {cpu: "2", memory: 8Gi, pods: "29"}
  allocatable: {cpu: 1930m, memory: 7Gi, pods: "29"}
  conditions:
  - {type: Ready, status: "True"}
---
apiVersion: v1
kind: Pod
metadata: {name: big, namespace: default}
spec:
  containers:
  - name: c
    image: nginx
    resources: {requests: {cpu: "4", memory: 1Gi}}
`

func TestPoolLimitsCountNodesWithoutClaims(t *testing.T) {
	in := &Inputs{}
	if err := in.Read(strings.NewReader(claimlessNodeSnapshot), "claimless.yaml"); err != nil {
		t.Fatal(err)
	}
	plan, err := Run(in, westTypes(t), defaults(), clocktesting.NewFakeClock(fakeNow))
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.NodeClaims) != 0 {
		t.Errorf("planned %d node(s) in a pool at its limit of 1 node", len(plan.NodeClaims))
	}
	if len(plan.Unschedulable) != 1 || !strings.Contains(plan.Unschedulable[0].Reason, "limit") {
		t.Errorf("unschedulable %v, want the pod with the pool's limit named", plan.Unschedulable)
	}
}

// simulate's JSON lists each new NodeClaim's requirements as the controller writes
// them, so a user sees what EC2 is asked for: here the GPU name the pod selects,
// and only types that have it.
func TestPlanListsTheNodeClaimsRequirements(t *testing.T) {
	in := &Inputs{}
	doc := strings.Replace(oversizedSnapshot[:strings.Index(oversizedSnapshot, "---")], "requirements:\n      - {key: kubernetes.io/arch, operator: In, values: [amd64]}", "requirements: []", 1) + `---
apiVersion: v1
kind: Pod
metadata: {name: trainer, namespace: default}
spec:
  nodeSelector: {karpenter.k8s.aws/instance-gpu-name: t4}
  containers:
  - {name: c, image: trainer, resources: {requests: {cpu: "1", memory: 1Gi}}}
`
	if err := in.Read(strings.NewReader(doc), "gpu.yaml"); err != nil {
		t.Fatal(err)
	}
	plan, err := Run(in, westTypes(t), defaults(), clocktesting.NewFakeClock(fakeNow))
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.NodeClaims) != 1 {
		t.Fatalf("planned %d claims, want 1 (unschedulable: %v)", len(plan.NodeClaims), plan.Unschedulable)
	}
	got := map[string][]string{}
	for _, r := range plan.NodeClaims[0].Requirements {
		got[r.Key] = r.Values
	}
	if v := got["karpenter.k8s.aws/instance-gpu-name"]; len(v) != 1 || v[0] != "t4" {
		t.Errorf("requirements %v lack instance-gpu-name In [t4]", plan.NodeClaims[0].Requirements)
	}
	for _, name := range got["node.kubernetes.io/instance-type"] {
		if !strings.HasPrefix(name, "g4dn.") {
			t.Errorf("the claim offers EC2 %s, which has no T4", name)
		}
	}
}

// A DaemonSet whose template asks 4 CPU while its running pods ask 1 (a vertical
// autoscaler set them, or the template changed since): a new node holds what a
// running pod asks, as Karpenter reads it, not the template.
const liveDaemonSetSnapshot = `
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: default}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements:
      - {key: karpenter.k8s.aws/instance-family, operator: In, values: [m5]}
---
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: agent, namespace: kube-system, uid: 5a1d2c3e-0000-4000-8000-000000000001}
spec:
  selector: {matchLabels: {app: agent}}
  template:
    metadata: {labels: {app: agent}}
    spec:
      containers:
      - {name: agent, image: agent, resources: {requests: {cpu: "4", memory: 1Gi}}}
---
apiVersion: v1
kind: Pod
metadata:
  name: agent-x1
  namespace: kube-system
  labels: {app: agent}
  creationTimestamp: "2026-11-21T00:00:00Z"
  ownerReferences:
  - {apiVersion: apps/v1, kind: DaemonSet, name: agent, uid: 5a1d2c3e-0000-4000-8000-000000000001, controller: true}
spec:
  nodeName: elsewhere
  containers:
  - {name: agent, image: agent, resources: {requests: {cpu: "1", memory: 1Gi}}}
status: {phase: Running}
---
apiVersion: v1
kind: Pod
metadata: {name: app, namespace: default}
spec:
  containers:
  - {name: app, image: app, resources: {requests: {cpu: "2", memory: 2Gi}}}
`

func TestDaemonSetOverheadIsWhatItsPodsAsk(t *testing.T) {
	in := &Inputs{}
	if err := in.Read(strings.NewReader(liveDaemonSetSnapshot), "daemonset.yaml"); err != nil {
		t.Fatal(err)
	}
	plan, err := Run(in, westTypes(t), defaults(), clocktesting.NewFakeClock(fakeNow))
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.NodeClaims) != 1 || plan.NodeClaims[0].InstanceType != "m5.xlarge" {
		t.Errorf("planned %+v; want one m5.xlarge (2 CPU for the pod, 1 for the agent's running pods), not a node sized for the template's 4", plan.NodeClaims)
	}
}
