package simulate

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"

	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/controller/catalog"
)

// The snapshots under testdata/consolidate are `kubectl get
// nodes,nodeclaims,nodepools,pods,pdb,daemonsets -A -o yaml` of m6i nodes in
// us-west-2a, taken at fakeNow.
const (
	// blocked.yaml: pool "default" (budget 100%, consolidateAfter 5m) and pool
	// "frozen" (budget 0).
	nodeDoNotDisrupt = "ip-10-0-1-21.us-west-2.compute.internal" // a Job pod annotated do-not-disrupt
	nodePDB          = "ip-10-0-2-22.us-west-2.compute.internal" // payments/ledger-0, its PDB allows 0 disruptions
	nodeRecent       = "ip-10-0-3-23.us-west-2.compute.internal" // last pod event 2 minutes before fakeNow
	nodeFree         = "ip-10-0-4-24.us-west-2.compute.internal" // one web pod, nothing holds it
	nodeFrozen       = "ip-10-0-5-25.us-west-2.compute.internal" // empty, in pool "frozen"
	nodeUnmanaged    = "ip-10-0-6-26.us-west-2.compute.internal" // an EKS node group node, no NodeClaim
	claimInFlight    = "default-w9x8v"                           // launched, no Node yet
)

func readSnapshot(t *testing.T, name string) *Inputs {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", "consolidate", name))
	if err != nil {
		t.Fatal(err)
	}
	in := &Inputs{}
	if err := in.Read(bytes.NewReader(raw), name); err != nil {
		t.Fatalf("reading %s: %v", name, err)
	}
	if len(in.Warnings) != 0 {
		t.Errorf("kubectl's own output must read without warnings: %v", in.Warnings)
	}
	return in
}

func westTypes(t *testing.T) *catalog.File {
	t.Helper()
	cat, err := catalog.EmbeddedAWS()
	if err != nil {
		t.Fatal(err)
	}
	return cat.InZones([]string{"us-west-2a"})
}

