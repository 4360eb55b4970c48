package simulate

import (
	"strings"
	"testing"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/dovetail-sh/dovetail/controller/catalog"
	"github.com/dovetail-sh/dovetail/controller/scheduling"
)

const simulatePool = `
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: default}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements:
        - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
        - {key: kubernetes.io/arch, operator: In, values: [amd64]}
`

// allocatableCPU is what the catalog says a type gives pods, in millicores.
func allocatableCPU(t *testing.T, name string) int64 {
	t.Helper()
	for _, it := range testTypes(t).ForEngine(scheduling.DefaultAllocatableSettings()) {
		if it.Name == name {
			return it.Allocatable.MilliCPU
		}
	}
	t.Fatalf("%s is not in the catalog", name)
	return 0
}

func testTypes(t *testing.T) *catalog.File {
	t.Helper()
	cat, err := catalog.EmbeddedAWS()
	if err != nil {
		t.Fatal(err)
	}
	return cat.InZones([]string{"us-west-2a", "us-west-2b", "us-west-2c"})
}

// runManifests plans manifests with the embedded catalog in three zones, under the
// controller's default settings with the feature gates given (Name=bool,...).
func runManifests(t *testing.T, manifests string, gates ...string) *Plan {
	t.Helper()
	in := &Inputs{}
	if err := in.Read(strings.NewReader(manifests), "test.yaml"); err != nil {
		t.Fatal(err)
	}
	plan, err := Run(in, testTypes(t), defaults(gates...), clocktesting.NewFakePassiveClock(fakeNow))
	if err != nil {
		t.Fatal(err)
	}
	return plan
}

func reasonOf(plan *Plan, pod string) string {
	for _, u := range plan.Unschedulable {
		if u.Pod == pod {
			return u.Reason
		}
	}
	return ""
}

// A container that sets only limits asks for them: the API server defaults a
// Pod's requests to its limits, but a Deployment's or DaemonSet's template is read
// here before any API server sees it. 100 cpu limited is not a 4-cpu node, and a
// DaemonSet limited to 3 cpu is reserved on every node.
func TestLimitsWithoutRequestsAreRequests(t *testing.T) {
	plan := runManifests(t, simulatePool+`
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: hungry}
spec:
  replicas: 1
  selector: {matchLabels: {app: hungry}}
  template:
    metadata: {labels: {app: hungry}}
    spec:
      containers: [{name: app, image: app, resources: {limits: {cpu: "100", memory: 8Gi}}}]
`)
	if len(plan.NodeClaims) != 1 {
		t.Fatalf("claims %+v, unschedulable %+v", plan.NodeClaims, plan.Unschedulable)
	}
	if it := plan.NodeClaims[0].InstanceType; allocatableCPU(t, it) < 100_000 {
		t.Errorf("a pod limited (so requesting) 100 cpu planned onto %s", it)
	}
	plan = runManifests(t, simulatePool+`
---
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: agent}
spec:
  selector: {matchLabels: {app: agent}}
  template:
    metadata: {labels: {app: agent}}
    spec:
      containers: [{name: agent, image: agent, resources: {limits: {cpu: "3", memory: 1Gi}}}]
---
apiVersion: v1
kind: Pod
metadata: {name: small}
spec:
  containers: [{name: app, image: app, resources: {requests: {cpu: "1", memory: 1Gi}}}]
`)
	if len(plan.NodeClaims) != 1 {
		t.Fatalf("claims %+v, unschedulable %+v", plan.NodeClaims, plan.Unschedulable)
	}
	if it := plan.NodeClaims[0].InstanceType; allocatableCPU(t, it) < 4_000 {
		t.Errorf("a 1-cpu pod beside a DaemonSet limited to 3 cpu planned onto %s, which cannot hold both", it)
	}
}

// Volumes Karpenter will not provision for get no node, and the reason names the
// volume: a claim naming a volume the binder has not marked bound, an unbound
// claim without a class, an ephemeral volume's template with an empty class, and a
// class that does not exist.
func TestVolumesKarpenterRefusesAreReported(t *testing.T) {
	plan := runManifests(t, simulatePool+`
---
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: gp3}
provisioner: ebs.csi.aws.com
volumeBindingMode: WaitForFirstConsumer
---
apiVersion: v1
kind: PersistentVolume
metadata: {name: pv-a}
spec:
  capacity: {storage: 10Gi}
  accessModes: [ReadWriteOnce]
  csi: {driver: ebs.csi.aws.com, volumeHandle: vol-a}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: binding}
spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 10Gi}}, volumeName: pv-a}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: classless}
spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 10Gi}}}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: unknown-class}
spec: {accessModes: [ReadWriteOnce], storageClassName: fast, resources: {requests: {storage: 10Gi}}}
---
apiVersion: v1
kind: Pod
metadata: {name: binding}
spec:
  containers: [{name: app, image: app, resources: {requests: {cpu: "1", memory: 1Gi}}}]
  volumes: [{name: data, persistentVolumeClaim: {claimName: binding}}]
---
apiVersion: v1
kind: Pod
metadata: {name: classless}
spec:
  containers: [{name: app, image: app, resources: {requests: {cpu: "1", memory: 1Gi}}}]
  volumes: [{name: data, persistentVolumeClaim: {claimName: classless}}]
---
apiVersion: v1
kind: Pod
metadata: {name: ephemeral}
spec:
  containers: [{name: app, image: app, resources: {requests: {cpu: "1", memory: 1Gi}}}]
  volumes:
    - name: scratch
      ephemeral: {volumeClaimTemplate: {spec: {storageClassName: "", accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}}}
---
apiVersion: v1
kind: Pod
metadata: {name: unknown-class}
spec:
  containers: [{name: app, image: app, resources: {requests: {cpu: "1", memory: 1Gi}}}]
  volumes: [{name: data, persistentVolumeClaim: {claimName: unknown-class}}]
---
apiVersion: v1
kind: Pod
metadata: {name: fine}
spec:
  containers: [{name: app, image: app, resources: {requests: {cpu: "1", memory: 1Gi}}}]
`)
	want := map[string]string{
		"default/binding":       `volume "data": persistentvolumeclaim default/binding names volume pv-a but has no pv.kubernetes.io/bind-completed annotation`,
		"default/classless":     `volume "data": persistentvolumeclaim default/classless is not bound and names no storage class`,
		"default/ephemeral":     `volume "scratch": the ephemeral volume's claim template names no storage class`,
		"default/unknown-class": `volume "data": storageclass fast of persistentvolumeclaim default/unknown-class not found`,
	}
	for pod, reason := range want {
		if got := reasonOf(plan, pod); !strings.HasPrefix(got, reason) {
			t.Errorf("%s: reason %q, want it to start %q", pod, got, reason)
		}
	}
	if len(plan.NodeClaims) != 1 || len(plan.NodeClaims[0].Pods) != 1 || plan.NodeClaims[0].Pods[0] != "default/fine" {
		t.Errorf("claims %+v; want one, for default/fine only", plan.NodeClaims)
	}
}

