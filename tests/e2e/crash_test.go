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

// crashEvents is how many scale and drift events the controller is killed across
// (CRASH_EVENTS changes it, for diagnosis).
var crashEvents = envInt("CRASH_EVENTS", 20)

// TestControllerSurvivesKills runs the controller as its own process on the AWS
// stack, with leader election, the IAM check on every AWS call and spot
// interruptions arriving, and kills it with SIGKILL after each of 20 scale-ups,
// scale-downs and drifts, restarting it each time. Three kills in four are aimed:
// proxies in front of EC2 and the API server kill it the moment a CreateFleet has
// launched and before the controller hears the instance's ID, the moment a node is
// tainted for disruption and before the disruption is recorded, or the moment a
// pod of a draining node is evicted; the state left behind proves the kill landed
// in that window, and each window must be hit at least once. The fourth kill comes
// at a random moment. Nothing the process held in memory may matter: at the end no
// instance is leaked, no claim was launched twice, no node is left tainted or
// cordoned, every pod runs, and the disruption budget held throughout. CRASH_SEED
// repeats a run's choices.
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
	// A short lease: each restart is a new identity that waits out the last one's.
	pc := startAWSClusterProcesses(t, processClusterOptions{replicas: 1, leaderElect: true, throughKubeProxy: true,
		lease: 6 * time.Second, renewDeadline: 4 * time.Second, retry: time.Second})
	c, clients, proc, ec2Calls := pc.client, pc.clients, pc.procs[0], pc.ec2Calls
	windows := watchCrashWindows(t, pc)

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

	kills, aimed := 0, 0
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
		if i%5 == 4 {
			if id := randomInstance(t, c, rng); id != "" {
				interrupt(t, pc.events, id)
				event += ", spot interruption of " + id
			}
		}
		if i%4 == 3 {
			wait := time.Duration(rng.Int63n(int64(6 * time.Second)))
			time.Sleep(wait)
			if proc.Exited() {
				t.Fatalf("the controller exited by itself before event %d", i)
			}
			proc.Kill()
			t.Logf("event %d (%s): killed the controller after %s", i, event, wait.Round(10*time.Millisecond))
		} else {
			window := crashWindowKinds[aimed%len(crashWindowKinds)]
			aimed++
			t.Logf("event %d (%s): %s", i, event, windows.killIn(window, 90*time.Second))
		}
		kills++
		proc.Start()
	}

	const final = 12
	scale(t, c, "crash", final)
	settle(t, c, "crash", final, 8*time.Minute)
	budgetWatch.stop()

	audit := auditInstances(t, c, clients)
	fleets := ec2Calls.Calls("CreateFleet")
	t.Logf("%d kills across %d events, %s; %d CreateFleet calls, %s; most nodes disrupting at once %d (budget %d)",
		kills, crashEvents, windows, len(fleets), audit, budgetWatch.max(), budget)
	for _, kind := range crashWindowKinds {
		if windows.landed[kind] == 0 {
			t.Errorf("no kill landed %s", kind)
		}
	}
	if budgetWatch.max() > budget {
		t.Errorf("%d nodes were disrupting at once; the budget allows %d (%s)", budgetWatch.max(), budget, budgetWatch.worst())
	}
}

// instanceAudit counts what EC2 holds for the cluster against its NodeClaims.
type instanceAudit struct {
	instances, claims, running, leaked, doubles int
}

func (a instanceAudit) String() string {
	return fmt.Sprintf("%d instances launched for %d claims, %d running; leaked %d, launched twice %d", a.instances, a.claims, a.running, a.leaked, a.doubles)
}

// auditInstances fails the test on any running instance of the cluster that no
// NodeClaim owns (leaked), any claim whose instance is not running, and any claim
// launched more than once.
func auditInstances(t *testing.T, c client.Client, clients *dtaws.Clients) instanceAudit {
	t.Helper()
	ctx := context.Background()
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
	return instanceAudit{instances: instances, claims: len(launchedPerClaim), running: len(running), leaked: leaked, doubles: doubles}
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

// disruptingWatch samples how many of the pool's nodes are being disrupted at once
// voluntarily (interrupted ones are not budgeted).
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
				// Budgets pace voluntary disruption; an interrupted node goes
				// whatever they allow, as in Karpenter.
				if c := meta.FindStatusCondition(nc.Status.Conditions, v1.ConditionTypeDisruptionReason); c != nil && c.Reason == "Interrupted" {
					continue
				}
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
	pc := startAWSClusterProcesses(t, processClusterOptions{replicas: 1})
	return pc.awsCluster, pc.procs[0], pc.ec2Calls
}

type processClusterOptions struct {
	replicas int
	// leaderElect runs the replicas with leader election, on the lease timing given
	// (zero: the controller's defaults).
	leaderElect                 bool
	lease, renewDeadline, retry time.Duration
	// throughKubeProxy puts a proxy between the controllers and the API server, for
	// a test to act between a write being applied and the controller hearing of it.
	throughKubeProxy bool
}

// processCluster is the AWS cluster with its controllers running as processes.
type processCluster struct {
	*awsCluster
	procs    []*testenv.ControllerProcess
	ec2Calls *testenv.AWSRecorder
	kube     *testenv.KubeProxy
}

func startAWSClusterProcesses(t *testing.T, o processClusterOptions) *processCluster {
	t.Helper()
	pc := &processCluster{}
	pc.awsCluster = prepareAWSCluster(t, func(env awsEnv) {
		pc.ec2Calls = testenv.StartAWSRecorder(t, env.moto.Endpoint)
		checkIAMOnTheWire(t, &env.opts, env.clients, env.nodeRole, env.queueARN, pc.ec2Calls.URL)
		env.opts.LeaderElect, env.opts.LeaderElectionNamespace = o.leaderElect, testenv.InstallNamespace
		env.opts.LeaderElectionLeaseDuration, env.opts.LeaderElectionRenewDeadline, env.opts.LeaderElectionRetryPeriod = o.lease, o.renewDeadline, o.retry
		if o.throughKubeProxy {
			pc.kube = testenv.StartKubeProxy(t, env.stack.Config)
		}
		for i := 0; i < o.replicas; i++ {
			if pc.kube != nil {
				pc.procs = append(pc.procs, testenv.StartControllerProcessVia(t, env.stack.Config, pc.kube, env.stack.Dir, env.opts))
			} else {
				pc.procs = append(pc.procs, testenv.StartControllerProcess(t, env.stack.Config, env.stack.Kubeconfig, env.stack.Dir, env.opts))
			}
		}
	})
	return pc
}

// envInt is the environment variable's integer value, or def.
func envInt(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil {
		return n
	}
	return def
}