func consolidate(t *testing.T, in *Inputs, now time.Time) *ConsolidationReport {
	t.Helper()
	r, err := Consolidate(in, westTypes(t), defaults(), now)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func keptReasons(r *ConsolidationReport) map[string]string {
	out := map[string]string{}
	for _, k := range r.Kept {
		out[k.Node] = k.Reason
	}
	return out
}

// A kubectl List is read item by item, with the status fields consolidation
// depends on.
func TestReadKubectlList(t *testing.T) {
	in := readSnapshot(t, "blocked.yaml")
	if len(in.Nodes) != 6 || len(in.NodeClaims) != 6 || len(in.NodePools) != 2 || len(in.PDBs) != 1 || len(in.DaemonSets) != 2 || len(in.DaemonSetPods) != 2 {
		t.Fatalf("read %d nodes, %d nodeclaims, %d nodepools, %d pdbs, %d daemonsets (%d daemonset pods); want 6, 6, 2, 1, 2 (2)",
			len(in.Nodes), len(in.NodeClaims), len(in.NodePools), len(in.PDBs), len(in.DaemonSets), len(in.DaemonSetPods))
	}
	// 2 daemonset pods on each of 6 nodes, 4 workload pods and 2 coredns pods are
	// bound; one worker pod is pending.
	if len(in.BoundPods) != 18 || len(in.Pods) != 1 {
		t.Errorf("%d bound and %d pending pods, want 18 and 1", len(in.BoundPods), len(in.Pods))
	}
	if pdb := in.PDBs[0]; pdb.Name != "ledger" || pdb.Namespace != "payments" || pdb.Status.DisruptionsAllowed != 0 || pdb.Status.CurrentHealthy != 1 {
		t.Errorf("pdb %s/%s status %+v; want payments/ledger with currentHealthy 1", pdb.Namespace, pdb.Name, pdb.Status)
	}
	nc := in.NodeClaims[0]
	if nc.Status.ProviderID == "" || nc.Status.NodeName != nodeDoNotDisrupt || !meta.IsStatusConditionTrue(nc.Status.Conditions, v1.ConditionTypeInitialized) || nc.Status.LastPodEventTime.IsZero() {
		t.Errorf("nodeclaim %s lost its status: %+v", nc.Name, nc.Status)
	}
	if cpu := in.Nodes[0].Status.Allocatable[corev1.ResourceCPU]; cpu.MilliValue() != 3920 {
		t.Errorf("node allocatable cpu %s, want 3920m", cpu.String())
	}
	if p := in.BoundPods[0]; p.Status.Phase != corev1.PodRunning || p.UID == "" {
		t.Errorf("pod %s: phase %q uid %q", p.Name, p.Status.Phase, p.UID)
	}
}

// An error inside a List names the item and the object; a List cannot nest.
func TestReadListErrors(t *testing.T) {
	cases := []struct{ name, doc, want string }{
		{"unknown NodeClaim field", `apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: Pod
  metadata: {name: ok, namespace: default}
  spec: {containers: [{name: c}]}
- apiVersion: karpenter.sh/v1
  kind: NodeClaim
  metadata: {name: default-abcde}
  spec: {nodeClassReff: {}}
`, `snap.yaml (document 1) items[1]: karpenter.sh/v1 NodeClaim: error unmarshaling JSON: while decoding JSON: json: unknown field "nodeClassReff"`},
		{"unsupported kind", "apiVersion: v1\nkind: List\nitems:\n- {apiVersion: example.com/v1, kind: Widget, metadata: {name: w}}\n", "snap.yaml (document 1) items[0]: unsupported kind example.com/v1 Widget"},
		{"nested List", "apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: List, items: []}\n", "items[0]: a List inside a List"},
		{"items not a list", "apiVersion: v1\nkind: List\nitems: 3\n", "items must be a list of objects"},
		{"duplicate NodeClaim", "apiVersion: v1\nkind: List\nitems:\n- {apiVersion: karpenter.sh/v1, kind: NodeClaim, metadata: {name: a}, spec: {requirements: [], nodeClassRef: {group: g, kind: k, name: n}}}\n- {apiVersion: karpenter.sh/v1, kind: NodeClaim, metadata: {name: a}, spec: {requirements: [], nodeClassRef: {group: g, kind: k, name: n}}}\n", "items[1]: NodeClaim a is defined twice"},
		{"bad PDB selector", "apiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata: {name: p}\nspec: {selector: {matchExpressions: [{key: app, operator: Near}]}}\n", "PodDisruptionBudget default/p: spec.selector"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := (&Inputs{}).Read(strings.NewReader(tc.doc), "snap.yaml")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want it to contain %q", err, tc.want)
			}
		})
	}
	// policy/v1beta1 is still read past, as before PDBs were read at all.
	in := &Inputs{}
	if err := in.Read(strings.NewReader("apiVersion: policy/v1beta1\nkind: PodDisruptionBudget\nmetadata: {name: p}\n"), "old.yaml"); err != nil || len(in.Warnings) != 1 || len(in.PDBs) != 0 {
		t.Errorf("policy/v1beta1 PDB: err %v, warnings %v, pdbs %d", err, in.Warnings, len(in.PDBs))
	}
}

