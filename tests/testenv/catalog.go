package testenv

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/dovetail-sh/dovetail/controller/catalog"
)

// TestZones are the zones the test catalog offers.
var TestZones = []string{"us-west-2a", "us-west-2b", "us-west-2c"}

// testInstanceTypes are real AWS types, GPU ones included, that tests launch: small
// enough a set to reason about, varied enough to exercise every constraint.
var testInstanceTypes = []string{
	"c5.large", "c5.xlarge", "c5.2xlarge", "c5.4xlarge", "c6g.large", "c6g.xlarge", "c6g.2xlarge", "c6g.4xlarge",
	"c7i.large", "c7i.xlarge", "m5.large", "m5.xlarge", "m5.2xlarge", "m5.4xlarge", "m6g.large", "m6g.xlarge",
	"m6g.2xlarge", "m7i.large", "m7i.xlarge", "m7i.2xlarge", "r5.large", "r5.xlarge", "r6g.large", "r6g.xlarge",
	"t3.medium", "t3.large", "g4dn.xlarge", "g4dn.2xlarge", "g5.xlarge", "g5.2xlarge", "inf2.xlarge",
}

// WriteCatalog writes the test catalog (the types above from the embedded AWS
// catalog, offered in TestZones) and returns its path.
func WriteCatalog(t testing.TB) string {
	t.Helper()
	full, err := catalog.EmbeddedAWS()
	if err != nil {
		t.Fatal(err)
	}
	subset := &catalog.File{}
	for _, name := range testInstanceTypes {
		if e, ok := full.Find(name); ok {
			subset.InstanceTypes = append(subset.InstanceTypes, e)
		}
	}
	if len(subset.InstanceTypes) < 25 {
		t.Fatalf("the embedded catalog is missing test instance types: found %d of %d", len(subset.InstanceTypes), len(testInstanceTypes))
	}
	subset = subset.InZones(TestZones)
	path := filepath.Join(t.TempDir(), "catalog.json")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := catalog.Write(f, subset); err != nil {
		t.Fatal(err)
	}
	return path
}
