// Package repo checks the repository's pages and workflows against what the code
// and the make targets pin, so no page or workflow says another version.
package repo

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/dovetail-sh/dovetail/tests/karpenterrelease"
)

const root = "../.."

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, path))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// pages are the Markdown files a user reads: the README, docs/, the guides, the
// modules' and examples' READMEs, and the CHANGELOG's unreleased part (released
// entries say what was true then).
func pages(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, pattern := range []string{"README.md", "docs/*.md", "docs/guides/*.md", "modules/*/README.md", "examples/*/README.md", "charts/*/README.md"} {
		matches, err := filepath.Glob(filepath.Join(root, pattern))
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range matches {
			rel, _ := filepath.Rel(root, m)
			out[rel] = read(t, rel)
		}
	}
	changelog := read(t, "CHANGELOG.md")
	unreleased, _, _ := strings.Cut(changelog[strings.Index(changelog, "## Unreleased"):], "\n## [")
	out["CHANGELOG.md (Unreleased)"] = unreleased
	return out
}

// Every page that says which Karpenter release Dovetail targets names the same
// one, karpenterrelease.Target.
func TestOneKarpenterTargetEverywhere(t *testing.T) {
	claim := regexp.MustCompile(`(?i)(?:targets?|compatible with|is the target)[^.]{0,20}?Karpenter\s+(v\d+\.\d+\.\d+)|Karpenter\s+(v\d+\.\d+\.\d+)\s+is the target`)
	found := 0
	for page, text := range pages(t) {
		for _, m := range claim.FindAllStringSubmatch(text, -1) {
			found++
			v := m[1] + m[2]
			if v != karpenterrelease.Target {
				t.Errorf("%s says %q; the target is Karpenter %s (tests/karpenterrelease.Target)", page, m[0], karpenterrelease.Target)
			}
		}
	}
	if found == 0 {
		t.Errorf("no page names the Karpenter release Dovetail targets")
	}
}

// The workflows that run make test install what it needs beyond Go at the versions
// the repository pins: moto from hack/requirements.txt, terraform at
// hack/build-tools.sh's TERRAFORM_VERSION.
func TestWorkflowsInstallThePinnedTools(t *testing.T) {
	tf := regexp.MustCompile(`TERRAFORM_VERSION:-v([0-9.]+)`).FindStringSubmatch(read(t, "hack/build-tools.sh"))
	if tf == nil {
		t.Fatal("hack/build-tools.sh pins no TERRAFORM_VERSION")
	}
	if !regexp.MustCompile(`(?m)^moto\[server\]==\d+\.\d+\.\d+$`).MatchString(read(t, "hack/requirements.txt")) {
		t.Fatal("hack/requirements.txt pins no moto release")
	}
	workflows, err := filepath.Glob(filepath.Join(root, ".github/workflows/*.yml"))
	if err != nil {
		t.Fatal(err)
	}
	tested := 0
	for _, w := range workflows {
		rel, _ := filepath.Rel(root, w)
		text := read(t, rel)
		if !strings.Contains(text, "make test") {
			continue
		}
		tested++
		if !strings.Contains(text, "pip install -r hack/requirements.txt") {
			t.Errorf("%s runs make test without installing moto from hack/requirements.txt", rel)
		}
		if !strings.Contains(text, `terraform_version: "`+tf[1]+`"`) {
			t.Errorf("%s runs make test without terraform %s (hack/build-tools.sh)", rel, tf[1])
		}
	}
	if tested < 2 {
		t.Errorf("%d workflows run make test; want the test workflow (every push and pull request) and the release", tested)
	}
}

// Each release's section of the CHANGELOG files an entry under one heading of a kind:
// two "### Fixed" in one release hide one from a reader of the other.
func TestChangelogHeadingsOncePerRelease(t *testing.T) {
	seen := map[string]bool{}
	release := ""
	for _, line := range strings.Split(read(t, "CHANGELOG.md"), "\n") {
		switch {
		case strings.HasPrefix(line, "## "):
			release, seen = line, map[string]bool{}
		case strings.HasPrefix(line, "### "):
			if seen[line] {
				t.Errorf("%s has %q twice", release, line)
			}
			seen[line] = true
		}
	}
	if release == "" {
		t.Error("the CHANGELOG has no release section")
	}
}

// The README is for users: what Dovetail is, the two commands, install, switch,
// links. Maintainers' notes belong in docs/.
func TestReadmeIsForUsers(t *testing.T) {
	readme := read(t, "README.md")
	if n := strings.Count(readme, "\n"); n >= 200 {
		t.Errorf("README.md has %d lines; keep it under 200 and move the detail to docs/", n)
	}
	for _, want := range []string{"make demo", "make test", "## Install on a real cluster", "## From Karpenter"} {
		if !strings.Contains(readme, want) {
			t.Errorf("README.md lacks %q", want)
		}
	}
	// Commit hashes are maintainers' history.
	if m := regexp.MustCompile(`\b(?:at|since|before) [0-9a-f]{7,40}\b`).FindString(readme); m != "" {
		t.Errorf("README.md names a commit (%q): that history belongs in docs/ or the CHANGELOG", m)
	}
}
