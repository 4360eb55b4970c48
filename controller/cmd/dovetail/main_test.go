package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const pool = `apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: default}
spec:
  template:
    spec:
      requirements:
        - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
`

const deployment = `apiVersion: apps/v1
kind: Deployment
metadata: {name: inflate}
spec:
  replicas: 4
  selector: {matchLabels: {app: inflate}}
  template:
    metadata: {labels: {app: inflate}}
    spec:
      containers:
        - name: pause
          image: pause
          resources: {requests: {cpu: "1", memory: 1Gi}}
`

const catalogJSON = `{"instanceTypes": [{"name": "m5.xlarge", "architecture": "amd64", "cpu": "4", "memory": "16Gi", "pods": 58,
  "offerings": [{"zone": "us-west-2a", "capacityType": "on-demand", "price": 0.192, "available": true}]}]}`

func write(t *testing.T, name, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestSimulateJSON(t *testing.T) {
	var out, errOut bytes.Buffer
	code := run([]string{"simulate", "-f", write(t, "pool.yaml", pool), "-f", write(t, "d.yaml", deployment),
		"--catalog", write(t, "c.json", catalogJSON), "-o", "json"}, &out, &errOut)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	var plan struct {
		NodeClaims []struct {
			NodePool, InstanceType, Zone, CapacityType string
			PricePerHour                               float64
			InstanceTypeOptions                        int
			Pods                                       []string
		}
		ExistingNodes []any
		Unschedulable []any
		Summary       struct {
			Pods, Scheduled, NodeClaims int
			PricePerHour, SolveSeconds  float64
		}
	}
	if err := json.Unmarshal(out.Bytes(), &plan); err != nil {
		t.Fatalf("output is not the documented JSON: %v\n%s", err, out.String())
	}
	// 4 pods of 1 cpu need two m5.xlarge (3920m allocatable each).
	if plan.Summary.Pods != 4 || plan.Summary.Scheduled != 4 || plan.Summary.NodeClaims != 2 {
		t.Errorf("summary = %+v, want 4 pods scheduled on 2 nodeclaims", plan.Summary)
	}
	if nc := plan.NodeClaims[0]; nc.InstanceType != "m5.xlarge" || nc.Zone != "us-west-2a" || nc.CapacityType != "on-demand" || nc.PricePerHour != 0.192 || nc.NodePool != "default" {
		t.Errorf("nodeclaim = %+v", nc)
	}
	if plan.Summary.PricePerHour != 0.384 {
		t.Errorf("total price = %v, want 0.384", plan.Summary.PricePerHour)
	}
}

func TestSimulateExitCodes(t *testing.T) {
	cat := write(t, "c.json", catalogJSON)
	huge := strings.Replace(deployment, `cpu: "1"`, `cpu: "64"`, 1)
	cases := []struct {
		name     string
		files    []string
		wantCode int
		wantText string
	}{
		{"unschedulable pods are not an input error", []string{pool, huge}, 0, "no instance type has enough resources"},
		{"unknown kind names the object", []string{pool, "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w}\n"}, 1, "unsupported kind example.com/v1 Widget"},
		{"malformed YAML names the document", []string{pool, "kind: [unclosed\n"}, 1, "document 1"},
		{"bad NodePool field is refused", []string{strings.Replace(pool, "nodeClassRef", "nodeClassReff", 1)}, 1, `unknown field "nodeClassReff"`},
		{"bad operator names the requirement", []string{strings.Replace(pool, "operator: In", "operator: Within", 1)}, 1, "unknown operator"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			args := []string{"simulate", "--catalog", cat}
			for i, body := range tc.files {
				args = append(args, "-f", write(t, "f"+string(rune('a'+i))+".yaml", body))
			}
			var out, errOut bytes.Buffer
			code := run(args, &out, &errOut)
			if code != tc.wantCode {
				t.Fatalf("exit %d, want %d; stderr: %s", code, tc.wantCode, errOut.String())
			}
			if all := out.String() + errOut.String(); !strings.Contains(all, tc.wantText) {
				t.Errorf("output does not mention %q:\n%s", tc.wantText, all)
			}
		})
	}
	var out, errOut bytes.Buffer
	if code := run([]string{"simulate"}, &out, &errOut); code != 2 || !strings.Contains(errOut.String(), "-f FILE is required") {
		t.Errorf("missing -f: exit %d, %s", code, errOut.String())
	}
}

