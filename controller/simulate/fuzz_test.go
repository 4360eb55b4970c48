package simulate

import (
	"bytes"
	"strings"
	"testing"
)

// FuzzInputsRead: any byte stream either reads or fails with an error that names
// its source, and never panics or allocates without bound.
func FuzzInputsRead(f *testing.F) {
	for _, seed := range []string{
		"apiVersion: v1\nkind: Pod\nmetadata: {name: web}\nspec: {containers: [{name: c, resources: {requests: {cpu: 500m}}}]}\n",
		"apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: api}\nspec:\n  replicas: 3\n  template:\n    spec: {containers: [{name: c}]}\n",
		"apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: api}\nspec: {replicas: -1}\n",
		"apiVersion: batch/v1\nkind: Job\nmetadata: {name: j}\nspec: {parallelism: 4, completions: 2}\n",
		"apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: default}\nspec:\n  template:\n    spec:\n      requirements: [{key: karpenter.k8s.aws/instance-cpu, operator: Gt, values: [\"4\"]}]\n      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}\n",
		"apiVersion: v1\nkind: Node\nmetadata: {name: n}\nstatus: {allocatable: {cpu: \"4\", memory: 16Gi, pods: \"110\"}}\n",
		"---\n# only a comment\n---\n",
		"kind: [",
		"{\"apiVersion\": \"v1\", \"kind\": \"Pod\", \"metadata\": {\"name\": \"j\"}}",
		"apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: Pod, metadata: {name: p}, spec: {nodeName: n, containers: [{name: c}]}}\n- {apiVersion: v1, kind: List, items: []}\n",
		"apiVersion: karpenter.sh/v1\nkind: NodeClaim\nmetadata: {name: default-a}\nspec: {requirements: [], nodeClassRef: {group: g, kind: k, name: n}}\nstatus: {providerID: aws:///a/i-1, conditions: [{type: Initialized, status: \"True\"}]}\n",
		"apiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata: {name: p}\nspec: {selector: {matchLabels: {app: a}}}\nstatus: {disruptionsAllowed: 0}\n",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		in := &Inputs{}
		err := in.Read(bytes.NewReader(data), "fuzz.yaml")
		if err != nil && !strings.HasPrefix(err.Error(), "fuzz.yaml") {
			t.Fatalf("error does not name the source: %v", err)
		}
		if len(in.Pods) > maxReplicas*8 {
			t.Fatalf("%d pods from %d bytes", len(in.Pods), len(data))
		}
	})
}
