package e2e

import (
	"context"
	"fmt"
	"math/rand"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	dtaws "github.com/dovetail-sh/dovetail/controller/cloudprovider/aws"
	"github.com/dovetail-sh/dovetail/controller/state"
	"github.com/dovetail-sh/dovetail/tests/localstack"
	"github.com/dovetail-sh/dovetail/tests/testenv"
)

// crashEvents is how many scale and drift events the controller is killed across.
const crashEvents = 30

// TestControllerSurvivesKills runs the controller as its own process on the AWS
// stack and kills it with SIGKILL at a random moment after each of 30 scale-ups,
// scale-downs and drifts (mid-launch, mid-consolidation, mid-drain), restarting it
// each time. Nothing the process held in memory may matter: at the end no instance
// is leaked, no claim was launched twice, no node is left tainted or cordoned,
// every pod runs, and the disruption budget held throughout. CRASH_SEED repeats a
// run.
func TestControllerSurvivesKills(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the whole local stack and moto_server")
	}
	seed := time.Now().UnixNano()
	if s := os.Getenv("CRASH_SEED"); s != "" {
		var err error
		if seed, err = strconv.ParseInt(s, 10, 64); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("CRASH_SEED=%d", seed)
	rng := rand.New(rand.NewSource(seed))
	ctx := context.Background()
	cluster, proc, ec2Calls := startAWSClusterProcess(t)
	c, clients := cluster.client, cluster.clients

	const budget = 2
	pool := localstack.NodePool("default",
		localstack.Requirement(v1.LabelCapacityType, v1.OpIn, v1.CapacityTypeOnDemand),
		localstack.Requirement(v1.LabelInstanceCategory, v1.OpIn, "c", "m", "r"),
		localstack.Requirement(v1.LabelInstanceSize, v1.OpIn, "large", "xlarge", "2xlarge"))
	pool.Spec.Disruption.ConsolidateAfter = v1.MustParseNillableDuration("2s")
	pool.Spec.Disruption.Budgets = []v1.Budget{{Nodes: strconv.Itoa(budget)}}
	must(t, c.Create(ctx, pool))
	must(t, c.Create(ctx, localstack.Deployment("crash", 6, "1", "1Gi")))

	// The budget counts nodes being disrupted: tainted for it, or deleting.
	budgetWatch := watchDisrupting(t, c)

	kills := 0
	for i := 0; i < crashEvents; i++ {
		var event string
		switch {
		case i%3 == 2:
			// A template taint change drifts every node of the pool; the label
			// change beside it alone would be applied in place.
			must(t, c.Get(ctx, client.ObjectKeyFromObject(pool), pool))
			patch := client.MergeFrom(pool.DeepCopy())
			if pool.Spec.Template.Labels == nil {
				pool.Spec.Template.Labels = map[string]string{}
			}
			pool.Spec.Template.Labels["crash-round"] = strconv.Itoa(i)
			pool.Spec.Template.Spec.Taints = []corev1.Taint{{Key: "crash-round", Value: strconv.Itoa(i), Effect: corev1.TaintEffectPreferNoSchedule}}
			must(t, c.Patch(ctx, pool, patch))
			event = "drift"
		default:
			n := int32(rng.Intn(24))
			scale(t, c, "crash", n)
			event = fmt.Sprintf("scale to %d", n)
		}
		wait := time.Duration(rng.Int63n(int64(6 * time.Second)))
		time.Sleep(wait)
		if proc.Exited() {
			t.Fatalf("the controller exited by itself before event %d", i)
		}
		proc.Kill()
		kills++
		t.Logf("event %d (%s): killed the controller after %s", i, event, wait.Round(10*time.Millisecond))
		proc.Start()
	}

	const final = 12
	scale(t, c, "crash", final)
	eventually(t, 8*time.Minute, "the cluster settles: every pod Running, nothing tainted, cordoned, deleting or drifted", func() error {
		pods, err := podsOf(c, "crash")
		if err != nil {
			return err
		}
		running := 0
		for _, p := range pods {
			if p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning {
				running++
			}
		}
		if running != final || len(pods) != final {
			return fmt.Errorf("%d of %d pods Running (%d pods)", running, final, len(pods))
		}
		return settled(ctx, c)
	})
	budgetWatch.stop()

	// Every running instance of the cluster is a claim's, and every claim's instance runs.
	out, err := clients.EC2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{Filters: []ec2types.Filter{
		{Name: aws.String("tag:" + dtaws.ClusterTag("e2e")), Values: []string{"owned"}}}})
	must(t, err)
	launchedPerClaim := map[string]int{}
	running := map[string]string{}
	instances := 0
	for _, r := range out.Reservations {
		for _, inst := range r.Instances {
			instances++
			claim := ""
			for _, tag := range inst.Tags {
				if aws.ToString(tag.Key) == dtaws.TagNodeClaim {
					claim = aws.ToString(tag.Value)
				}
			}
			launchedPerClaim[claim]++
			if inst.State.Name == ec2types.InstanceStateNameRunning || inst.State.Name == ec2types.InstanceStateNamePending {
				running[aws.ToString(inst.InstanceId)] = claim
			}
		}
	}
	var claims v1.NodeClaimList
	must(t, c.List(ctx, &claims))
	claimed := map[string]bool{}
	for _, nc := range claims.Items {
		id := nc.Status.ProviderID[strings.LastIndex(nc.Status.ProviderID, "/")+1:]
		claimed[id] = true
		if _, ok := running[id]; !ok {
			t.Errorf("nodeclaim %s's instance %q is not running", nc.Name, id)
		}
	}
	leaked := 0
	for id, claim := range running {
		if !claimed[id] {
			leaked++
			t.Errorf("instance %s (claim %q) runs with no NodeClaim: leaked", id, claim)
		}
	}
	doubles := 0
	for claim, n := range launchedPerClaim {
		if n > 1 {
			doubles++
			t.Errorf("claim %q was launched %d times", claim, n)
		}
	}
	fleets := ec2Calls.Calls("CreateFleet")
	t.Logf("%d kills across %d events; %d CreateFleet calls, %d instances launched for %d claims, %d running; leaked %d, launched twice %d; most nodes disrupting at once %d (budget %d)",
		kills, crashEvents, len(fleets), instances, len(launchedPerClaim), len(running), leaked, doubles, budgetWatch.max(), budget)
	if budgetWatch.max() > budget {
		t.Errorf("%d nodes were disrupting at once; the budget allows %d (%s)", budgetWatch.max(), budget, budgetWatch.worst())
	}
}

