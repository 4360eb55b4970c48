// Package compat locates the corpora of Karpenter NodePools, EC2NodeClasses and
// workloads the tests apply and plan: the repository's own (this folder), and the
// corpus of public Karpenter examples named by DOVETAIL_COMPAT_DIR.
package compat

import (
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"testing"
)

// EnvVar names the folder of the public corpus.
const EnvVar = "DOVETAIL_COMPAT_DIR"

// Corpus is a folder of X.yaml (Karpenter objects) and X.workload.yaml (workloads).
type Corpus struct {
	Name string
	Dir  string
	// Own is the repository's corpus, whose every file the tests know.
	Own bool
}

// Own is the repository's corpus.
func Own() Corpus {
	_, file, _, _ := runtime.Caller(0)
	return Corpus{Name: "own", Dir: filepath.Dir(file), Own: true}
}

// Each runs f as a subtest per corpus: the repository's always, the public one when
// DOVETAIL_COMPAT_DIR names it, and otherwise a skipped subtest saying how to run it.
func Each(t *testing.T, f func(t *testing.T, c Corpus)) {
	t.Helper()
	t.Run("own", func(t *testing.T) { f(t, Own()) })
	t.Run("public", func(t *testing.T) {
		dir := os.Getenv(EnvVar)
		if dir == "" {
			t.Skipf("%s is not set: the corpus of public Karpenter examples is skipped. Set it to that folder (.ci/run sets it when the shared corpus folder sits beside the clone).", EnvVar)
		}
		if _, err := os.Stat(dir); err != nil {
			t.Fatalf("%s=%s: %v", EnvVar, dir, err)
		}
		f(t, Corpus{Name: "public", Dir: dir})
	})
}

// Files are the corpus's Karpenter files and workload files, sorted.
func (c Corpus) Files(t testing.TB) (karpenter, workloads []string) {
	t.Helper()
	entries, err := os.ReadDir(c.Dir)
	if err != nil {
		t.Fatalf("reading the %s compat corpus at %s: %v", c.Name, c.Dir, err)
	}
	for _, e := range entries {
		name := e.Name()
		switch {
		case strings.HasSuffix(name, ".workload.yaml"):
			workloads = append(workloads, filepath.Join(c.Dir, name))
		case strings.HasSuffix(name, ".yaml"):
			karpenter = append(karpenter, filepath.Join(c.Dir, name))
		}
	}
	sort.Strings(karpenter)
	sort.Strings(workloads)
	if len(karpenter)+len(workloads) == 0 {
		t.Fatalf("the %s compat corpus at %s has no .yaml files", c.Name, c.Dir)
	}
	return karpenter, workloads
}

// Expected is how many NodePools and EC2NodeClasses the corpus holds, as its
// SOURCES.md lists them (the public corpus's "objects" column) or, for the
// repository's, as written here; ok is false when nothing says.
func (c Corpus) Expected(t testing.TB) (pools, classes int, ok bool) {
	t.Helper()
	if c.Own {
		return ownPools, ownClasses, true
	}
	raw, err := os.ReadFile(filepath.Join(c.Dir, "SOURCES.md"))
	if err != nil {
		return 0, 0, false
	}
	text := string(raw)
	start := strings.Index(text, "## Karpenter files")
	if start < 0 {
		return 0, 0, false
	}
	section := text[start:]
	if end := strings.Index(section[1:], "\n## "); end >= 0 {
		section = section[:end+1]
	}
	for _, line := range strings.Split(section, "\n") {
		if strings.HasPrefix(line, "| `") {
			pools += strings.Count(line, "NodePool/")
			classes += strings.Count(line, "EC2NodeClass/")
		}
	}
	return pools, classes, true
}

// The repository corpus's objects, kept with the files.
const (
	ownPools   = 3
	ownClasses = 2
)
