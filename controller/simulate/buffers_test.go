package simulate

import (
	"bytes"
	"strings"
	"testing"
)

// buffersInput are three buffers, one of which names a PodTemplate not there.
const buffersInput = overlayPool + `
---
apiVersion: v1
kind: PodTemplate
metadata: {name: spare}
template:
  metadata: {labels: {app: spare}}
  spec:
    containers:
    - name: c
      image: pause
      resources: {requests: {cpu: "1", memory: 1Gi}}
---
apiVersion: autoscaling.x-k8s.io/v1beta1
kind: CapacityBuffer
metadata: {name: fixed}
spec:
  podTemplateRef: {name: spare}
  replicas: 2
---
apiVersion: autoscaling.x-k8s.io/v1beta1
kind: CapacityBuffer
metadata: {name: half}
spec:
  scalableRef: {apiGroup: apps, kind: Deployment, name: web}
  percentage: 50
---
apiVersion: autoscaling.x-k8s.io/v1beta1
kind: CapacityBuffer
metadata: {name: lost}
spec:
  podTemplateRef: {name: nowhere}
  replicas: 1
`

// TestSimulateCapacityBuffer: with the CapacityBuffer gate on, a buffer of two
// copies of a PodTemplate and one of 50% of a Deployment's 2 replicas are planned
// with the pending pods: the room they keep is in the plan's new nodes, the summary
// counts only real pods, and the table says where each buffer's room is. With the
// gate off, as the controller runs by default, no room is kept and each buffer says
// why.
func TestSimulateCapacityBuffer(t *testing.T) {
	plan := runManifests(t, buffersInput, "CapacityBuffer=true")
	if plan.Summary.Pods != 1 || plan.Summary.Scheduled != 1 {
		t.Errorf("summary %+v; want the one web pod, buffers apart", plan.Summary)
	}
	pods := 0
	for _, nc := range plan.NodeClaims {
		pods += len(nc.Pods)
	}
	if pods != 4 {
		t.Errorf("%d pods on new nodes; want the web pod and 3 buffer pods", pods)
	}
	if len(plan.Buffers) != 3 || plan.Buffers[0].Name != "default/fixed" || plan.Buffers[0].Replicas != 2 || plan.Buffers[0].New != 2 ||
		plan.Buffers[1].Name != "default/half" || plan.Buffers[1].Replicas != 1 || plan.Buffers[2].Problem != "PodTemplate default/nowhere is not in the input" {
		t.Errorf("buffers %+v", plan.Buffers)
	}
	var table bytes.Buffer
	if err := plan.WriteTable(&table); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"CAPACITY BUFFERS (room kept, never bound)", "default/fixed  2     0 on existing nodes, 2 on new, 0 nowhere", "1/1 pods scheduled"} {
		if !strings.Contains(table.String(), want) {
			t.Errorf("the table lacks %q:\n%s", want, table.String())
		}
	}
	off := runManifests(t, buffersInput)
	pods = 0
	for _, nc := range off.NodeClaims {
		pods += len(nc.Pods)
	}
	if pods != 1 || len(off.Buffers) != 3 || off.Buffers[0].Replicas != 0 || !strings.Contains(off.Buffers[0].Problem, "--feature-gates CapacityBuffer=true") {
		t.Errorf("gate off: %d pods on new nodes, buffers %+v; want the web pod alone and each buffer saying the gate is off", pods, off.Buffers)
	}
}