func TestSimulateUsesExistingNodesFirst(t *testing.T) {
	node := `apiVersion: v1
kind: Node
metadata:
  name: existing-1
  labels: {kubernetes.io/arch: amd64, kubernetes.io/os: linux, topology.kubernetes.io/zone: us-west-2a, kubernetes.io/hostname: existing-1}
status:
  capacity: {cpu: "4", memory: 16Gi, pods: "58"}
  allocatable: {cpu: "3920m", memory: 14Gi, pods: "58"}
---
apiVersion: v1
kind: Pod
metadata: {name: already-there, namespace: default}
spec:
  nodeName: existing-1
  containers: [{name: c, image: pause, resources: {requests: {cpu: "2", memory: 1Gi}}}]
`
	var out, errOut bytes.Buffer
	code := run([]string{"simulate", "-f", write(t, "pool.yaml", pool), "-f", write(t, "node.yaml", node), "-f", write(t, "d.yaml", deployment),
		"--catalog", write(t, "c.json", catalogJSON), "-o", "json"}, &out, &errOut)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	var plan struct {
		NodeClaims    []struct{ Pods []string }
		ExistingNodes []struct {
			Name string
			Pods []string
		}
	}
	if err := json.Unmarshal(out.Bytes(), &plan); err != nil {
		t.Fatal(err)
	}
	// 1920m is left beside the bound pod: one 1-cpu replica fits, three go to one new node.
	if len(plan.ExistingNodes) != 1 || plan.ExistingNodes[0].Name != "existing-1" || len(plan.ExistingNodes[0].Pods) != 1 {
		t.Errorf("existing nodes = %+v, want one inflate pod on existing-1", plan.ExistingNodes)
	}
	if len(plan.NodeClaims) != 1 || len(plan.NodeClaims[0].Pods) != 3 {
		t.Errorf("nodeclaims = %+v, want one claim with three pods", plan.NodeClaims)
	}
	var missing bytes.Buffer
	if code := run([]string{"simulate", "-f", write(t, "n.yaml", "apiVersion: v1\nkind: Node\nmetadata: {name: bare}\n"), "--catalog", write(t, "c.json", catalogJSON)}, &out, &missing); code != 1 || !strings.Contains(missing.String(), "status.allocatable") {
		t.Errorf("a Node without allocatable should be refused naming the field: exit %d, %s", code, missing.String())
	}
}

func TestRender(t *testing.T) {
	var out, errOut bytes.Buffer
	code := run([]string{"render", "--cluster-name", "demo", "--irsa-role-arn", "arn:aws:iam::123456789012:role/dovetail", "--no-namespace",
		"--feature-gates", "SpotToSpotConsolidation=true", "--image", "registry.example.com/dovetail-controller:dev"}, &out, &errOut)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	text := out.String()
	for _, want := range []string{"kind: CustomResourceDefinition", "name: nodepools.karpenter.sh", "kind: Deployment", "kind: PodDisruptionBudget",
		"eks.amazonaws.com/role-arn: arn:aws:iam::123456789012:role/dovetail", "value: SpotToSpotConsolidation=true",
		"image: registry.example.com/dovetail-controller:dev"} {
		if !strings.Contains(text, want) {
			t.Errorf("render output lacks %q", want)
		}
	}
	if strings.Contains(text, "kind: Namespace") {
		t.Error("--no-namespace still emitted the Namespace")
	}
	errOut.Reset()
	if code := run([]string{"render"}, &out, &errOut); code != 2 || !strings.Contains(errOut.String(), "--cluster-name (or settings.clusterName in a --values file) is required") {
		t.Errorf("render without a cluster name: exit %d, %q", code, errOut.String())
	}
	// The tests' binary is built from source, as a user's `go build` is: it has no
	// released image to deploy and asks for one.
	errOut.Reset()
	if code := run([]string{"render", "--cluster-name", "demo"}, &out, &errOut); code != 2 || !strings.Contains(errOut.String(), "--image (or controller.image.repository and tag in a --values file) is required: this build of Dovetail is not a release") {
		t.Errorf("render from source without an image: exit %d, %q", code, errOut.String())
	}
}

