package e2e

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	ebtypes "github.com/aws/aws-sdk-go-v2/service/eventbridge/types"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/tests/localstack"
	"github.com/dovetail-sh/dovetail/tests/testenv"
)

// The controller's default lease timing, which this test runs on.
const (
	leaseDuration = 15 * time.Second
	retryPeriod   = 2 * time.Second
	// takeoverBound is the longest a follower may take to lead after the leader
	// dies. client-go's follower counts the lease from when it saw the last renewal,
	// and both its reads and its attempts come every retry period stretched by a
	// jitter of up to 1.2: so the lease time plus two jittered retry periods.
	takeoverBound = leaseDuration + 2*retryPeriod*22/10
)

// TestLeaderFailover runs two replicas with leader election, as the chart installs
// them, and kills the leader with SIGKILL in the middle of a burst of launches, of
// a consolidation and of an interruption drain, restarting it as a follower each
// time. The follower must take over within the lease time and finish the work: at
// the end no instance is leaked, none launched twice, no node is left tainted or
// cordoned, and the disruption budget held throughout. A clean stop (a rollout)
// hands the lease over at once instead of after the lease time.
func TestLeaderFailover(t *testing.T) {
	pc := startAWSClusterProcesses(t, processClusterOptions{replicas: 2, leaderElect: true})
	ctx := context.Background()
	c := pc.client

	const budget = 2
	pool := localstack.NodePool("default",
		localstack.Requirement(v1.LabelCapacityType, v1.OpIn, v1.CapacityTypeOnDemand),
		localstack.Requirement(v1.LabelInstanceCategory, v1.OpIn, "c", "m", "r"),
		localstack.Requirement(v1.LabelInstanceSize, v1.OpIn, "large", "xlarge"))
	pool.Spec.Disruption.ConsolidateAfter = v1.MustParseNillableDuration("2s")
	pool.Spec.Disruption.Budgets = []v1.Budget{{Nodes: strconv.Itoa(budget)}}
	must(t, c.Create(ctx, pool))
	must(t, c.Create(ctx, localstack.Deployment("failover", 0, "1", "1Gi")))
	budgetWatch := watchDisrupting(t, c)
	leader(t, pc.procs)
	start := time.Now()

	// A burst: killed once the first instances are launched and more are due.
	launchedBefore := len(pc.ec2Calls.Calls("CreateFleet"))
	scale(t, c, "failover", 20)
	eventually(t, 60*time.Second, "the leader launches for the burst", func() error {
		if len(pc.ec2Calls.Calls("CreateFleet")) == launchedBefore {
			return fmt.Errorf("no CreateFleet call yet")
		}
		return nil
	})
	failover(t, pc.procs, "a burst")
	settle(t, c, "failover", 20, 4*time.Minute)

	// A consolidation: killed once a node is tainted for it.
	scale(t, c, "failover", 4)
	eventually(t, 90*time.Second, "consolidation starts", func() error {
		n, err := disrupting(c)
		if err == nil && n == 0 {
			err = fmt.Errorf("no node being disrupted yet")
		}
		return err
	})
	failover(t, pc.procs, "a consolidation")
	settle(t, c, "failover", 4, 4*time.Minute)

	// An interruption drain: killed once the interrupted claim is being deleted.
	pods, err := podsOf(c, "failover")
	must(t, err)
	victim := claimOfNode(t, c, pods[0].Spec.NodeName)
	id := victim.Status.ProviderID[strings.LastIndex(victim.Status.ProviderID, "/")+1:]
	interrupt(t, pc.events, id)
	eventually(t, 60*time.Second, "the interrupted claim starts draining", func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(victim), victim); err != nil {
			return err
		}
		if victim.DeletionTimestamp == nil {
			return fmt.Errorf("nodeclaim %s is not deleting", victim.Name)
		}
		return nil
	})
	failover(t, pc.procs, "an interruption drain")
	eventually(t, 90*time.Second, "the interrupted claim is gone and its instance terminated", func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(victim), victim); err == nil {
			return fmt.Errorf("nodeclaim %s still exists", victim.Name)
		}
		desc, err := pc.clients.EC2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{id}})
		if err != nil {
			return err
		}
		if s := desc.Reservations[0].Instances[0].State.Name; s != ec2types.InstanceStateNameTerminated && s != ec2types.InstanceStateNameShuttingDown {
			return fmt.Errorf("instance %s is %s", id, s)
		}
		return nil
	})
	settle(t, c, "failover", 4, 4*time.Minute)

	// A rollout stops the leader cleanly: it releases the lease, and the follower
	// takes over within a retry period or so, not the lease time.
	l := leader(t, pc.procs)
	follower := pc.procs[1-l]
	pc.procs[l].Terminate()
	exited := time.Now()
	eventually(t, takeoverBound, "the follower takes the released lease", func() error {
		if !follower.IsLeader() {
			return fmt.Errorf("not leading yet")
		}
		return nil
	})
	handover := time.Since(exited)
	t.Logf("after a clean stop the follower led %s after the leader exited", handover.Round(10*time.Millisecond))
	// Released, the lease is free at the follower's next attempt: within one
	// jittered retry period of the leader's exit.
	if handover > retryPeriod*22/10+time.Second {
		t.Errorf("the follower took %s to lead after a clean stop; a released lease is taken at its next attempt, within %s", handover, retryPeriod*22/10)
	}
	pc.procs[l].Start()
	scale(t, c, "failover", 6)
	settle(t, c, "failover", 6, 4*time.Minute)

	budgetWatch.stop()
	if budgetWatch.max() > budget {
		t.Errorf("%d nodes were disrupting at once; the budget allows %d (%s)", budgetWatch.max(), budget, budgetWatch.worst())
	}
	t.Logf("%d CreateFleet calls, %s; most nodes disrupting at once %d (budget %d)",
		len(pc.ec2Calls.Calls("CreateFleet")), auditInstances(t, c, pc.clients), budgetWatch.max(), budget)
	// What the two replicas asked of AWS over the whole test, per minute.
	minutes := time.Since(start).Minutes()
	var rates []string
	for action, n := range pc.ec2Calls.CountsSince(0) {
		rates = append(rates, fmt.Sprintf("%s %.1f", action, float64(n)/minutes))
	}
	sort.Strings(rates)
	t.Logf("AWS calls per minute over %.1f minutes: %s", minutes, strings.Join(rates, ", "))
}