// Four m6i.xlarge nodes, each holding three 400m web pods, hold what one node and
// a little more would: the target removes some, gives every pod of a removed node a
// place that stays, and costs less; the 10% budget lets one go now.
func TestConsolidateHalfEmptyNodes(t *testing.T) {
	in := readSnapshot(t, "half-empty.yaml")
	r := consolidate(t, in, fakeNow)
	s := r.Summary
	if len(r.Remove) < 2 {
		t.Fatalf("the target removes %d of four half-empty nodes: %+v", len(r.Remove), r.Kept)
	}
	if s.NodesBefore != 4 || s.NodesAfter != 4-len(r.Remove)+len(r.Launch) || s.NodesAfter >= 4 {
		t.Errorf("nodes %d -> %d, removing %d and launching %d", s.NodesBefore, s.NodesAfter, len(r.Remove), len(r.Launch))
	}
	if s.PricePerHourBefore != 0.768 || s.UnknownPrice != 0 {
		t.Errorf("$/h before %v with %d unknown prices; want four m6i.xlarge at $0.192", s.PricePerHourBefore, s.UnknownPrice)
	}
	// Two nodes hold all twelve pods: the target costs at most their $0.384/h.
	if s.PricePerHourAfter >= s.PricePerHourBefore || s.PricePerHourAfter > 0.384+1e-9 || math.Abs(s.PricePerHourBefore-s.SavingsPerHour-s.PricePerHourAfter) > 1e-6 {
		t.Errorf("$/h %v -> %v saving %v; want at most 0.384 after, and after = before - savings", s.PricePerHourBefore, s.PricePerHourAfter, s.SavingsPerHour)
	}
	removed := map[string]bool{}
	pods := 0
	for _, n := range r.Remove {
		removed[n.Node] = true
		pods += len(n.Pods)
		if len(n.Pods) != 3 || n.NodePool != "default" || n.InstanceType != "m6i.xlarge" || n.PricePerHour == nil || *n.PricePerHour != 0.192 {
			t.Errorf("removed %+v; want a default m6i.xlarge at $0.192 with its three web pods", n)
		}
	}
	if len(r.PodsMoved) != pods {
		t.Fatalf("%d pods moved for the %d pods of removed nodes", len(r.PodsMoved), pods)
	}
	launched := map[string]bool{}
	for _, l := range r.Launch {
		launched["new "+l.InstanceType+" ("+l.Name+")"] = true
		if l.PricePerHour >= 0.192*float64(len(r.Remove)) {
			t.Errorf("replacement %+v costs as much as what it replaces", l)
		}
	}
	for _, m := range r.PodsMoved {
		if m.To == "" || removed[m.To] || !removed[m.From] {
			t.Errorf("pod %s moves from %s to %q", m.Pod, m.From, m.To)
		}
		if strings.HasPrefix(m.To, "new ") && !launched[m.To] {
			t.Errorf("pod %s moves to %q, which the launch section does not list", m.Pod, m.To)
		}
	}
	// The pool's budget is Karpenter's default 10%: of four nodes, one at a time.
	if s.StartingNow != 1 || s.HeldByBudget != len(r.Remove)-1 || r.Remove[0].Batch == "" {
		t.Errorf("%d starting now and %d held by budget of %d removals (first: %+v); want one now", s.StartingNow, s.HeldByBudget, len(r.Remove), r.Remove[0])
	}
	kept := keptReasons(r)
	for _, n := range r.Remove[1:] {
		if !strings.HasPrefix(n.HeldBy, "budget:") || !strings.HasPrefix(kept[n.Node], "budget:") {
			t.Errorf("%s is held back, by %q (kept: %q); want the budget", n.Node, n.HeldBy, kept[n.Node])
		}
	}
	for node, why := range kept {
		if !removed[node] && !strings.HasPrefix(why, "no cheaper fit") {
			t.Errorf("%s is kept because %q; want no cheaper fit", node, why)
		}
	}
}

