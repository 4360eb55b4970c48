package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/dovetail-sh/dovetail/controller/catalog"
	"github.com/dovetail-sh/dovetail/controller/simulate"
)

func explainCmd(args []string, stdout, stderr io.Writer) int {
	if len(args) < 2 || args[0] != "node" || strings.HasPrefix(args[1], "-") {
		fmt.Fprintln(stderr, "usage: dovetail explain node NAME [-f cluster.yaml ...] [--kubeconfig PATH] [--now RFC3339] [--spot-to-spot] [-o table|json]")
		return 2
	}
	name := args[1]
	fs := flag.NewFlagSet("explain", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var files fileList
	fs.Var(&files, "f", "cluster snapshot (kubectl get nodes,nodeclaims,nodepools,ec2nodeclasses,nodeoverlays,capacitybuffers,provisioningrequests,commitments,pods,pdb,daemonsets,deploy,rs,sts,svc,podtemplates,pvc,pv,storageclasses,csinodes -A -o yaml); without -f, the live cluster")
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig of the live cluster (default: $KUBECONFIG, then ~/.kube/config)")
	kubeContext := fs.String("context", "", "kubeconfig context of the live cluster")
	catalogPath := fs.String("catalog", "", "instance-type catalog JSON (default: the embedded AWS catalog)")
	zones := fs.String("zones", "", "comma-separated zones to offer every catalog type in")
	output := fs.String("o", "table", "output format: table or json")
	spotToSpot := fs.Bool("spot-to-spot", false, "allow replacing spot nodes with cheaper spot nodes (--feature-gates SpotToSpotConsolidation=true)")
	nowFlag := fs.String("now", "", "the time to decide at, RFC3339 (default: the current time)")
	var ctlFlags controllerFlags
	ctlFlags.register(fs)
	if err := fs.Parse(args[2:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if *output != "table" && *output != "json" {
		fmt.Fprintf(stderr, "dovetail explain: -o %q is not a format; use table or json\n", *output)
		return 2
	}
	now := time.Now()
	if *nowFlag != "" {
		t, err := time.Parse(time.RFC3339, *nowFlag)
		if err != nil {
			fmt.Fprintf(stderr, "dovetail explain: --now %q is not an RFC3339 time such as 2026-01-02T15:04:05Z\n", *nowFlag)
			return 2
		}
		now = t
	}
	in := &simulate.Inputs{}
	if len(files) > 0 {
		for _, path := range files {
			if err := readFile(in, path); err != nil {
				fmt.Fprintf(stderr, "dovetail explain: %v\n", err)
				return 1
			}
		}
	} else if err := readLive(in, *kubeconfig, *kubeContext); err != nil {
		fmt.Fprintf(stderr, "dovetail explain: %v\n", err)
		return 1
	}
	ctl, code := ctlFlags.settingsFor(in, *spotToSpot, "dovetail explain", stderr)
	if ctl == nil {
		return code
	}
	cat, err := catalog.EmbeddedAWS()
	if *catalogPath != "" {
		cat, err = catalog.Load(*catalogPath)
	}
	if err != nil {
		fmt.Fprintf(stderr, "dovetail explain: %v\n", err)
		return 1
	}
	if *zones != "" {
		cat = cat.InZones(strings.Split(*zones, ","))
	}
	e, err := simulate.Explain(in, cat, ctl, now, name)
	if err != nil {
		fmt.Fprintf(stderr, "dovetail explain: %v\n", err)
		return 1
	}
	if *output == "json" {
		err = e.WriteJSON(stdout)
	} else {
		err = e.WriteTable(stdout)
	}
	if err != nil {
		fmt.Fprintf(stderr, "dovetail explain: %v\n", err)
		return 1
	}
	return 0
}

// readLive reads the cluster the kubeconfig names.
func readLive(in *simulate.Inputs, kubeconfig, kubeContext string) error {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if kubeconfig != "" {
		rules.ExplicitPath = kubeconfig
	}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: kubeContext}).ClientConfig()
	if err != nil {
		return fmt.Errorf("reading the kubeconfig, %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return simulate.ReadLive(ctx, cfg, in)
}
