// Command dovetail is the user-facing CLI: `dovetail simulate` plans workloads against
// NodePools without a cluster; `dovetail render` prints what the Terraform provider's
// dovetail_controller installs, for GitOps.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"k8s.io/utils/clock"

	"github.com/dovetail-sh/dovetail/controller/catalog"
	"github.com/dovetail-sh/dovetail/controller/operator/settings"
	"github.com/dovetail-sh/dovetail/controller/simulate"
	"github.com/dovetail-sh/dovetail/controller/version"
)

const usage = `dovetail: Karpenter-compatible node autoscaling, planned before it happens.

Usage:
  dovetail simulate -f FILE [-f FILE ...] [--catalog FILE] [--zones Z1,Z2] [-o table|json]
  dovetail simulate --consolidate -f cluster.yaml [--now RFC3339] [--spot-to-spot] [--catalog FILE] [--zones Z1,Z2] [-o table|json]
  dovetail render --cluster-name NAME [--namespace NS] [--irsa-role-arn ARN] [...]
  dovetail migrate -f FILE [-f FILE ...] [--role NAME | --instance-profile NAME] [-o yaml|hcl]
  dovetail explain node NAME [-f cluster.yaml ...] [--kubeconfig PATH] [--now RFC3339] [-o table|json]
  dovetail version

Commands:
  simulate   plan pending workloads against NodePools and an instance-type catalog;
             with --consolidate, what consolidation would do now to a cluster snapshot
             (kubectl get nodes,nodeclaims,nodepools,ec2nodeclasses,nodeoverlays,capacitybuffers,provisioningrequests,commitments,pods,pdb,daemonsets,deploy,rs,sts,svc,podtemplates,pvc,pv,storageclasses,csinodes -A -o yaml)
  render     print the CRDs, RBAC and controller Deployment as YAML (run with -h for all settings)
  migrate    convert v1alpha5 Provisioners and AWSNodeTemplates, and v1beta1 NodePools and
             EC2NodeClasses, into v1 NodePools and EC2NodeClasses (YAML, or HCL for the
             Terraform provider), with every choice it made as a comment
  explain    why consolidation removes a node now or keeps it (budget, PDB, do-not-disrupt,
             consolidateAfter, policy, no cheaper fit), where its pods would go without it and
             the $/h that saves; from a snapshot (-f) or the live cluster
  version    the release this binary is (a development build says what Go recorded)
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run returns the exit code: 0 on success (unschedulable pods included), 1 for bad
// input, 2 for bad usage.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(stderr, usage)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	switch args[0] {
	case "simulate":
		return simulateCmd(args[1:], stdout, stderr)
	case "render":
		return renderCmd(args[1:], stdout, stderr)
	case "migrate":
		return migrateCmd(args[1:], stdout, stderr)
	case "explain":
		return explainCmd(args[1:], stdout, stderr)
	case "version", "--version":
		fmt.Fprintln(stdout, version.Get())
		return 0
	default:
		fmt.Fprintf(stderr, "dovetail: unknown command %q\n\n%s", args[0], usage)
		return 2
	}
}

type fileList []string

func (f *fileList) String() string     { return strings.Join(*f, ",") }
func (f *fileList) Set(v string) error { *f = append(*f, v); return nil }

func simulateCmd(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("simulate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var files fileList
	fs.Var(&files, "f", "manifest file (multi-document YAML or JSON); repeat for more, - for stdin")
	catalogPath := fs.String("catalog", "", "instance-type catalog JSON (default: the embedded AWS catalog)")
	output := fs.String("o", "table", "output format: table or json")
	zones := fs.String("zones", "", "comma-separated zones to offer every catalog type in (e.g. us-west-2a,us-west-2b); prices are kept")
	consolidate := fs.Bool("consolidate", false, "dry-run consolidation on a cluster snapshot: nodes removed and replaced, pods moved, $/h before and after, and what blocks the rest")
	spotToSpot := fs.Bool("spot-to-spot", false, "with --consolidate: allow replacing spot nodes with cheaper spot nodes (--feature-gates SpotToSpotConsolidation=true)")
	nowFlag := fs.String("now", "", "with --consolidate: the time to decide at, RFC3339 (default: the current time)")
	var ctlFlags controllerFlags
	ctlFlags.register(fs)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if len(files) == 0 {
		fmt.Fprintln(stderr, "dovetail simulate: at least one -f FILE is required")
		return 2
	}
	if *output != "table" && *output != "json" {
		fmt.Fprintf(stderr, "dovetail simulate: -o %q is not a format; use table or json\n", *output)
		return 2
	}
	clk := clock.RealClock{}
	now := clk.Now()
	if *nowFlag != "" {
		t, err := time.Parse(time.RFC3339, *nowFlag)
		if err != nil {
			fmt.Fprintf(stderr, "dovetail simulate: --now %q is not an RFC3339 time such as 2026-01-02T15:04:05Z\n", *nowFlag)
			return 2
		}
		now = t
	}
	if !*consolidate && (*spotToSpot || *nowFlag != "") {
		fmt.Fprintln(stderr, "dovetail simulate: --spot-to-spot and --now apply only with --consolidate")
		return 2
	}
	in := &simulate.Inputs{}
	for _, path := range files {
		if err := readFile(in, path); err != nil {
			fmt.Fprintf(stderr, "dovetail simulate: %v\n", err)
			return 1
		}
	}
	ctl, code := ctlFlags.settingsFor(in, *spotToSpot, "dovetail simulate", stderr)
	if ctl == nil {
		return code
	}
	var cat *catalog.File
	var err error
	if *catalogPath != "" {
		cat, err = catalog.Load(*catalogPath)
	} else {
		cat, err = catalog.EmbeddedAWS()
	}
	if err != nil {
		fmt.Fprintf(stderr, "dovetail simulate: %v\n", err)
		return 1
	}
	if *zones != "" {
		cat = cat.InZones(strings.Split(*zones, ","))
	}
	for _, w := range in.AllWarnings() {
		fmt.Fprintf(stderr, "dovetail simulate: warning: %s\n", w)
	}
	if *consolidate {
		return consolidateCmd(in, cat, ctl, now, *output, stdout, stderr)
	}
	if n := len(in.PDBs); n > 0 {
		fmt.Fprintf(stderr, "dovetail simulate: warning: ignoring %d PodDisruptionBudget(s): only --consolidate reads them\n", n)
	}
	plan, err := simulate.Run(in, cat, ctl, clk)
	if err != nil {
		fmt.Fprintf(stderr, "dovetail simulate: %v\n", err)
		return 1
	}
	if *output == "json" {
		err = plan.WriteJSON(stdout)
	} else {
		err = plan.WriteTable(stdout)
	}
	if err != nil {
		fmt.Fprintf(stderr, "dovetail simulate: writing the plan, %v\n", err)
		return 1
	}
	return 0
}

func consolidateCmd(in *simulate.Inputs, cat *catalog.File, ctl *settings.Options, now time.Time, output string, stdout, stderr io.Writer) int {
	report, err := simulate.Consolidate(in, cat, ctl, now)
	if err != nil {
		fmt.Fprintf(stderr, "dovetail simulate: %v\n", err)
		return 1
	}
	for _, w := range report.Warnings {
		fmt.Fprintf(stderr, "dovetail simulate: warning: %s\n", w)
	}
	if output == "json" {
		err = report.WriteJSON(stdout)
	} else {
		err = report.WriteTable(stdout)
	}
	if err != nil {
		fmt.Fprintf(stderr, "dovetail simulate: writing the consolidation report, %v\n", err)
		return 1
	}
	return 0
}

func readFile(in *simulate.Inputs, path string) error {
	if path == "-" {
		return in.Read(os.Stdin, "stdin")
	}
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("opening %s, %w", path, err)
	}
	defer f.Close()
	return in.Read(f, path)
}
