package scheduling

import (
	"testing"

	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
)

var fuzzOperators = []v1.RequirementOperator{v1.OpIn, v1.OpNotIn, v1.OpExists, v1.OpDoesNotExist, v1.OpGt, v1.OpLt, v1.OpGte, v1.OpLte}

func fuzzRequirement(op byte, value string) (*Requirement, v1.RequirementOperator, error) {
	o := fuzzOperators[int(op)%len(fuzzOperators)]
	var values []string
	if o != v1.OpExists && o != v1.OpDoesNotExist {
		values = []string{value}
	}
	r, err := NewRequirement("example.com/key", o, values...)
	return r, o, err
}

// FuzzRequirementAlgebra checks the requirement algebra against its meaning: each
// operator allows what it says about its own value, and Intersection, Overlaps and
// Empty agree with Has on any value.
func FuzzRequirementAlgebra(f *testing.F) {
	f.Add(byte(0), "a", byte(1), "b", "a")
	f.Add(byte(4), "4", byte(5), "16", "8")
	f.Add(byte(6), "-9223372036854775808", byte(2), "", "-9223372036854775808")
	f.Add(byte(7), "9223372036854775807", byte(4), "-5", "9223372036854775807")
	f.Add(byte(4), "-5", byte(5), "9223372036854775807", "0")
	f.Add(byte(3), "", byte(1), "x", "y")
	f.Fuzz(func(t *testing.T, opA byte, valA string, opB byte, valB string, x string) {
		a, oa, err := fuzzRequirement(opA, valA)
		if err != nil {
			return
		}
		b, _, err := fuzzRequirement(opB, valB)
		if err != nil {
			return
		}
		switch oa {
		case v1.OpIn, v1.OpGte, v1.OpLte:
			if !a.Has(valA) {
				t.Fatalf("%s %s does not allow %q", oa, valA, valA)
			}
		case v1.OpNotIn, v1.OpGt, v1.OpLt:
			if a.Has(valA) {
				t.Fatalf("%s %s allows %q", oa, valA, valA)
			}
		}
		both := a.Has(x) && b.Has(x)
		if got := a.Intersection(b).Has(x); got != both {
			t.Fatalf("(%s) ∩ (%s) has %q = %v, want %v", a, b, x, got, both)
		}
		if both && !a.Overlaps(b) {
			t.Fatalf("(%s) and (%s) both allow %q but do not overlap", a, b, x)
		}
		if a.Has(x) && a.Empty() {
			t.Fatalf("(%s) allows %q but says it is empty", a, x)
		}
	})
}