// A values file written for the chart (as for helm install) is read by render: later
// files win, and the cluster name may come from one.
func TestRenderReadsChartValuesFiles(t *testing.T) {
	dir := t.TempDir()
	first, second := filepath.Join(dir, "a.yaml"), filepath.Join(dir, "b.yaml")
	if err := os.WriteFile(first, []byte("settings:\n  clusterName: from-file\nreplicas: 5\ntolerations:\n  - {key: dedicated, operator: Exists}\n"+
		"controller:\n  image: {repository: registry.example.com/mirror/dovetail, tag: v1.2.3}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(second, []byte("replicas: 3\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	if code := run([]string{"render", "-f", first, "--values", second}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	for _, want := range []string{"value: from-file", "replicas: 3", "key: dedicated", "image: registry.example.com/mirror/dovetail:v1.2.3"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("render output lacks %q", want)
		}
	}
	errOut.Reset()
	if code := run([]string{"render", "--cluster-name", "x", "-f", filepath.Join(dir, "missing.yaml")}, &out, &errOut); code != 2 || !strings.Contains(errOut.String(), "--values "+filepath.Join(dir, "missing.yaml")) {
		t.Errorf("a missing values file: exit %d, %q", code, errOut.String())
	}
}

// Karpenter's values files leave settings.clusterName empty for --set to fill: an
// explicit flag wins over every file, as helm's --set does over -f, and a flag left
// unset leaves the file's value alone.
func TestRenderFlagsWinOverValuesFiles(t *testing.T) {
	file := filepath.Join(t.TempDir(), "karpenter-values.yaml")
	if err := os.WriteFile(file, []byte("settings:\n  clusterName: \"\"\n  interruptionQueue: from-file\nreplicas: 5\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	if code := run([]string{"render", "--cluster-name", "prod", "--replicas", "2", "--image", "registry.example.com/dovetail-controller:dev", "-f", file}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	for _, want := range []string{"value: prod", "replicas: 2", "value: from-file"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("render output lacks %q", want)
		}
	}
	if strings.Contains(out.String(), "replicas: 5") {
		t.Error("the values file's replicas beat --replicas")
	}
}

// blockedSnapshot is `kubectl get nodes,nodeclaims,nodepools,pods,pdb,daemonsets -A
// -o yaml` of a cluster in us-west-2a (see controller/simulate's tests).
const blockedSnapshot = "../../simulate/testdata/consolidate/blocked.yaml"

func TestSimulateConsolidate(t *testing.T) {
	var out, errOut bytes.Buffer
	code := run([]string{"simulate", "--consolidate", "-f", blockedSnapshot, "--zones", "us-west-2a", "--now", "2026-11-22T00:00:00Z"}, &out, &errOut)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	for _, want := range []string{
		"Consolidation at 2026-11-22T00:00:00Z (drift is not evaluated offline; spot-to-spot off)",
		"nodes         7 -> 5 (remove 2, launch 0); 1 not managed by a NodePool",
		"$/hour        $1.1520 -> $0.7680, saves $0.3840",
		"ip-10-0-4-24.us-west-2.compute.internal  default-30eaf  default   m6i.xlarge     0.1920  1     now: Underutilized/single",
		"ip-10-0-5-25.us-west-2.compute.internal  frozen-c3e95   frozen    m6i.xlarge     0.1920  0     held by budget",
		"ip-10-0-2-22.us-west-2.compute.internal: pdb payments/ledger prevents evicting pod ledger-0",
		"ip-10-0-5-25.us-west-2.compute.internal: budget: nodepool frozen allows 0 more node(s) disrupted for Empty now",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	if !strings.Contains(errOut.String(), "warning: NodeClaim default-w9x8v: not launched yet") {
		t.Errorf("the claim in flight is not reported:\n%s", errOut.String())
	}
	out.Reset()
	errOut.Reset()
	if code := run([]string{"simulate", "--consolidate", "-f", blockedSnapshot, "--zones", "us-west-2a", "--now", "2026-11-22T00:00:00Z", "--spot-to-spot", "-o", "json"}, &out, &errOut); code != 0 {
		t.Fatalf("-o json: exit %d: %s", code, errOut.String())
	}
	var report struct {
		SpotToSpot bool
		Summary    struct{ NodesBefore, NodesAfter int }
		Remove     []struct{ Node, Batch, HeldBy string }
	}
	if err := json.Unmarshal(out.Bytes(), &report); err != nil {
		t.Fatalf("-o json is not JSON: %v\n%s", err, out.String())
	}
	if !report.SpotToSpot || report.Summary.NodesBefore != 7 || report.Summary.NodesAfter != 5 || len(report.Remove) != 2 {
		t.Errorf("JSON report %+v", report)
	}
}

func TestSimulateConsolidateBadInput(t *testing.T) {
	emptyList := "apiVersion: v1\nkind: List\nitems: []\n"
	cases := []struct {
		name     string
		body     string
		flags    []string
		wantCode int
		wantText string
	}{
		{"a NodeClaim field the CRD does not have", "apiVersion: v1\nkind: List\nitems:\n- apiVersion: karpenter.sh/v1\n  kind: NodeClaim\n  metadata: {name: default-abcde}\n  spec: {nodeClassReff: {}}\n",
			[]string{"--consolidate"}, 1, `snap.yaml (document 1) items[0]: karpenter.sh/v1 NodeClaim: error unmarshaling JSON: while decoding JSON: json: unknown field "nodeClassReff"`},
		{"malformed YAML", "apiVersion: v1\nkind: List\nitems:\n- kind: [unclosed\n", []string{"--consolidate"}, 1, "snap.yaml (document 1): malformed YAML"},
		{"no NodePools", emptyList, []string{"--consolidate"}, 1, "the snapshot has no NodePools"},
		{"--now is not RFC3339", emptyList, []string{"--consolidate", "--now", "yesterday"}, 2, `--now "yesterday" is not an RFC3339 time`},
		{"--now without --consolidate", pool, []string{"--now", "2026-11-22T00:00:00Z"}, 2, "apply only with --consolidate"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"simulate", "-f", write(t, "snap.yaml", tc.body)}, tc.flags...)
			var out, errOut bytes.Buffer
			code := run(args, &out, &errOut)
			if code != tc.wantCode {
				t.Fatalf("exit %d, want %d; stderr: %s", code, tc.wantCode, errOut.String())
			}
			if !strings.Contains(errOut.String(), tc.wantText) {
				t.Errorf("stderr does not say %q:\n%s", tc.wantText, errOut.String())
			}
		})
	}
}

