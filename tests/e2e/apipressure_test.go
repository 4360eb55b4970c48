package e2e

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	dtaws "github.com/dovetail-sh/dovetail/controller/cloudprovider/aws"
	"github.com/dovetail-sh/dovetail/controller/controllers/ec2nodeclass/status"
	"github.com/dovetail-sh/dovetail/tests/localstack"
)

// karpenterSteadyEC2PerMinute is what Karpenter's own loops ask EC2 per minute over
// a quiet fleet of n nodes with one EC2NodeClass, read from karpenter-provider-aws
// v1.14 (pkg/controllers and pkg/providers): DescribeInstances listing the
// fleet twice a minute (instance garbage collection every 2 minutes, core's claim
// garbage collection every 2 minutes, capacity-type sync every minute), 1,000
// instances a page; DescribeInstanceStatus three times a minute (one call per
// filter set); subnets, security groups and images each once a minute (their
// caches last the 1-minute refresh interval); and the 12-hourly types, offerings
// and prices, next to nothing.
func karpenterSteadyEC2PerMinute(nodes int) (describeInstances, total float64) {
	pages := math.Max(1, math.Ceil(float64(nodes)/1000))
	describeInstances = 2 * pages
	return describeInstances, describeInstances + 3 + 1 + 1 + 1
}

