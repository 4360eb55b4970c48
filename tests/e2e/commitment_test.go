package e2e

import (
	"context"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dovetail-sh/dovetail/controller/apis/dovetail/v1alpha1"
	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/controller/catalog"
	"github.com/dovetail-sh/dovetail/controller/metrics"
	"github.com/dovetail-sh/dovetail/controller/scheduling"
	"github.com/dovetail-sh/dovetail/tests/localstack"
	"github.com/dovetail-sh/dovetail/tests/testenv"
)

// claimsOf lists the pool's claims that are not being deleted.
func claimsOf(c client.Client, pool string) ([]v1.NodeClaim, error) {
	var list v1.NodeClaimList
	if err := c.List(context.Background(), &list, client.MatchingLabels{v1.LabelNodePool: pool}); err != nil {
		return nil, err
	}
	var out []v1.NodeClaim
	for _, nc := range list.Items {
		if nc.DeletionTimestamp == nil {
			out = append(out, nc)
		}
	}
	return out, nil
}

// TestCommitmentPlansReservedInstancesFirst: with two zonal Reserved Instances
// of m5.2xlarge, 12 pods of 1 cpu/2Gi on a c/m/r on-demand pool in that zone run
// on the two reserved m5.2xlarge (list prices pick other types), which are
// pinned on-demand to the zone and marked covered; the Commitment's status says
// both are used. Eight more pods go to capacity at list prices; scaled back to 6
// pods, consolidation removes that capacity and keeps the reserved nodes, which
// cost nothing to keep.
func TestCommitmentPlansReservedInstancesFirst(t *testing.T) {
	c := startCluster(t)
	ctx := context.Background()
	must(t, c.Create(ctx, &v1alpha1.Commitment{ObjectMeta: metav1.ObjectMeta{Name: "ri-m5"}, Spec: v1alpha1.CommitmentSpec{
		ReservedInstances: []v1alpha1.ReservedInstance{{InstanceType: "m5.2xlarge", Zone: "us-west-2a", Count: 2}}}}))
	eventually(t, 30*time.Second, "the commitment Ready", func() error {
		cm := &v1alpha1.Commitment{}
		if err := c.Get(ctx, client.ObjectKey{Name: "ri-m5"}, cm); err != nil {
			return err
		}
		if !meta.IsStatusConditionTrue(cm.Status.Conditions, "Ready") {
			return fmt.Errorf("conditions %v", cm.Status.Conditions)
		}
		return nil
	})
	pool := localstack.GeneralNodePool("default")
	pool.Spec.Template.Spec.Requirements = append(pool.Spec.Template.Spec.Requirements, localstack.Requirement(v1.LabelTopologyZone, v1.OpIn, "us-west-2a"))
	pool.Spec.Disruption.ConsolidateAfter = v1.MustParseNillableDuration("0s")
	pool.Spec.Disruption.Budgets = []v1.Budget{{Nodes: "100%"}}
	must(t, c.Create(ctx, pool))
	must(t, c.Create(ctx, localstack.Deployment("web", 12, "1", "2Gi")))
	allRunning(t, c, "web", 12, 90*time.Second)
	claims, err := claimsOf(c, "default")
	must(t, err)
	if len(claims) != 2 {
		t.Fatalf("%d claims; want the 2 reserved m5.2xlarge", len(claims))
	}
	reserved := map[string]bool{}
	for _, nc := range claims {
		reserved[nc.Name] = true
		if nc.Labels[v1.LabelInstanceType] != "m5.2xlarge" || nc.Labels[v1.LabelTopologyZone] != "us-west-2a" || nc.Labels[v1.LabelCapacityType] != v1.CapacityTypeOnDemand ||
			nc.Annotations[v1alpha1.CoveredByAnnotationKey] != "ri-m5: reserved m5.2xlarge in us-west-2a" {
			t.Errorf("claim %s: %s in %s (%s), annotations %v; want a reserved m5.2xlarge on-demand in us-west-2a, marked covered",
				nc.Name, nc.Labels[v1.LabelInstanceType], nc.Labels[v1.LabelTopologyZone], nc.Labels[v1.LabelCapacityType], nc.Annotations)
		}
	}
	eventually(t, 90*time.Second, "the commitment's status counts both reservations used", func() error {
		cm := &v1alpha1.Commitment{}
		if err := c.Get(ctx, client.ObjectKey{Name: "ri-m5"}, cm); err != nil {
			return err
		}
		if len(cm.Status.ReservedInstances) != 1 || cm.Status.ReservedInstances[0].Used != 2 || cm.Status.CoveredNodes != 2 {
			return fmt.Errorf("status %+v", cm.Status)
		}
		return nil
	})

	scale(t, c, "web", 20)
	allRunning(t, c, "web", 20, 90*time.Second)
	claims, err = claimsOf(c, "default")
	must(t, err)
	for _, nc := range claims {
		if !reserved[nc.Name] && nc.Annotations[v1alpha1.CoveredByAnnotationKey] != "" {
			t.Errorf("claim %s (%s) is marked covered by %q, but both reservations were in use", nc.Name, nc.Labels[v1.LabelInstanceType], nc.Annotations[v1alpha1.CoveredByAnnotationKey])
		}
	}

	scale(t, c, "web", 6)
	eventually(t, 120*time.Second, "consolidation down to the reserved nodes", func() error {
		claims, err := claimsOf(c, "default")
		if err != nil {
			return err
		}
		var names []string
		for _, nc := range claims {
			names = append(names, nc.Name+"/"+nc.Labels[v1.LabelInstanceType])
		}
		if len(claims) != 2 || !reserved[claims[0].Name] || !reserved[claims[1].Name] {
			return fmt.Errorf("claims %v; want only the two reserved ones", names)
		}
		return nil
	})
	allRunning(t, c, "web", 6, 60*time.Second)
}

