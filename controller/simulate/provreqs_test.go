package simulate

import (
	"bytes"
	"strings"
	"testing"
)

// requestsInput are a node with room for one 2-cpu pod, and the objects Kueue
// creates for a Job of 4 pods (2 cpu each, more than an m6i.large's): a
// PodTemplate and a best-effort-atomic request; a check-capacity request for the
// same pods, one asked not to retry, one of a class Dovetail does not serve, one
// naming a PodTemplate not in the input; then two checks for one pod each.
const requestsInput = `
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: default}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements:
      - {key: node.kubernetes.io/instance-type, operator: In, values: [m6i.large, m6i.xlarge]}
      - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
---
apiVersion: v1
kind: Node
metadata:
  name: node-a
  labels: {karpenter.sh/nodepool: default, node.kubernetes.io/instance-type: m6i.xlarge, kubernetes.io/hostname: node-a}
status:
  allocatable: {cpu: 3920m, memory: 14Gi, pods: "58"}
  capacity: {cpu: "4", memory: 16Gi, pods: "58"}
---
apiVersion: autoscaling.x-k8s.io/v1
kind: ProvisioningRequest
metadata: {name: eval-check-1, namespace: ml, creationTimestamp: "2026-11-29T10:05:00Z"}
spec:
  provisioningClassName: check-capacity.autoscaling.x-k8s.io
  podSets: [{podTemplateRef: {name: ppt-train-main}, count: 1}]
---
apiVersion: autoscaling.x-k8s.io/v1
kind: ProvisioningRequest
metadata: {name: eval-check-2, namespace: ml, creationTimestamp: "2026-11-29T10:06:00Z"}
spec:
  provisioningClassName: check-capacity.autoscaling.x-k8s.io
  podSets: [{podTemplateRef: {name: ppt-train-main}, count: 1}]
---
apiVersion: v1
kind: PodTemplate
metadata: {name: ppt-train-main, namespace: ml}
template:
  metadata: {labels: {job-name: train}}
  spec:
    containers:
    - name: worker
      image: pause
      resources: {requests: {cpu: "2", memory: 1Gi}}
---
apiVersion: autoscaling.x-k8s.io/v1
kind: ProvisioningRequest
metadata: {name: train-provision-1, namespace: ml, creationTimestamp: "2026-11-29T10:00:00Z"}
spec:
  provisioningClassName: best-effort-atomic-scale-up.autoscaling.x-k8s.io
  podSets: [{podTemplateRef: {name: ppt-train-main}, count: 4}]
---
apiVersion: autoscaling.x-k8s.io/v1
kind: ProvisioningRequest
metadata: {name: train-check-1, namespace: ml, creationTimestamp: "2026-11-29T10:01:00Z"}
spec:
  provisioningClassName: check-capacity.autoscaling.x-k8s.io
  podSets: [{podTemplateRef: {name: ppt-train-main}, count: 4}]
---
apiVersion: autoscaling.x-k8s.io/v1
kind: ProvisioningRequest
metadata: {name: train-check-2, namespace: ml, creationTimestamp: "2026-11-29T10:02:00Z"}
spec:
  provisioningClassName: check-capacity.autoscaling.x-k8s.io
  parameters: {noRetry: "true"}
  podSets: [{podTemplateRef: {name: ppt-train-main}, count: 4}]
---
apiVersion: autoscaling.x-k8s.io/v1
kind: ProvisioningRequest
metadata: {name: queued, namespace: ml, creationTimestamp: "2026-11-29T10:03:00Z"}
spec:
  provisioningClassName: queued-provisioning.gke.io
  podSets: [{podTemplateRef: {name: ppt-train-main}, count: 4}]
---
apiVersion: autoscaling.x-k8s.io/v1
kind: ProvisioningRequest
metadata: {name: lost, namespace: ml, creationTimestamp: "2026-11-29T10:04:00Z"}
spec:
  provisioningClassName: best-effort-atomic-scale-up.autoscaling.x-k8s.io
  podSets: [{podTemplateRef: {name: ppt-gone-main}, count: 1}]
`