// Each node that stays says what holds it: a do-not-disrupt pod, a PDB that
// allows no disruption, a budget of 0, consolidateAfter, no NodePool.
func TestConsolidateReportsWhatBlocksEachNode(t *testing.T) {
	in := readSnapshot(t, "blocked.yaml")
	r := consolidate(t, in, fakeNow)
	var removed []string
	for _, n := range r.Remove {
		removed = append(removed, n.Node)
	}
	if strings.Join(removed, " ") != nodeFrozen+" "+nodeFree {
		t.Errorf("the target removes %v; want the empty %s and %s, whose pod fits elsewhere", removed, nodeFrozen, nodeFree)
	}
	for _, n := range r.Remove {
		switch n.Node {
		case nodeFree:
			if n.Batch != "Underutilized/single" {
				t.Errorf("%s starts in %q, want Underutilized/single", n.Node, n.Batch)
			}
		case nodeFrozen:
			if n.Batch != "" || !strings.HasPrefix(n.HeldBy, "budget: nodepool frozen allows 0") {
				t.Errorf("%s: batch %q held by %q; want held by pool frozen's budget", n.Node, n.Batch, n.HeldBy)
			}
		}
	}
	if len(r.PodsMoved) != 1 || r.PodsMoved[0].Pod != "shop/web-7d9f8b6c4d-r4t5y" || r.PodsMoved[0].To == nodeFree || r.PodsMoved[0].To == "" {
		t.Errorf("pods moved %+v; want the web pod of %s on a node that stays", r.PodsMoved, nodeFree)
	}
	kept := keptReasons(r)
	want := map[string]string{
		nodeDoNotDisrupt: "pod batch/report-29410560-x7k2q has the karpenter.sh/do-not-disrupt annotation",
		nodePDB:          "pdb payments/ledger prevents evicting pod ledger-0",
		nodeRecent:       "consolidateAfter has not passed since its last pod change (until 2026-11-22T00:03:00Z)",
		nodeFrozen:       "budget: nodepool frozen allows 0 more node(s) disrupted for Empty now",
		nodeUnmanaged:    "not managed by a NodePool; kept, its free room is used",
	}
	for node, reason := range want {
		if kept[node] != reason {
			t.Errorf("%s kept because %q, want %q", node, kept[node], reason)
		}
	}
	if len(kept) != len(want) {
		t.Errorf("kept %v, want exactly the five held nodes", kept)
	}
	s := r.Summary
	// Six claims (the one in flight too) at $0.192, and the node group's node.
	// The pending GPU pod has no place whatever consolidation does: it holds nothing.
	if s.NodesBefore != 7 || s.NodesAfter != 5 || s.UnmanagedNodes != 1 || s.PricePerHourBefore != 1.152 || s.PricePerHourAfter != 0.768 || s.StartingNow != 1 || s.HeldByBudget != 1 || s.PlaceablePending != 0 {
		t.Errorf("summary %+v", s)
	}
	warned := strings.Join(r.Warnings, "\n")
	for _, w := range []string{"NodeClaim " + claimInFlight + ": not launched yet", "Node " + nodeUnmanaged + ": not managed by a NodePool", "1 pod(s) have no spec.nodeName"} {
		if !strings.Contains(warned, w) {
			t.Errorf("warnings lack %q:\n%s", w, warned)
		}
	}
}

// The decision reads the snapshot's time and status: past consolidateAfter the
// recent node may go, and a PDB that allows a disruption no longer holds its node.
func TestConsolidateFollowsNowAndStatus(t *testing.T) {
	in := readSnapshot(t, "blocked.yaml")
	in.PDBs[0].Status.DisruptionsAllowed = 1
	r := consolidate(t, in, fakeNow.Add(10*time.Minute))
	kept := keptReasons(r)
	if strings.Contains(kept[nodeRecent], "consolidateAfter") {
		t.Errorf("%s is still held by consolidateAfter 10 minutes later: %q", nodeRecent, kept[nodeRecent])
	}
	if strings.Contains(kept[nodePDB], "pdb") {
		t.Errorf("%s is still held by a PDB that allows a disruption: %q", nodePDB, kept[nodePDB])
	}
	if !strings.Contains(kept[nodeDoNotDisrupt], "do-not-disrupt") {
		t.Errorf("%s lost its do-not-disrupt reason: %q", nodeDoNotDisrupt, kept[nodeDoNotDisrupt])
	}
	if len(r.Remove) <= 2 {
		t.Errorf("with two nodes freed of their holds the target still removes only %d", len(r.Remove))
	}
}