// settled is nil when no claim is deleting, drifted or not yet initialized, and no
// node is tainted for disruption or cordoned.
func settled(ctx context.Context, c client.Client) error {
	var claims v1.NodeClaimList
	if err := c.List(ctx, &claims); err != nil {
		return err
	}
	for _, nc := range claims.Items {
		switch {
		case nc.DeletionTimestamp != nil:
			return fmt.Errorf("nodeclaim %s is deleting", nc.Name)
		case meta.IsStatusConditionTrue(nc.Status.Conditions, v1.ConditionTypeDrifted):
			return fmt.Errorf("nodeclaim %s is drifted", nc.Name)
		case !meta.IsStatusConditionTrue(nc.Status.Conditions, v1.ConditionTypeInitialized):
			return fmt.Errorf("nodeclaim %s is not initialized", nc.Name)
		case nc.Annotations[state.DisruptionAnnotationKey] != "":
			return fmt.Errorf("nodeclaim %s still records a disruption", nc.Name)
		}
	}
	var nodes corev1.NodeList
	if err := c.List(ctx, &nodes); err != nil {
		return err
	}
	for _, n := range nodes.Items {
		if n.Labels[v1.LabelNodePool] == "" {
			continue
		}
		if state.HasTaint(&n, v1.DisruptedNoScheduleTaint) || n.Spec.Unschedulable {
			return fmt.Errorf("node %s is tainted or cordoned: %v unschedulable=%t", n.Name, n.Spec.Taints, n.Spec.Unschedulable)
		}
	}
	return nil
}

// disruptingWatch samples how many of the pool's nodes are being disrupted at once.
type disruptingWatch struct {
	mu       sync.Mutex
	highest  int
	worstSet string
	done     chan struct{}
	stopped  chan struct{}
}

func watchDisrupting(t *testing.T, c client.Client) *disruptingWatch {
	w := &disruptingWatch{done: make(chan struct{}), stopped: make(chan struct{})}
	go func() {
		defer close(w.stopped)
		for {
			select {
			case <-w.done:
				return
			case <-time.After(100 * time.Millisecond):
			}
			var claims v1.NodeClaimList
			var nodes corev1.NodeList
			if c.List(context.Background(), &claims) != nil || c.List(context.Background(), &nodes) != nil {
				continue
			}
			tainted := map[string]bool{}
			for i := range nodes.Items {
				if state.HasTaint(&nodes.Items[i], v1.DisruptedNoScheduleTaint) {
					tainted[nodes.Items[i].Spec.ProviderID] = true
				}
			}
			var disrupting []string
			for _, nc := range claims.Items {
				if nc.DeletionTimestamp != nil || (nc.Status.ProviderID != "" && tainted[nc.Status.ProviderID]) {
					disrupting = append(disrupting, nc.Name)
				}
			}
			w.mu.Lock()
			if len(disrupting) > w.highest {
				w.highest, w.worstSet = len(disrupting), strings.Join(disrupting, ", ")
			}
			w.mu.Unlock()
		}
	}()
	t.Cleanup(w.stop)
	return w
}

func (w *disruptingWatch) stop() {
	select {
	case <-w.done:
	default:
		close(w.done)
	}
	<-w.stopped
}

func (w *disruptingWatch) max() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.highest
}

func (w *disruptingWatch) worst() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.worstSet
}

// startAWSClusterProcess starts the AWS cluster with the controller as a process
// that can be killed and started again, and records the EC2 calls it makes (the
// process's own SDK cannot be hooked: a proxy in front of the emulator sees them).
func startAWSClusterProcess(t *testing.T) (*awsCluster, *testenv.ControllerProcess, *testenv.AWSRecorder) {
	t.Helper()
	var proc *testenv.ControllerProcess
	var ec2Calls *testenv.AWSRecorder
	cluster := prepareAWSCluster(t, func(env awsEnv) {
		ec2Calls = testenv.StartAWSRecorder(t, env.moto.Endpoint)
		checkIAMOnTheWire(t, &env.opts, env.clients, env.nodeRole, env.queueARN, ec2Calls.URL)
		proc = testenv.StartControllerProcess(t, env.stack.Config, env.stack.Kubeconfig, env.stack.Dir, env.opts)
	})
	return cluster, proc, ec2Calls
}