// TestSpendLimitCapsThePool: a pool limited to $0.50/h launches nodes up to it,
// leaves the pods that need more Pending, says so in a SpendLimitReached event
// on the NodePool, and reports its spend as karpenter_nodepools_usage.
func TestSpendLimitCapsThePool(t *testing.T) {
	c := startCluster(t)
	ctx := context.Background()
	pool := localstack.GeneralNodePool("capped")
	pool.Spec.Limits = v1.Limits{scheduling.ResourceSpendPerHour: resource.MustParse("0.5")}
	must(t, c.Create(ctx, pool))
	must(t, c.Create(ctx, localstack.Deployment("web", 30, "1", "2Gi")))
	eventually(t, 90*time.Second, "pods running up to the cap and the rest told why they wait", func() error {
		pods, err := podsOf(c, "web")
		if err != nil {
			return err
		}
		running := 0
		for _, p := range pods {
			if p.Status.Phase == corev1.PodRunning {
				running++
			}
		}
		var events corev1.EventList
		if err := c.List(ctx, &events); err != nil {
			return err
		}
		limited := false
		for _, e := range events.Items {
			limited = limited || (e.Reason == "SpendLimitReached" && e.InvolvedObject.Kind == "NodePool" && e.InvolvedObject.Name == "capped")
		}
		if running == 0 || running == len(pods) || !limited {
			return fmt.Errorf("%d of %d pods running, SpendLimitReached event %v", running, len(pods), limited)
		}
		return nil
	})
	claims, err := claimsOf(c, "capped")
	must(t, err)
	spend := 0.0
	for _, nc := range claims {
		spend += listPrice(t, nc.Labels[v1.LabelInstanceType])
	}
	if spend > 0.5+1e-9 {
		t.Errorf("the pool's %d claims cost $%.4f/h; the limit is $0.50/h", len(claims), spend)
	}
	eventually(t, 30*time.Second, "karpenter_nodepools_usage reports the spend", func() error {
		got := testutil.ToFloat64(metrics.NodePoolUsage.WithLabelValues("capped", string(scheduling.ResourceSpendPerHour)))
		if math.Abs(got-spend) > 1e-6 {
			return fmt.Errorf("usage %v; want %v", got, spend)
		}
		return nil
	})
}

// listPrice is the test catalog's on-demand price of the type (the same in
// every test zone).
func listPrice(t *testing.T, name string) float64 {
	t.Helper()
	full, err := catalog.EmbeddedAWS()
	must(t, err)
	e, ok := full.InZones(testenv.TestZones).Find(name)
	if !ok {
		t.Fatalf("%s is not in the catalog", name)
	}
	for _, o := range e.Offerings {
		if o.CapacityType == v1.CapacityTypeOnDemand {
			return o.Price
		}
	}
	t.Fatalf("%s has no on-demand offering", name)
	return 0
}