// Pending pods the cluster can place come first: the target is the same, and
// nothing starts until they are placed, as in the controller.
func TestConsolidateWaitsForPlaceablePendingPods(t *testing.T) {
	in := readSnapshot(t, "blocked.yaml")
	small := in.BoundPods[len(in.BoundPods)-1].DeepCopy()
	small.Name, small.UID, small.Spec.NodeName = "coredns-6b9575c64c-new01", "", ""
	small.Status = corev1.PodStatus{Phase: corev1.PodPending}
	in.Pods = append(in.Pods, small)
	r := consolidate(t, in, fakeNow)
	if s := r.Summary; s.PlaceablePending != 1 || s.StartingNow != 0 || len(r.Remove) != 2 {
		t.Fatalf("summary %+v, removing %d; want the same two removals, none starting while one pod waits", s, len(r.Remove))
	}
	for _, n := range r.Remove {
		if n.Node == nodeFree && n.Batch != "Underutilized/single" {
			t.Errorf("%s: batch %q; the batch it starts in once the pod is placed is still Underutilized/single", n.Node, n.Batch)
		}
	}
	if why := keptReasons(r)[nodeFree]; why != "in the target (Underutilized/single), waiting for 1 pending pod(s) to be placed first" {
		t.Errorf("%s kept because %q", nodeFree, why)
	}
	var table bytes.Buffer
	if err := r.WriteTable(&table); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(table.String(), "after pending pods: Underutilized/single") || strings.Contains(table.String(), "now: ") {
		t.Errorf("the table does not say the batch waits:\n%s", table.String())
	}
}

func TestConsolidateRefusesBadSnapshots(t *testing.T) {
	in := readSnapshot(t, "blocked.yaml")
	in.NodePools[1].Spec.Disruption.Budgets[0].Nodes = "none"
	if _, err := Consolidate(in, westTypes(t), defaults(), fakeNow); err == nil || !strings.Contains(err.Error(), `nodepool frozen: spec.disruption.budgets[0].nodes: "none" is not a node count or a percentage`) {
		t.Errorf("a budget that does not parse: %v", err)
	}
	in = readSnapshot(t, "blocked.yaml")
	in.NodePools = nil
	if _, err := Consolidate(in, westTypes(t), defaults(), fakeNow); err == nil || !strings.Contains(err.Error(), "no NodePools") {
		t.Errorf("a snapshot without NodePools: %v", err)
	}
	in = readSnapshot(t, "blocked.yaml")
	in.BoundPods = append(in.BoundPods, in.BoundPods[0])
	if _, err := Consolidate(in, westTypes(t), defaults(), fakeNow); err == nil || !strings.Contains(err.Error(), "two Pods are named") {
		t.Errorf("a pod given twice: %v", err)
	}
	// A catalog of another region prices nothing, and says which zones it lacks.
	in = readSnapshot(t, "blocked.yaml")
	cat, err := catalog.EmbeddedAWS()
	if err != nil {
		t.Fatal(err)
	}
	r, err := Consolidate(in, cat, defaults(), fakeNow)
	if err != nil {
		t.Fatal(err)
	}
	if r.Summary.UnknownPrice != 6 || !strings.Contains(strings.Join(r.Warnings, "\n"), "--zones us-west-2a") {
		t.Errorf("%d unknown prices, warnings %v; want 6 and a hint to pass --zones us-west-2a", r.Summary.UnknownPrice, r.Warnings)
	}
	if kept := keptReasons(r); !strings.Contains(kept[nodeFree], "is unknown") {
		t.Errorf("%s, of unknown price, is kept because %q", nodeFree, kept[nodeFree])
	}
}