// leader waits for one of the replicas to lead and returns its index.
func leader(t *testing.T, procs []*testenv.ControllerProcess) int {
	t.Helper()
	found := -1
	eventually(t, takeoverBound+10*time.Second, "a replica leads", func() error {
		found = -1
		for i, p := range procs {
			if p.IsLeader() {
				if found >= 0 {
					return fmt.Errorf("replicas %d and %d both say they lead", found, i)
				}
				found = i
			}
		}
		if found < 0 {
			return fmt.Errorf("no replica leads yet")
		}
		return nil
	})
	return found
}

// failover kills the leader of two replicas with SIGKILL, checks that the other
// takes over within the lease time, and starts the killed one again as a follower.
func failover(t *testing.T, procs []*testenv.ControllerProcess, during string) {
	t.Helper()
	l := leader(t, procs)
	follower := procs[1-l]
	start := time.Now()
	procs[l].Kill()
	// The lease was renewed at most a retry period before the kill; the follower
	// tries every retry period (with jitter) once it has run out.
	eventually(t, takeoverBound+10*time.Second, "the follower takes over", func() error {
		if !follower.IsLeader() {
			return fmt.Errorf("not leading yet")
		}
		return nil
	})
	took := time.Since(start)
	t.Logf("killed the leader during %s; the follower led %s later", during, took.Round(10*time.Millisecond))
	if took > takeoverBound {
		t.Errorf("the follower took %s to lead after the leader was killed during %s; the lease (%s) and two jittered retry periods allow %s", took, during, leaseDuration, takeoverBound)
	}
	procs[l].Start()
}

// settle waits for exactly n Running pods of app and a settled cluster: nothing
// tainted, cordoned, deleting or drifted.
func settle(t *testing.T, c client.Client, app string, n int, timeout time.Duration) {
	t.Helper()
	eventually(t, timeout, fmt.Sprintf("%d pods of %s Running and the cluster settled", n, app), func() error {
		pods, err := podsOf(c, app)
		if err != nil {
			return err
		}
		running := 0
		for _, p := range pods {
			if p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning {
				running++
			}
		}
		if running != n || len(pods) != n {
			return fmt.Errorf("%d of %d pods Running (%d pods)", running, n, len(pods))
		}
		return settled(context.Background(), c)
	})
}

// interrupt sends a spot interruption warning for the instance through EventBridge,
// as EC2 does.
func interrupt(t *testing.T, events *eventbridge.Client, id string) {
	t.Helper()
	out, err := events.PutEvents(context.Background(), &eventbridge.PutEventsInput{Entries: []ebtypes.PutEventsRequestEntry{{
		Source: aws.String("aws.ec2"), DetailType: aws.String("EC2 Spot Instance Interruption Warning"),
		Resources: []string{"arn:aws:ec2:us-west-2:123456789012:instance/" + id},
		Detail:    aws.String(`{"instance-id":"` + id + `","instance-action":"terminate"}`),
	}}})
	must(t, err)
	if out.FailedEntryCount > 0 {
		t.Fatalf("PutEvents failed: %+v", out.Entries)
	}
}
