package catalog

import (
	"k8s.io/apimachinery/pkg/util/validation"
	"testing"

	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/controller/scheduling"
)

// The engine's types share equal requirements, and narrowing one type's
// requirements leaves the others' as they were.
func TestEngineTypesShareRequirements(t *testing.T) {
	f, err := EmbeddedAWS()
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]*scheduling.InstanceType{}
	distinct := map[*scheduling.Requirement]bool{}
	requirements := 0
	for _, it := range f.ForEngine(scheduling.DefaultAllocatableSettings()) {
		byName[it.Name] = it
		for _, r := range it.Requirements {
			distinct[r], requirements = true, requirements+1
		}
	}
	if len(distinct) > requirements/5 {
		t.Errorf("%d distinct requirements among %d over %d types; equal ones should be shared", len(distinct), requirements, len(byName))
	}
	m, c := byName["m6i.large"], byName["c6i.xlarge"]
	if m == nil || c == nil {
		t.Fatal("m6i.large or c6i.xlarge missing from the embedded catalog")
	}
	for _, key := range []string{v1.LabelArch, v1.LabelOS, v1.LabelTopologyZone, v1.LabelCapacityType} {
		if m.Requirements[key] != c.Requirements[key] {
			t.Errorf("m6i.large and c6i.xlarge have separate %s requirements %s and %s", key, m.Requirements[key], c.Requirements[key])
		}
	}
	if got := m.Requirements.Get(v1.LabelInstanceType); !got.Has("m6i.large") || got.Has("c6i.xlarge") {
		t.Errorf("m6i.large's instance type requirement is %s", got)
	}

	m.Requirements.Add(scheduling.MustRequirement(v1.LabelArch, v1.OpIn, "arm64"))
	if !c.Requirements.Get(v1.LabelArch).Has("amd64") || c.Requirements.Get(v1.LabelArch).Has("arm64") {
		t.Errorf("narrowing m6i.large's arch changed c6i.xlarge's to %s", c.Requirements.Get(v1.LabelArch))
	}
	if m.Requirements.Get(v1.LabelArch).Has("amd64") {
		t.Errorf("m6i.large's arch is %s after narrowing to arm64", m.Requirements.Get(v1.LabelArch))
	}
}

// In is the same requirement for the same values in any order, and a nil cache
// builds a new one each time.
func TestRequirementCacheIn(t *testing.T) {
	shared := scheduling.RequirementCache{}
	a := shared.In(v1.LabelTopologyZone, "us-west-2b", "us-west-2a", "us-west-2a")
	if b := shared.In(v1.LabelTopologyZone, "us-west-2a", "us-west-2b"); a != b {
		t.Errorf("zones a,b and b,a,a gave separate requirements %s and %s", a, b)
	}
	if c := shared.In(v1.LabelTopologyZone, "us-west-2a"); c == a || c.Has("us-west-2b") {
		t.Errorf("zone a alone gave %s", c)
	}
	var none scheduling.RequirementCache
	if none.In(v1.LabelArch, "amd64") == none.In(v1.LabelArch, "amd64") {
		t.Error("a nil cache shared a requirement")
	}
}

// Every label the embedded catalog gives a node is one kube-apiserver accepts and
// a node selector can name: "Radeon Pro V520" or "u-" could be neither.
func TestEmbeddedCatalogLabelsAreValid(t *testing.T) {
	f, err := EmbeddedAWS()
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range f.InstanceTypes {
		for k, v := range e.NodeLabels() {
			if errs := validation.IsValidLabelValue(v); len(errs) > 0 {
				t.Errorf("%s: label %s=%q: %v", e.Name, k, v, errs)
			}
		}
	}
}
