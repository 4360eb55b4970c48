package simulate

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
)

var hostnameSpread = []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: corev1.LabelHostname, WhenUnsatisfiable: corev1.DoNotSchedule}}

// Karpenter v1.15's regression suite for --scheduler-config, through simulate: with
// the cluster's default hostname spread, a Deployment's pods and a Service's pods
// each get a node, as kube-scheduler will place them; a Job's pods (a controller
// kube-scheduler deduces nothing from, no Service) and pods with constraints of their
// own are packed as before.
func TestSimulateAppliesTheClusterDefaultSpread(t *testing.T) {
	const workloads = simulatePool + `
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 3
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec: {containers: [{name: web, image: web, resources: {requests: {cpu: 100m, memory: 128Mi}}}]}
---
apiVersion: v1
kind: Service
metadata: {name: api}
spec: {selector: {app: api}, ports: [{port: 80}]}
---
apiVersion: v1
kind: Pod
metadata: {name: api-0, labels: {app: api}}
spec: {containers: [{name: api, image: api, resources: {requests: {cpu: 100m, memory: 128Mi}}}]}
---
apiVersion: v1
kind: Pod
metadata: {name: api-1, labels: {app: api}}
spec: {containers: [{name: api, image: api, resources: {requests: {cpu: 100m, memory: 128Mi}}}]}
---
apiVersion: batch/v1
kind: Job
metadata: {name: batch}
spec:
  parallelism: 3
  template:
    metadata: {labels: {app: batch}}
    spec: {restartPolicy: Never, containers: [{name: b, image: b, resources: {requests: {cpu: 100m, memory: 128Mi}}}]}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: own}
spec:
  replicas: 3
  selector: {matchLabels: {app: own}}
  template:
    metadata: {labels: {app: own}}
    spec:
      topologySpreadConstraints:
        - {maxSkew: 3, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: DoNotSchedule, labelSelector: {matchLabels: {app: own}}}
      containers: [{name: own, image: own, resources: {requests: {cpu: 100m, memory: 128Mi}}}]
`
	plan := func(spread []corev1.TopologySpreadConstraint) *Plan {
		t.Helper()
		in := &Inputs{DefaultSpread: spread}
		if err := in.Read(strings.NewReader(workloads), "workloads.yaml"); err != nil {
			t.Fatal(err)
		}
		if len(in.Warnings) > 0 {
			t.Errorf("warnings: %v", in.Warnings)
		}
		p, err := Run(in, testTypes(t), defaults(), clocktesting.NewFakePassiveClock(fakeNow))
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Unschedulable) > 0 {
			t.Fatalf("unschedulable: %+v", p.Unschedulable)
		}
		return p
	}
	// nodesOf counts the nodes the pods of app are planned onto, and the most on one.
	nodesOf := func(p *Plan, app string) (nodes, most int) {
		for _, nc := range p.NodeClaims {
			n := 0
			for _, pod := range nc.Pods {
				if strings.HasPrefix(pod, "default/"+app+"-") {
					n++
				}
			}
			if n > 0 {
				nodes++
				most = max(most, n)
			}
		}
		return nodes, most
	}
	without := plan(nil)
	for _, app := range []string{"web", "api"} {
		if _, most := nodesOf(without, app); most < 2 {
			t.Fatalf("without defaults the %s pods are spread (at most %d on a node); the test needs them packed: %+v", app, most, without.NodeClaims)
		}
	}
	with := plan(hostnameSpread)
	for app, want := range map[string]int{"web": 3, "api": 2} {
		if nodes, most := nodesOf(with, app); nodes != want || most != 1 {
			t.Errorf("%s: on %d nodes, at most %d on one; want one a node under the default hostname spread", app, nodes, most)
		}
	}
	if nodes, _ := nodesOf(with, "batch"); nodes != 1 {
		t.Errorf("the Job's pods are on %d nodes; kube-scheduler gives them no default selector, so they pack onto 1", nodes)
	}
	if nodes, _ := nodesOf(with, "own"); nodes != 1 {
		t.Errorf("pods with their own zone spread (maxSkew 3) are on %d nodes; their constraints replace the defaults whole, so 1", nodes)
	}
}

// Consolidation moves pods under the defaults too: two web pods on nodes in two
// zones, under a default zone spread, are not put together, though one node would
// hold both.
func TestConsolidateAppliesTheClusterDefaultSpread(t *testing.T) {
	types := westCatalog(t, westZones...)
	sc := newSnapshotCluster(t, types, onlyM6i, onDemandOnly)
	a := sc.node("m6i.xlarge", "us-west-2a", v1.CapacityTypeOnDemand)
	b := sc.node("m6i.xlarge", "us-west-2b", v1.CapacityTypeOnDemand)
	sc.pod(a, "500m", "512Mi", map[string]string{"app": "web"})
	sc.pod(b, "500m", "512Mi", map[string]string{"app": "web"})
	sc.objects = append(sc.objects, &corev1.Service{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Service"}, ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "shop"},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "web"}}})
	zones := func(r *ConsolidationReport) int {
		after := map[string]bool{}
		removed := map[string]bool{}
		for _, n := range r.Remove {
			removed[n.Node] = true
		}
		for node, zone := range map[string]string{a: "us-west-2a", b: "us-west-2b"} {
			if !removed[node] {
				after[zone] = true
			}
		}
		for _, l := range r.Launch {
			after[l.Zone] = true
		}
		return len(after)
	}
	without, table := sc.consolidate(types, false)
	if len(without.Remove) == 0 || zones(without) != 1 {
		t.Fatalf("without defaults, the two web pods should end on one node in one zone:\n%s", table)
	}
	// The defaults come from the controller's --scheduler-config, as the
	// plan-time impact takes them from its Deployment.
	in := sc.read()
	ctl := defaults()
	ctl.SchedulerConfig = "podTopologySpread: {defaultConstraints: [{maxSkew: 1, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: DoNotSchedule}]}"
	if err := in.UseSettings(ctl); err != nil {
		t.Fatal(err)
	}
	with, err := Consolidate(in, types, ctl, fakeNow)
	if err != nil {
		t.Fatal(err)
	}
	if zones(with) != 2 {
		t.Errorf("under a default zone spread the web pods end in %d zone(s); want 2: remove %+v, launch %+v", zones(with), with.Remove, with.Launch)
	}
}

// A --scheduler-config the controller would refuse to start with is refused,
// naming the flag, rather than predicted without it.
func TestUseSettingsRefusesWhatTheControllerRefuses(t *testing.T) {
	ctl := defaults()
	ctl.SchedulerConfig = "podTopologySpread: {defaultConstraints: [{maxSkew: 0, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: DoNotSchedule}]}"
	err := (&Inputs{}).UseSettings(ctl)
	if err == nil || !strings.Contains(err.Error(), "--scheduler-config") || !strings.Contains(err.Error(), "maxSkew") {
		t.Errorf("a maxSkew of 0 gives %v; want an error naming --scheduler-config and maxSkew", err)
	}
	ctl = defaults()
	ctl.NodeCosts.FewerNodesTolerance = -1
	if err := (&Inputs{}).UseSettings(ctl); err == nil {
		t.Error("a negative --fewer-nodes-tolerance is accepted; the controller refuses it")
	}
}
