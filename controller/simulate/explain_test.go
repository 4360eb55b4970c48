package simulate

import (
	"bytes"
	"strings"
	"testing"
)

func explain(t *testing.T, node string) *NodeExplanation {
	t.Helper()
	e, err := Explain(readSnapshot(t, "blocked.yaml"), westTypes(t), defaults(), fakeNow, node)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// TestExplainNode: for each node of the blocked snapshot, explain says what
// consolidation --consolidate says of it, and for a candidate what removing it
// alone would do: where its pods go and what it saves.
func TestExplainNode(t *testing.T) {
	report := consolidate(t, readSnapshot(t, "blocked.yaml"), fakeNow)
	kept := keptReasons(report)
	for _, node := range []string{nodeDoNotDisrupt, nodePDB, nodeRecent, nodeFrozen, nodeUnmanaged} {
		e := explain(t, node)
		if e.Consolidated || !strings.HasSuffix(e.Why, kept[node]) || kept[node] == "" {
			t.Errorf("%s: consolidated %v, why %q; want kept for %q, as --consolidate says", node, e.Consolidated, e.Why, kept[node])
		}
	}
	pdb := explain(t, nodePDB)
	if pdb.IfRemoved == nil || len(pdb.IfRemoved.Moves) == 0 || !strings.Contains(pdb.Why, "ledger") {
		t.Errorf("the PDB node: %+v; want the PDB named and where its pods would go", pdb)
	}
	if unmanaged := explain(t, nodeUnmanaged); unmanaged.IfRemoved != nil {
		t.Errorf("an unmanaged node is no candidate, yet: %+v", unmanaged.IfRemoved)
	}

	free := explain(t, nodeFree)
	if !free.Consolidated || free.IfRemoved == nil || free.IfRemoved.SavingsPerHour <= 0 || len(free.IfRemoved.Moves) != 1 {
		t.Fatalf("the free node: %+v; want it consolidated now, its one pod moved, $/h saved", free)
	}
	var out bytes.Buffer
	if err := free.WriteTable(&out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"CONSOLIDATED NOW", "IF REMOVED NOW (alone): saves $", "PODS GO TO", free.IfRemoved.Moves[0].Pod} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the table lacks %q:\n%s", want, out.String())
		}
	}
	if _, err := Explain(readSnapshot(t, "blocked.yaml"), westTypes(t), defaults(), fakeNow, "nope"); err == nil || !strings.Contains(err.Error(), `"nope" is not in the snapshot`) {
		t.Errorf("an unknown node: %v", err)
	}
}