// TestAWSAPIPressure counts what the controller asks AWS, per API, over a quiet
// fleet and during a burst. At steady state it may ask EC2 no more than
// Karpenter's loops would over the same fleet, in all and in DescribeInstances,
// the call whose answer grows with the fleet. In a burst of 1,000 pods the
// launches share their calls: a launch template is created once, however many
// launches need it at once, and the check each launch makes for an instance
// already launched for its claim is batched. AWS_PRESSURE_NODES sets the fleet
// (40 by default). On two cores 250 is as far as the emulator goes: while the
// second 250 launched, one DescribeInstances of all 300 instances waited minutes
// for it, and launches timed out waiting on it.
func TestAWSAPIPressure(t *testing.T) {
	nodes := envInt("AWS_PRESSURE_NODES", 40)
	pc := startAWSClusterProcesses(t, processClusterOptions{replicas: 1, leaderElect: true})
	ctx := context.Background()
	c := pc.client

	// Nothing is consolidated or expires while the calls are counted.
	pool := localstack.NodePool("default",
		localstack.Requirement(v1.LabelCapacityType, v1.OpIn, v1.CapacityTypeOnDemand),
		localstack.Requirement(v1.LabelInstanceCategory, v1.OpIn, "c", "m", "r"),
		localstack.Requirement(v1.LabelInstanceSize, v1.OpIn, "large", "xlarge"))
	pool.Spec.Disruption.Budgets = []v1.Budget{{Nodes: "0"}}
	must(t, c.Create(ctx, pool))
	// One pod per node, so the fleet is as many nodes as pods.
	fleet := localstack.Deployment("fleet", int32(nodes), "100m", "128Mi", offNodesOf("fleet"))
	// The fleet grows 250 nodes at a time. At 2,000 at once, this two-core stack's
	// API server took 5 s to answer lease updates while it created them, and the
	// leader, its lease lost, exited (as any controller-runtime leader does), which
	// is the stack's limit, not what this test measures.
	const step = 250
	fleet.Spec.Replicas = ptr(int32(min(nodes, step)))
	must(t, c.Create(ctx, fleet))
	for grown := min(nodes, step); ; grown = min(nodes, grown+step) {
		settle(t, c, "fleet", grown, time.Duration(5+grown/20)*time.Minute)
		if grown == nodes {
			break
		}
		scale(t, c, "fleet", int32(min(nodes, grown+step)))
	}
	quietSince := time.Now()

	// Steady state: a quiet fleet, counted over two whole periods of the slowest
	// loop, the node class's refresh (DescribeSubnets every 5 minutes): from a
	// refresh to the first one at least two periods later. Garbage collection
	// (every 2 minutes), drift listings (each minute) and the interruption
	// queue's polls fall inside it often enough to count evenly.
	const periods = 2
	var window [2]time.Time
	eventually(t, (periods+2)*status.DefaultRefresh+5*time.Minute, "two whole node-class refresh periods over the quiet fleet", func() error {
		window = [2]time.Time{}
		for _, call := range pc.ec2Calls.Calls("DescribeSubnets") {
			switch {
			case call.At.Before(quietSince):
			case window[0].IsZero():
				window[0] = call.At
			case call.At.Sub(window[0]) >= periods*status.DefaultRefresh:
				window[1] = call.At
				return nil
			}
		}
		return fmt.Errorf("no refresh %s after the one at %s", periods*status.DefaultRefresh, window[0].Format(time.TimeOnly))
	})
	steady := pc.ec2Calls.CountsBetween("ec2", window[0], window[1])
	minutes := window[1].Sub(window[0]).Minutes()
	t.Logf("steady state over %d nodes, %.1f minutes, EC2 calls per minute: %s; others: %s", nodes, minutes, perMinute(steady, minutes),
		perMinute(others(pc.ec2Calls.CountsBetween("", window[0], window[1]), steady), minutes))
	describeBound, totalBound := karpenterSteadyEC2PerMinute(nodes)
	if got := float64(steady["DescribeInstances"]) / minutes; got > describeBound {
		t.Errorf("%.1f DescribeInstances a minute over a quiet fleet of %d nodes; Karpenter's loops make %.1f", got, nodes, describeBound)
	}
	if got := float64(sum(steady)) / minutes; got > totalBound {
		t.Errorf("%.1f EC2 calls a minute over a quiet fleet of %d nodes; Karpenter's loops make %.1f", got, nodes, totalBound)
	}

	// A burst of 1,000 pods, kept off the fleet's nodes: their free room would
	// take the whole burst from 250 nodes up, and it would launch nothing.
	from, start := pc.ec2Calls.Len(), time.Now()
	must(t, c.Create(ctx, localstack.Deployment("burst", 1000, "250m", "256Mi", offNodesOf("fleet"))))
	settle(t, c, "burst", 1000, 15*time.Minute)
	burst := pc.ec2Calls.CountsSince(from)
	t.Logf("burst of 1,000 pods over %.1f minutes, calls: %s", time.Since(start).Minutes(), perMinute(burst, 1))
	created := map[string]int{}
	for _, call := range pc.ec2Calls.Calls("CreateLaunchTemplate") {
		if !call.Failed {
			created[call.LaunchTemplateName]++
		}
	}
	for name, n := range created {
		if n > 1 {
			t.Errorf("launch template %q was created %d times; launches that need the same template must share its creation", name, n)
		}
	}
	checks, checked := 0, 0
	for _, call := range pc.ec2Calls.CallsSince(from, "DescribeInstances") {
		if claims := call.Filters["tag:"+dtaws.TagNodeClaim]; len(claims) > 0 {
			checks, checked = checks+1, checked+len(claims)
		}
	}
	launches := burst["CreateFleet"]
	t.Logf("%d launches checked for an earlier instance in %d DescribeInstances calls (%d claims asked about)", launches, checks, checked)
	if launches < 10 {
		t.Errorf("the burst of 1,000 pods made %d launches; too few to show whether their checks are shared", launches)
	} else if checks >= launches || checked <= checks {
		t.Errorf("%d DescribeInstances calls asked about %d claims for %d launches; the checks of launches made together must share a call", checks, checked, launches)
	}
}

// offNodesOf keeps a Deployment's pods off the nodes of app's pods.
func offNodesOf(app string) func(*corev1.PodSpec) {
	return func(spec *corev1.PodSpec) {
		spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
				TopologyKey: corev1.LabelHostname, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}}}}}
	}
}

func sum(counts map[string]int) int {
	n := 0
	for _, calls := range counts {
		n += calls
	}
	return n
}

// others are the counts of all not in some.
func others(all, some map[string]int) map[string]int {
	out := map[string]int{}
	for action, n := range all {
		if n -= some[action]; n > 0 {
			out[action] = n
		}
	}
	return out
}

// perMinute formats counts over minutes as "Action rate" pairs, most first.
func perMinute(counts map[string]int, minutes float64) string {
	actions := make([]string, 0, len(counts))
	for a := range counts {
		actions = append(actions, a)
	}
	sort.Slice(actions, func(i, j int) bool { return counts[actions[i]] > counts[actions[j]] })
	parts := make([]string, 0, len(actions))
	for _, a := range actions {
		parts = append(parts, fmt.Sprintf("%s %.1f", a, float64(counts[a])/minutes))
	}
	return strings.Join(parts, ", ")
}
