package plancheck_test

import (
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/dovetail-sh/dovetail/controller/scheduling"
	"github.com/dovetail-sh/dovetail/controller/scheduling/plancheck"
	"github.com/dovetail-sh/dovetail/controller/scheduling/plancheck/plangen"
)

// embeddedUniverse is the embedded AWS catalog in three zones, as the engine gets it.
func embeddedUniverse(t testing.TB) *plangen.Universe {
	u, err := plangen.Embedded()
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// checkCase solves one generated case and returns what the plan breaks.
func checkCase(u *plangen.Universe, seed uint64, maxTypes int) []plancheck.Violation {
	c := u.Generate(seed, maxTypes)
	return plancheck.Plan(c.Input, scheduling.Solve(c.Input))
}

// TestEveryPlanHoldsItsPods is the invariant over random inputs: every pod fits
// every option of its claim, every placement on an existing node holds, every pod
// is accounted for, and no pod a type could host alone is left unschedulable.
// Most cases sample up to 200 of the catalog's types; every tenth plans on all
// 1,235.
func TestEveryPlanHoldsItsPods(t *testing.T) {
	u := embeddedUniverse(t)
	cases := 2000
	if testing.Short() {
		cases = 300
	}
	byRule := map[string]int{}
	failed := 0
	for seed := range uint64(cases) {
		maxTypes := 200
		if seed%10 == 0 {
			maxTypes = 0
		}
		vs := checkCase(u, seed, maxTypes)
		if len(vs) == 0 {
			continue
		}
		failed++
		for _, v := range vs {
			byRule[v.Rule]++
		}
		if failed <= 10 {
			t.Errorf("seed %d: %d violation(s), first: %s", seed, len(vs), firstFew(vs, 3))
		}
	}
	if failed > 0 {
		t.Errorf("%d of %d cases break the invariant; violations by rule: %v", failed, cases, sortedCounts(byRule))
	}
}

func firstFew(vs []plancheck.Violation, n int) string {
	parts := make([]string, 0, n)
	for _, v := range vs[:min(n, len(vs))] {
		parts = append(parts, v.String())
	}
	return strings.Join(parts, "; ")
}

func sortedCounts(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s=%d", k, m[k])
	}
	return strings.Join(parts, " ")
}

// FuzzPlanHoldsItsPods lets the fuzzer choose the seed and the catalog sample.
func FuzzPlanHoldsItsPods(f *testing.F) {
	for _, seed := range []uint64{1, 7, 42, 1000, 31337} {
		f.Add(seed, uint8(50))
	}
	f.Fuzz(func(t *testing.T, seed uint64, maxTypes uint8) {
		if vs := checkCase(embeddedUniverse(t), seed, int(maxTypes)); len(vs) > 0 {
			t.Fatalf("%d violation(s): %s", len(vs), firstFew(vs, 5))
		}
	})
}
