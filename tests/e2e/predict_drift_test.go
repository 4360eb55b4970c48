package e2e

import (
	"context"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/controller/catalog"
	"github.com/dovetail-sh/dovetail/tests/localstack"
	"github.com/dovetail-sh/dovetail/tests/testenv"
)

// TestDriftInTerraformPlanIsWhatTheControllerDoes: a dovetail_node_pool applied by
// terraform, with the controller running. A change to its requirements that the
// running m5.large nodes no longer meet is planned: the warning `terraform plan`
// prints says how many nodes drift, what replaces them and what the pool costs
// after. Applied, the controller replaces exactly those nodes with the types,
// capacity types and zones the plan named, and the pool then costs what the plan
// said; a second plan is empty.
func TestDriftInTerraformPlanIsWhatTheControllerDoes(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the whole local stack and runs terraform")
	}
	ctx := context.Background()
	root, err := testenv.RepoRoot()
	must(t, err)
	stack := testenv.StartStack(t)
	opts := testenv.DefaultOptions(t)
	stack.RunController(t, opts)
	c := stack.Client
	must(t, c.Create(ctx, localstack.NodeClass("default")))

	work := t.TempDir()
	providerDir := filepath.Join(work, "provider")
	must(t, localstack.BuildProvider(ctx, root, providerDir))
	dir := filepath.Join(work, "pool")
	must(t, os.MkdirAll(dir, 0o755))
	tf, err := localstack.NewTerraform(dir, providerDir)
	must(t, err)
	write := func(types string) {
		config := fmt.Sprintf(`
terraform {
  required_providers {
    dovetail = { source = %q }
  }
}

provider "dovetail" {
  kubernetes {
    config_path = %q
  }
}

resource "dovetail_node_pool" "web" {
  name = "web"
  spec = {
    disruption = { consolidate_after = "Never" }
    template = {
      spec = {
        node_class_ref = { group = "karpenter.k8s.aws", kind = "EC2NodeClass", name = "default" }
        requirements = [
          { key = "node.kubernetes.io/instance-type", operator = "In", values = [%s] },
          { key = "karpenter.sh/capacity-type", operator = "In", values = ["on-demand"] },
        ]
      }
    }
  }
}
`, localstack.ProviderSource, stack.Kubeconfig, types)
		must(t, os.WriteFile(filepath.Join(dir, "main.tf"), []byte(config), 0o644))
	}
	write(`"m5.large"`)
	must(t, tf.Apply(ctx))
	t.Cleanup(func() {
		if err := tf.Destroy(ctx); err != nil {
			t.Errorf("cleaning up: %v", err)
		}
	})
	must(t, c.Create(ctx, localstack.Deployment("web", 2, "1", "1Gi")))
	allRunning(t, c, "web", 2, 90*time.Second)
	var before corev1.NodeList
	must(t, c.List(ctx, &before, client.MatchingLabels{v1.LabelNodePool: "web"}))
	original := sets.New[string]()
	for _, n := range before.Items {
		original.Insert(n.Name)
	}

	// The change: m5.large no longer allowed.
	write(`"m7i.large", "m5.xlarge"`)
	out, err := tf.Run(ctx, "plan", "-no-color")
	must(t, err)
	warning := regexp.MustCompile(`(?s)Planned impact of changing NodePool web.*?Of (\d+) node\(s\): (\d+) drift and are replaced.*?Replacements: ([^\n]*)\.\n.*?Cost: \$([0-9.]+)/h before, \$([0-9.]+)/h after`).FindStringSubmatch(out)
	if warning == nil {
		t.Fatalf("terraform plan prints no impact of the change:\n%s", out)
	}
	governed, _ := strconv.Atoi(warning[1])
	drift, _ := strconv.Atoi(warning[2])
	replacements := warning[3]
	after, _ := strconv.ParseFloat(warning[5], 64)
	t.Logf("planned: of %d nodes %d drift, replaced by %s; $%.4f/h after", governed, drift, replacements, after)
	if governed != original.Len() || drift != original.Len() {
		t.Fatalf("the plan says %d of %d nodes drift; the pool has %d m5.large, none of which the new requirements allow", drift, governed, original.Len())
	}

	must(t, tf.Apply(ctx))
	cat, err := catalog.Load(opts.KwokCatalog)
	must(t, err)
	price := func(n corev1.Node) (float64, error) {
		e, ok := cat.Find(n.Labels[v1.LabelInstanceType])
		if !ok {
			return 0, fmt.Errorf("%s: type %s not in the catalog", n.Name, n.Labels[v1.LabelInstanceType])
		}
		for _, o := range e.Offerings {
			if o.Zone == n.Labels[v1.LabelTopologyZone] && o.CapacityType == n.Labels[v1.LabelCapacityType] {
				return o.Price, nil
			}
		}
		return 0, fmt.Errorf("%s: no %s offering in %s", n.Name, n.Labels[v1.LabelCapacityType], n.Labels[v1.LabelTopologyZone])
	}
	eventually(t, 3*time.Minute, "the drifted nodes replaced, at the price planned", func() error {
		var claims v1.NodeClaimList
		if err := c.List(ctx, &claims, client.MatchingLabels{v1.LabelNodePool: "web"}); err != nil {
			return err
		}
		for _, nc := range claims.Items {
			if nc.DeletionTimestamp != nil {
				return fmt.Errorf("nodeclaim %s is still being deleted", nc.Name)
			}
		}
		var nodes corev1.NodeList
		if err := c.List(ctx, &nodes, client.MatchingLabels{v1.LabelNodePool: "web"}); err != nil {
			return err
		}
		total := 0.0
		launched := map[string]int{}
		for _, n := range nodes.Items {
			launched[fmt.Sprintf("%s (%s, %s)", n.Labels[v1.LabelInstanceType], n.Labels[v1.LabelCapacityType], n.Labels[v1.LabelTopologyZone])]++
			if original.Has(n.Name) {
				return fmt.Errorf("%s, which the plan said drifts, is still there", n.Name)
			}
			p, err := price(n)
			if err != nil {
				return err
			}
			total += p
		}
		var parts []string
		for _, k := range slices.Sorted(maps.Keys(launched)) {
			parts = append(parts, fmt.Sprintf("%d %s", launched[k], k))
		}
		if got := strings.Join(parts, ", "); got != replacements || math.Abs(total-after) > 1e-4 || len(claims.Items) != len(nodes.Items) {
			return fmt.Errorf("%s at $%.4f/h (%d claims); the plan said %s at $%.4f/h", got, total, len(claims.Items), replacements, after)
		}
		return nil
	})
	allRunning(t, c, "web", 2, 60*time.Second)
	if plan, err := tf.PlannedChanges(ctx); err != nil || plan != "" {
		t.Errorf("a plan after the drift settled has changes (err %v):\n%s", err, plan)
	}
	must(t, c.Delete(ctx, localstack.Deployment("web", 0, "1", "1Gi")))
}