func TestMigrate(t *testing.T) {
	var out, errOut bytes.Buffer
	code := run([]string{"migrate", "-f", "../../migrate/testdata/v1alpha5-getting-started.yaml", "--role", "KarpenterNodeRole-demo"}, &out, &errOut)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	for _, want := range []string{"apiVersion: karpenter.sh/v1\nkind: NodePool", "apiVersion: karpenter.k8s.aws/v1\nkind: EC2NodeClass", "role: KarpenterNodeRole-demo",
		"# dovetail migrate: ttlSecondsAfterEmpty: 30 became consolidationPolicy WhenEmpty with consolidateAfter 30s"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("migrate output lacks %q:\n%s", want, out.String())
		}
	}
	out.Reset()
	if code := run([]string{"migrate", "-f", "../../migrate/testdata/v1alpha5-getting-started.yaml", "--role", "r", "-o", "hcl"}, &out, &errOut); code != 0 ||
		!strings.Contains(out.String(), `resource "dovetail_node_pool" "default"`) || !strings.Contains(out.String(), "name  = dovetail_ec2_node_class.default.name") {
		t.Errorf("-o hcl: exit %d:\n%s", code, out.String())
	}
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"migrate"}, 2, "-f FILE is required"},
		{[]string{"migrate", "-f", "x", "--role", "a", "--instance-profile", "b"}, 2, "--role and --instance-profile are exclusive"},
		{[]string{"migrate", "-f", "x", "-o", "json"}, 2, `-o "json" is not yaml or hcl`},
		{[]string{"migrate", "-f", "no-such-file.yaml"}, 1, "no-such-file.yaml"},
		{[]string{"migrate", "-f", "../../migrate/testdata/v1alpha5-getting-started.yaml"}, 1, "pass --role NAME"},
	} {
		errOut.Reset()
		if code := run(c.args, &out, &errOut); code != c.code || !strings.Contains(errOut.String(), c.want) {
			t.Errorf("%v: exit %d, %q; want %d and %q", c.args, code, errOut.String(), c.code, c.want)
		}
	}
}