func TestConsolidationReportOutput(t *testing.T) {
	r := consolidate(t, readSnapshot(t, "blocked.yaml"), fakeNow)
	var table bytes.Buffer
	if err := r.WriteTable(&table); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"Consolidation at 2026-11-22T00:00:00Z (drift is not evaluated offline; spot-to-spot off)",
		"$/hour        $1.1520 -> $0.7680, saves $0.3840",
		"starting now  1 of 2 removal(s); 1 held by budget",
		nodeFree + "  default-30eaf  default   m6i.xlarge     0.1920  1     now: Underutilized/single",
		"PODS MOVED", nodeFree + "  " + nodeDoNotDisrupt + "  shop/web-7d9f8b6c4d-r4t5y",
		"KEPT\n  " + nodeDoNotDisrupt + ": pod batch/report-29410560-x7k2q has the karpenter.sh/do-not-disrupt annotation",
	} {
		if !strings.Contains(table.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, table.String())
		}
	}
	var raw bytes.Buffer
	if err := r.WriteJSON(&raw); err != nil {
		t.Fatal(err)
	}
	var back ConsolidationReport
	if err := json.Unmarshal(raw.Bytes(), &back); err != nil {
		t.Fatalf("the JSON does not read back: %v", err)
	}
	if back.Summary != r.Summary || len(back.Remove) != 2 || len(back.Kept) != 5 || back.DriftEvaluated || !back.Now.Equal(fakeNow) {
		t.Errorf("JSON read back as %+v", back)
	}
}

func TestGroupMovesSummarizes(t *testing.T) {
	var moves []PodMove
	for _, p := range []string{"a/p5", "a/p1", "a/p2", "a/p3", "a/p4"} {
		moves = append(moves, PodMove{Pod: p, From: "n1", To: "n2"})
	}
	moves = append(moves, PodMove{Pod: "a/q", From: "n1", To: "new m6i.large (default-1)"})
	groups := groupMoves(moves)
	if len(groups) != 2 || summarize(groups[0].pods) != "a/p1, a/p2, a/p3 and 2 more" || groups[1].to != "new m6i.large (default-1)" {
		t.Errorf("groups %+v", groups)
	}
}

// A replacement must hold the daemonsets' pods too: with a daemonset of 1.5 cpus,
// an m6i.large (1.93 allocatable) has no room for the pods it would take.
func TestConsolidateReservesDaemonSetsOnReplacements(t *testing.T) {
	in := readSnapshot(t, "half-empty.yaml")
	r := consolidate(t, in, fakeNow)
	if len(r.Launch) != 1 || r.Launch[0].InstanceType != "m6i.large" {
		t.Fatalf("launches %+v; want one m6i.large for the pods the kept node cannot hold", r.Launch)
	}
	ds := in.DaemonSets[1].DeepCopy()
	ds.Name = "node-agent"
	ds.Spec.Template.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse("1500m")
	in.DaemonSets = append(in.DaemonSets, ds)
	r = consolidate(t, in, fakeNow)
	for _, l := range r.Launch {
		if l.InstanceType == "m6i.large" {
			t.Errorf("launches an m6i.large though the daemonsets alone take 1.6 of its 1.93 cpus")
		}
	}
}

// A NodePool written for Karpenter v1.15 may leave consolidateAfter out; the API
// server stores the default 0s, and a file read by simulate must mean the same, not
// "Never": the recent node is no longer held by consolidateAfter.
func TestConsolidateAfterLeftOutMeansZero(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("testdata", "consolidate", "blocked.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	in := &Inputs{}
	v115 := strings.ReplaceAll(string(raw), "      consolidateAfter: 5m\n", "")
	if err := in.Read(strings.NewReader(v115), "blocked.yaml without consolidateAfter"); err != nil {
		t.Fatal(err)
	}
	for _, np := range in.NodePools {
		if got := np.Spec.Disruption.ConsolidateAfter.String(); got != "0s" {
			t.Errorf("NodePool %s: consolidateAfter = %s, want the CRD's default 0s", np.Name, got)
		}
	}
	kept := keptReasons(consolidate(t, in, fakeNow))
	if strings.Contains(kept[nodeRecent], "consolidateAfter") {
		t.Errorf("%s is held by consolidateAfter, which the pool left at its default 0s: %q", nodeRecent, kept[nodeRecent])
	}
}