// TestSimulateProvisioningRequests: each request is planned as a unit and named
// in the output: the atomic one launches a node for every pod together, the
// checks find no capacity (one retries, one fails), the other class is not
// Dovetail's, and a missing PodTemplate fails the request as the controller
// fails it. None of their pods are the plan's pending pods.
func TestSimulateProvisioningRequests(t *testing.T) {
	plan := runManifests(t, requestsInput)
	if len(plan.NodeClaims) != 0 || plan.Summary.Pods != 0 {
		t.Errorf("the requests' pods are not pending pods: %d nodeclaims, summary %+v", len(plan.NodeClaims), plan.Summary)
	}
	// The first one-pod check finds the node's room and books it; the second finds none.
	want := map[string]string{"ml/train-provision-1": RequestLaunches, "ml/train-check-1": RequestNotFound, "ml/train-check-2": RequestFailed,
		"ml/queued": RequestIgnored, "ml/lost": RequestFailed, "ml/eval-check-1": RequestFound, "ml/eval-check-2": RequestNotFound}
	if len(plan.ProvisioningRequests) != len(want) {
		t.Fatalf("%d requests planned; want %d", len(plan.ProvisioningRequests), len(want))
	}
	for _, r := range plan.ProvisioningRequests {
		if r.Outcome != want[r.Name] {
			t.Errorf("%s: %s (%s); want %s", r.Name, r.Outcome, r.Reason, want[r.Name])
		}
	}
	atomic := plan.ProvisioningRequests[0]
	if atomic.Name != "ml/train-provision-1" || len(atomic.NodeClaims) == 0 || atomic.PricePerHour <= 0 {
		t.Fatalf("the first request, in creation order: %+v", atomic)
	}
	pods := 0
	for _, nc := range atomic.NodeClaims {
		pods += len(nc.Pods)
		if nc.InstanceType != "m6i.xlarge" {
			t.Errorf("a 2-cpu pod planned on %s; only m6i.xlarge holds one", nc.InstanceType)
		}
	}
	if pods != 3 || atomic.OnExistingNodes != 1 || atomic.Pods != 4 {
		t.Errorf("the atomic request: %d pods on new nodes, %d on node-a (request %d); want 3 and 1", pods, atomic.OnExistingNodes, atomic.Pods)
	}
	if lost := plan.ProvisioningRequests[4]; !strings.Contains(lost.Reason, "ppt-gone-main") {
		t.Errorf("the request naming a missing PodTemplate says %q; want it named", lost.Reason)
	}
	var out bytes.Buffer
	if err := plan.WriteTable(&out); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"PROVISIONING REQUESTS", "ml/train-provision-1", "Launches", "ml/train-check-2", "NotFound"} {
		if !strings.Contains(out.String(), s) {
			t.Errorf("the table lacks %q:\n%s", s, out.String())
		}
	}
}

// A provisioned request's capacity is held for its pods: a pending pod that
// would fit into it gets a node of its own, as the controller plans it.
func TestSimulateHoldsAProvisionedRequestsBooking(t *testing.T) {
	const input = `
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: default}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements:
      - {key: node.kubernetes.io/instance-type, operator: In, values: [m6i.xlarge]}
      - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
---
apiVersion: v1
kind: Node
metadata:
  name: gang-node
  labels: {karpenter.sh/nodepool: default, node.kubernetes.io/instance-type: m6i.xlarge, kubernetes.io/hostname: gang-node, dovetail.sh/provisioning-request-uid: uid-train}
status:
  allocatable: {cpu: 3920m, memory: 14Gi, pods: "58"}
  capacity: {cpu: "4", memory: 16Gi, pods: "58"}
---
apiVersion: v1
kind: PodTemplate
metadata: {name: ppt-train-main, namespace: ml}
template:
  spec:
    containers:
    - {name: worker, image: pause, resources: {requests: {cpu: "3", memory: 1Gi}}}
---
apiVersion: autoscaling.x-k8s.io/v1
kind: ProvisioningRequest
metadata: {name: train-provision-1, namespace: ml, uid: uid-train}
spec:
  provisioningClassName: best-effort-atomic-scale-up.autoscaling.x-k8s.io
  podSets: [{podTemplateRef: {name: ppt-train-main}, count: 1}]
status:
  conditions:
  - {type: Provisioned, status: "True", reason: CapacityIsProvisioned, message: found, lastTransitionTime: "2026-11-29T10:00:00Z"}
---
apiVersion: v1
kind: Pod
metadata: {name: web, namespace: default}
spec:
  containers:
  - {name: web, image: web, resources: {requests: {cpu: "2", memory: 1Gi}}}
`
	plan := runManifests(t, input)
	if len(plan.ExistingNodes) != 0 || len(plan.NodeClaims) != 1 {
		t.Errorf("existing %+v, %d nodeclaims; want the web pod on a node of its own, the gang's node booked", plan.ExistingNodes, len(plan.NodeClaims))
	}
	if len(plan.ProvisioningRequests) != 1 || plan.ProvisioningRequests[0].Outcome != RequestBooked || plan.ProvisioningRequests[0].OnExistingNodes != 1 {
		t.Errorf("requests %+v; want the request booked on its node", plan.ProvisioningRequests)
	}
}