// TestExplainNodeCommand: `dovetail explain node` on a snapshot says why a node
// stays and what removing it would do; bad usage and an unknown node say so.
func TestExplainNodeCommand(t *testing.T) {
	var out, errOut bytes.Buffer
	node := "ip-10-0-2-22.us-west-2.compute.internal"
	if code := run([]string{"explain", "node", node, "-f", blockedSnapshot, "--zones", "us-west-2a", "--now", "2026-11-22T00:00:00Z"}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	for _, want := range []string{"NODE " + node, "KEPT:", "payments/ledger", "IF REMOVED NOW (alone): saves $", "PODS GO TO"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"explain"}, 2, "usage: dovetail explain node NAME"},
		{[]string{"explain", "node", "nope", "-f", blockedSnapshot}, 1, `node "nope" is not in the snapshot`},
		{[]string{"explain", "node", node, "-f", blockedSnapshot, "-o", "yaml"}, 2, `-o "yaml" is not a format`},
	} {
		out.Reset()
		errOut.Reset()
		if code := run(c.args, &out, &errOut); code != c.code || !strings.Contains(errOut.String(), c.want) {
			t.Errorf("%v: exit %d, %q; want %d and %q", c.args, code, errOut.String(), c.code, c.want)
		}
	}
}

// --scheduler-config takes the controller's SCHEDULER_CONFIG: the Deployment's 4
// pods, 2 to an m5.xlarge without it, get a node each under a default hostname
// spread; a value kube-scheduler would refuse exits 2 naming the field.
func TestSimulateSchedulerConfig(t *testing.T) {
	simulate := func(config string) (int, string, string) {
		var out, errOut bytes.Buffer
		code := run([]string{"simulate", "-f", write(t, "pool.yaml", pool), "-f", write(t, "d.yaml", deployment),
			"--catalog", write(t, "c.json", catalogJSON), "-o", "json", "--scheduler-config", config}, &out, &errOut)
		return code, out.String(), errOut.String()
	}
	code, out, errOut := simulate("podTopologySpread:\n  defaultConstraints:\n  - {maxSkew: 1, topologyKey: kubernetes.io/hostname, whenUnsatisfiable: DoNotSchedule}\n")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var plan struct {
		Summary struct{ Scheduled, NodeClaims int }
	}
	if err := json.Unmarshal([]byte(out), &plan); err != nil {
		t.Fatal(err)
	}
	if plan.Summary.Scheduled != 4 || plan.Summary.NodeClaims != 4 {
		t.Errorf("summary %+v; want the 4 pods on 4 NodeClaims", plan.Summary)
	}
	code, _, errOut = simulate("podTopologySpread:\n  defaultConstraints:\n  - {maxSkew: 1, topologyKey: kubernetes.io/hostname, whenUnsatisfiable: DoNotSchedule, labelSelector: {matchLabels: {app: inflate}}}\n")
	if code != 2 || !strings.Contains(errOut, "--scheduler-config: podTopologySpread.defaultConstraints[0].labelSelector must not be set") {
		t.Errorf("exit %d: %s", code, errOut)
	}
}