// simulate builds the engine's input with the controller's own function, so it
// sees what the controller sees: a pool whose Ready condition is present and not
// True gets nothing (one with no status, a manifest from Git, counts as Ready); a
// node.kubernetes.io taint and an uninitialized node's startup taints go away by
// themselves and do not keep pods off a node with room; a NodeClaim with no Node
// yet is capacity in flight.
func TestSimulateSeesWhatTheControllerSees(t *testing.T) {
	const notReadyPool = `
---
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: broken}
spec:
  weight: 100
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: missing}
      requirements:
        - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
status:
  conditions:
    - {type: Ready, status: "False", reason: NodeClassNotReady, message: "", lastTransitionTime: "2026-11-01T00:00:00Z"}
---
apiVersion: v1
kind: Pod
metadata: {name: web}
spec:
  containers: [{name: app, image: app, resources: {requests: {cpu: "1", memory: 1Gi}}}]
`
	plan := runManifests(t, simulatePool+notReadyPool)
	if len(plan.NodeClaims) != 1 || plan.NodeClaims[0].NodePool != "default" {
		t.Errorf("claims %+v; want one from the Ready pool, none from the one whose Ready is False", plan.NodeClaims)
	}

	const nodeWithRoom = `
---
apiVersion: v1
kind: Node
metadata:
  name: ip-10-0-1-1
  labels: {kubernetes.io/hostname: ip-10-0-1-1, karpenter.sh/nodepool: default, topology.kubernetes.io/zone: us-west-2a, kubernetes.io/arch: amd64}
spec:
  providerID: aws:///us-west-2a/i-0abc
  taints:
    - {key: node.kubernetes.io/not-ready, effect: NoSchedule}
    - {key: example.com/agent-not-ready, effect: NoSchedule}
status:
  capacity: {cpu: "4", memory: 16Gi, pods: "58"}
  allocatable: {cpu: 3920m, memory: 15Gi, pods: "58"}
---
apiVersion: karpenter.sh/v1
kind: NodeClaim
metadata:
  name: default-abc
  labels: {karpenter.sh/nodepool: default}
spec:
  nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
  requirements:
    - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
  startupTaints:
    - {key: example.com/agent-not-ready, effect: NoSchedule}
status:
  providerID: aws:///us-west-2a/i-0abc
  capacity: {cpu: "4", memory: 16Gi, pods: "58"}
  allocatable: {cpu: 3920m, memory: 15Gi, pods: "58"}
---
apiVersion: v1
kind: Pod
metadata: {name: web}
spec:
  containers: [{name: app, image: app, resources: {requests: {cpu: "1", memory: 1Gi}}}]
`
	plan = runManifests(t, simulatePool+nodeWithRoom)
	if len(plan.NodeClaims) != 0 || len(plan.ExistingNodes) != 1 {
		t.Errorf("claims %+v, existing %+v; want the pod on the starting node, nothing bought", plan.NodeClaims, plan.ExistingNodes)
	}

	const inFlight = `
---
apiVersion: karpenter.sh/v1
kind: NodeClaim
metadata:
  name: default-xyz
  labels: {karpenter.sh/nodepool: default}
spec:
  nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
  requirements:
    - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
    - {key: node.kubernetes.io/instance-type, operator: In, values: [m5.xlarge]}
  resources:
    requests: {cpu: "3", memory: 12Gi, pods: "10"}
---
apiVersion: v1
kind: Pod
metadata: {name: web}
spec:
  containers: [{name: app, image: app, resources: {requests: {cpu: "1", memory: 1Gi}}}]
`
	plan = runManifests(t, simulatePool+inFlight)
	if len(plan.NodeClaims) != 0 || len(plan.ExistingNodes) != 1 || plan.ExistingNodes[0].Name != "default-xyz" {
		t.Errorf("claims %+v, existing %+v; want the pod on the NodeClaim being launched", plan.NodeClaims, plan.ExistingNodes)
	}
}