// TestSimulateTakesTheControllersSettings: a `kubectl get -A -o yaml` snapshot holds
// the controller's Deployment and the workloads with their pods. simulate plans
// with the controller's settings (its FEATURE_GATES turn NodeOverlay on), flags
// given override them, and neither the controller's Deployment nor a workload read
// from the cluster becomes pods of its own: its pods are in the snapshot already.
func TestSimulateTakesTheControllersSettings(t *testing.T) {
	const twoTypes = `{"instanceTypes": [
  {"name": "m5.xlarge", "architecture": "amd64", "cpu": "4", "memory": "16Gi", "pods": 58,
   "offerings": [{"zone": "us-west-2a", "capacityType": "on-demand", "price": 0.192, "available": true}]},
  {"name": "c5.xlarge", "architecture": "amd64", "cpu": "4", "memory": "8Gi", "pods": 58,
   "offerings": [{"zone": "us-west-2a", "capacityType": "on-demand", "price": 0.17, "available": true}]}]}`
	const overlay = `apiVersion: karpenter.sh/v1alpha1
kind: NodeOverlay
metadata: {name: c5-dear}
spec:
  requirements: [{key: node.kubernetes.io/instance-type, operator: In, values: [c5.xlarge]}]
  price: "5"
`
	const controller = `apiVersion: apps/v1
kind: Deployment
metadata: {name: dovetail, namespace: kube-system, uid: 0b1c, labels: {app.kubernetes.io/name: dovetail}}
spec:
  replicas: 2
  selector: {matchLabels: {app.kubernetes.io/name: dovetail}}
  template:
    metadata: {labels: {app.kubernetes.io/name: dovetail}}
    spec:
      containers:
        - name: controller
          image: ghcr.io/dovetail-sh/dovetail-controller:v0.1.0
          env:
            - {name: FEATURE_GATES, value: "NodeOverlay=true,SpotToSpotConsolidation=false"}
            - name: POD_NAMESPACE
              valueFrom: {fieldRef: {fieldPath: metadata.namespace}}
          resources: {requests: {cpu: "1", memory: 1Gi}}
`
	// The workload as the API server returns it, and its four pods (pending).
	snapshot := "apiVersion: v1\nkind: List\nitems:\n"
	snapshot += `- apiVersion: apps/v1
  kind: Deployment
  metadata: {name: inflate, namespace: default, uid: 1d2e}
  spec:
    replicas: 4
    selector: {matchLabels: {app: inflate}}
    template:
      metadata: {labels: {app: inflate}}
      spec: {containers: [{name: pause, image: pause, resources: {requests: {cpu: "1", memory: 1Gi}}}]}
`
	for i := range 4 {
		snapshot += fmt.Sprintf(`- apiVersion: v1
  kind: Pod
  metadata: {name: inflate-%d, namespace: default, uid: p%d, labels: {app: inflate}}
  spec: {containers: [{name: pause, image: pause, resources: {requests: {cpu: "1", memory: 1Gi}}}]}
  status: {phase: Pending}
`, i, i)
	}
	simulate := func(withController bool, flags ...string) (types map[string]bool, pods int, errOut string) {
		t.Helper()
		files := []string{"-f", write(t, "pool.yaml", pool), "-f", write(t, "overlay.yaml", overlay), "-f", write(t, "snapshot.yaml", snapshot)}
		if withController {
			files = append(files, "-f", write(t, "controller.yaml", controller))
		}
		var out, stderr bytes.Buffer
		code := run(append(append([]string{"simulate", "--catalog", write(t, "c.json", twoTypes), "-o", "json"}, files...), flags...), &out, &stderr)
		if code != 0 {
			t.Fatalf("exit %d: %s", code, stderr.String())
		}
		var plan struct {
			NodeClaims []struct{ InstanceType string }
			Summary    struct{ Pods, Scheduled int }
		}
		if err := json.Unmarshal(out.Bytes(), &plan); err != nil {
			t.Fatal(err)
		}
		types = map[string]bool{}
		for _, nc := range plan.NodeClaims {
			types[nc.InstanceType] = true
		}
		if plan.Summary.Pods != plan.Summary.Scheduled {
			t.Errorf("summary %+v; want every pod scheduled", plan.Summary)
		}
		return types, plan.Summary.Pods, stderr.String()
	}

	types, pods, errOut := simulate(true)
	if pods != 4 {
		t.Errorf("%d pods planned; want the snapshot's 4 (neither the Deployment's replicas again nor the controller's)", pods)
	}
	if !types["m5.xlarge"] || types["c5.xlarge"] {
		t.Errorf("with the controller's NodeOverlay=true: types %v; want m5.xlarge, c5.xlarge overlaid at $5/h", types)
	}
	for _, want := range []string{"settings from the controller's Deployment kube-system/dovetail", "NodeOverlay=true", "Deployment default/inflate were read from a cluster"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errOut)
		}
	}
	if types, _, _ = simulate(true, "--feature-gates", "NodeOverlay=false"); !types["c5.xlarge"] {
		t.Errorf("--feature-gates NodeOverlay=false over the Deployment's: types %v; want c5.xlarge, the overlay ignored", types)
	}
	types, _, errOut = simulate(false)
	if !types["c5.xlarge"] {
		t.Errorf("no controller Deployment, so the default gates: types %v; want c5.xlarge, the overlay ignored", types)
	}
	if !strings.Contains(errOut, "the input holds no controller Deployment: predicted under the controller's default settings") {
		t.Errorf("without the controller's Deployment, stderr does not say the defaults are used:\n%s", errOut)
	}
	if types, _, _ = simulate(false, "--feature-gates", "NodeOverlay=true"); types["c5.xlarge"] {
		t.Errorf("--feature-gates NodeOverlay=true: types %v; want no c5.xlarge", types)
	}
	var out, stderr bytes.Buffer
	if code := run([]string{"simulate", "-f", write(t, "pool.yaml", pool), "--feature-gates", "NodeOverlays=true"}, &out, &stderr); code != 2 || !strings.Contains(stderr.String(), `unknown feature gate "NodeOverlays"`) {
		t.Errorf("a misspelt gate: exit %d: %s", code, stderr.String())
	}
}

// TestHelpNamesTheControllersSettings: -h lists the controller's flags without
// the flag package's "panic calling String method" lines, and says their
// variables are the controller's, not read from this shell.
func TestHelpNamesTheControllersSettings(t *testing.T) {
	for _, cmd := range [][]string{{"simulate", "-h"}, {"explain", "node", "n", "-h"}} {
		var out, errOut bytes.Buffer
		if code := run(cmd, &out, &errOut); code != 0 {
			t.Errorf("%v: exit %d", cmd, code)
		}
		help := errOut.String()
		if strings.Contains(help, "panic") || !strings.Contains(help, "-feature-gates") || !strings.Contains(help, "(the controller's FEATURE_GATES)") {
			t.Errorf("%v help:\n%s", cmd, help)
		}
	}
}
