// Command demo is `make demo`: the whole system on one machine. It starts a local
// control plane (etcd, kube-apiserver, kube-scheduler, kube-controller-manager, kwok)
// and moto_server for AWS, bootstraps Dovetail with `terraform apply` of
// examples/quickstart through the provider built from this tree, runs the controller
// as a local process against the emulated EC2 (a kubelet stand-in registers each
// instance it launches as a Node), then narrates a scale-up, a spot interruption, a
// scale-down to zero with consolidation and `terraform destroy`, and stops everything
// it started, on Ctrl-C too.
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	ebtypes "github.com/aws/aws-sdk-go-v2/service/eventbridge/types"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	awsv1 "github.com/dovetail-sh/dovetail/controller/apis/aws/v1"
	dovetailv1alpha1 "github.com/dovetail-sh/dovetail/controller/apis/dovetail/v1alpha1"
	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/controller/catalog"
	dtaws "github.com/dovetail-sh/dovetail/controller/cloudprovider/aws"
	"github.com/dovetail-sh/dovetail/controller/operator/settings"
	"github.com/dovetail-sh/dovetail/controller/simulate"
	"github.com/dovetail-sh/dovetail/tests/localstack"
)

const (
	cluster = "demo"
	region  = "us-west-2"
)

func main() {
	replicas := flag.Int("replicas", 40, "pods to scale the inflate Deployment to")
	bin := flag.String("bin", "bin", "directory with the control-plane binaries, dovetail-controller and terraform-provider-dovetail")
	keep := flag.Bool("keep", false, "keep the logs of every process and the terraform working directory")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	root, err := os.Getwd()
	if err != nil {
		fmt.Fprintf(os.Stderr, "demo: %v\n", err)
		os.Exit(1)
	}
	err = run(ctx, root, *bin, int32(*replicas), *keep)
	switch {
	case err != nil && ctx.Err() != nil:
		// What failed is only what the interrupt cut short; run has stopped everything.
		fmt.Fprintln(os.Stderr, "\ndemo: interrupted")
		os.Exit(130)
	case err != nil:
		fmt.Fprintf(os.Stderr, "\ndemo: %v\n", err)
		os.Exit(1)
	}
}

type step struct{ n, of int }

func (s *step) say(format string, args ...any) {
	s.n++
	fmt.Printf("\n[%d/%d] %s\n", s.n, s.of, fmt.Sprintf(format, args...))
}

func note(format string, args ...any) { fmt.Printf("      %s\n", fmt.Sprintf(format, args...)) }

// summary collects the figures of the final table.
type summary struct {
	resources             int
	predictedNodes, nodes int
	predictedPrice, price float64
	// effective is the nodes' $/h with the demo's Commitment applied.
	effective              float64
	planImpact             string
	firstClaim, allRunning time.Duration
	consolidationTook      time.Duration
	interruptedNode        string
	replacedIn             time.Duration
	destroyTook            time.Duration
	leftInstances, leftAWS int
	leftClaims, leftCRDs   int
}

// run is the demo; root is the repository (examples/ and modules/ are copied from it).
func run(ctx context.Context, root, binDir string, replicas int32, keep bool) error {
	binDir, _ = filepath.Abs(binDir)
	dir, err := os.MkdirTemp("", "dovetail-demo-")
	if err != nil {
		return err
	}
	defer func() {
		if keep {
			fmt.Printf("\nLogs and the terraform working directory are kept in %s\n", dir)
			return
		}
		os.RemoveAll(dir)
	}()
	fmt.Println("Dovetail demo: Terraform bootstraps Dovetail on a local cluster, and the controller")
	fmt.Println("provisions EC2 capacity from an emulator (moto). No cloud account, nothing leaves loopback.")
	s := &step{of: 11}
	var sum summary

	s.say("Starting etcd, kube-apiserver, kube-scheduler, kube-controller-manager, kwok and moto_server")
	start := time.Now()
	stack, err := localstack.Start(ctx, localstack.Options{BinDir: binDir, Dir: dir, WithoutCRDs: true})
	if err != nil {
		return err
	}
	defer func() {
		fmt.Println("\nStopping everything the demo started...")
		_ = stack.Stop()
	}()
	moto, err := localstack.StartMoto(ctx, dir)
	if err != nil {
		return err
	}
	defer moto.Stop()
	// moto has no EKS access-entry or Pod Identity API, which the quickstart's module
	// calls: they are served in front of it.
	eksAPI, err := localstack.StartEKSAccess(moto)
	if err != nil {
		return err
	}
	defer eksAPI.Stop()
	c := stack.Client
	// The managed node group the controller itself would run on: two nodes no NodePool owns.
	if err := localstack.AddSystemNodes(ctx, c, 2); err != nil {
		return err
	}
	note("up in %.1fs; kubeconfig: %s, AWS: %s (both valid while the demo runs)", time.Since(start).Seconds(), stack.Kubeconfig, moto.Endpoint)

	s.say("Creating what the cluster already has in AWS: a VPC with a subnet per zone, the node security group, the EKS cluster")
	for k, v := range map[string]string{"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_REGION": region,
		"AWS_CONFIG_FILE": os.DevNull, "AWS_SHARED_CREDENTIALS_FILE": os.DevNull} {
		os.Setenv(k, v)
	}
	endpoints := map[string]string{}
	for _, svc := range []string{"ec2", "ssm", "iam", "eks", "sqs"} {
		endpoints[svc] = moto.Endpoint
	}
	clients, err := dtaws.NewClients(ctx, dtaws.Settings{Region: region, Endpoints: endpoints})
	if err != nil {
		return err
	}
	seeded, err := localstack.SeedAWS(ctx, clients, "network", "10.80", "us-west-2a", "us-west-2b", "us-west-2c")
	if err != nil {
		return err
	}
	var subnets []string
	for _, id := range seeded.Subnets {
		subnets = append(subnets, id)
	}
	sort.Strings(subnets)
	if _, err := clients.EKS.CreateCluster(ctx, &eks.CreateClusterInput{Name: aws.String(cluster), RoleArn: aws.String("arn:aws:iam::123456789012:role/eks"),
		ResourcesVpcConfig: &ekstypes.VpcConfigRequest{SubnetIds: subnets}}); err != nil {
		return err
	}
	note("VPC %s, subnets %s, security group %s", seeded.VPC, strings.Join(subnets, " "), seeded.SecurityGroup)

	s.say("terraform apply of examples/quickstart (provider from bin/ through dev_overrides)")
	if err := localstack.CopyConfigurations(root, dir); err != nil {
		return err
	}
	tf, err := localstack.NewTerraform(filepath.Join(dir, "examples", "quickstart"), binDir, "AWS_ENDPOINT_URL="+moto.Endpoint, "AWS_ENDPOINT_URL_EKS="+eksAPI.URL)
	if err != nil {
		return err
	}
	// The provider in bin/ is built from source, so it has no released image: the
	// Deployment names the Dockerfile's build, and kwok runs it as it runs any pod.
	if err := tf.WriteVars(map[string]any{"cluster_name": cluster, "region": region, "kubeconfig_path": stack.Kubeconfig,
		"subnet_ids": subnets, "security_group_ids": []string{seeded.SecurityGroup}, "consolidate_after": "10s",
		"controller_image": localstack.ControllerImage}); err != nil {
		return err
	}
	applyStart := time.Now()
	if err := tf.Init(ctx); err != nil {
		return err
	}
	if err := tf.Apply(ctx); err != nil {
		return err
	}
	resources, err := tf.StateResources(ctx)
	if err != nil {
		return err
	}
	sum.resources = len(resources)
	note("applied %d resources in %.1fs:", len(resources), time.Since(applyStart).Seconds())
	for _, r := range resources {
		note("  %s", strings.TrimPrefix(r, "module.dovetail."))
	}
	if plan, err := tf.PlannedChanges(ctx); err != nil {
		return err
	} else if plan != "" {
		return fmt.Errorf("a plan right after apply should have no changes:\n%s", plan)
	}
	note("a second plan has no changes; the CRDs, RBAC and the controller Deployment are in the cluster")

	s.say("Running dovetail-controller as a local process (AWS cloud provider on moto) and a kubelet stand-in")
	healthPort, err := freePort()
	if err != nil {
		return err
	}
	var eps []string
	for svc, url := range endpoints {
		eps = append(eps, svc+"="+url)
	}
	sort.Strings(eps)
	controller, err := stack.Run(filepath.Join(binDir, "dovetail-controller"), "--kubeconfig="+stack.Kubeconfig, "--leader-elect=false",
		"--cloud-provider=aws", "--cluster-name="+cluster, "--aws-region="+region, "--aws-endpoints="+strings.Join(eps, ","),
		"--interruption-queue="+cluster+"-dovetail", "--isolated-vpc", "--ssm-parameter-prefix="+localstack.SSMPrefix,
		"--bind-address=127.0.0.1", "--metrics-port=0", fmt.Sprintf("--health-probe-port=%d", healthPort),
		"--disruption-period=2s", "--consolidation-validation-delay=3s", "--feature-gates=SpotToSpotConsolidation=true")
	if err != nil {
		return err
	}
	if err := waitReady(ctx, healthPort, controller); err != nil {
		return err
	}
	standInLog, err := os.Create(filepath.Join(dir, "kubelet-stand-in.log"))
	if err != nil {
		return err
	}
	defer standInLog.Close()
	standIn := localstack.StartKubeletStandIn(c, clients.EC2, cluster, func(format string, args ...any) {
		fmt.Fprintf(standInLog, format+"\n", args...)
	}, seeded.SecurityGroup)
	defer standIn.Stop()
	note("ready; logs: %s", controller.LogPath)

	pool := &v1.NodePool{}
	if err := c.Get(ctx, client.ObjectKey{Name: "default"}, pool); err != nil {
		return err
	}

	s.say("A Commitment: a Reserved Instance of c3.4xlarge in us-west-2a, which the engine plans first at $0")
	if err := c.Create(ctx, reservation); err != nil {
		return err
	}
	if err := waitFor(ctx, time.Minute, "the Commitment to be Ready", func() (bool, error) {
		cm := &dovetailv1alpha1.Commitment{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(reservation), cm); err != nil {
			return false, err
		}
		return meta.IsStatusConditionTrue(cm.Status.Conditions, "Ready"), nil
	}); err != nil {
		return err
	}
	note("Commitment %s is Ready: an on-demand c3.4xlarge in us-west-2a costs nothing more while the reservation lasts", reservation.Name)
	// Spread over the three zones, as a replicated service would be.
	inflate := localstack.Deployment("inflate", 0, "1", "1536Mi", func(ps *corev1.PodSpec) {
		ps.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: v1.LabelTopologyZone,
			WhenUnsatisfiable: corev1.DoNotSchedule, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "inflate"}}}}
	})
	if err := c.Create(ctx, inflate); err != nil {
		return err
	}
	s.say("Predicting with `dovetail simulate`: inflate × %d (1 cpu, 1.5Gi, spread over zones) on NodePool %q", replicas, pool.Name)
	offered, class, err := offeredTypes(ctx, c, clients, pool)
	if err != nil {
		return err
	}
	predicted, err := predict(pool, class, inflate, replicas, offered)
	if err != nil {
		return err
	}
	sum.predictedNodes = predicted.Summary.NodeClaims
	var planned []string
	for _, nc := range predicted.NodeClaims {
		sum.predictedPrice += priceOf(embedded, nc.InstanceType, nc.Zone, nc.CapacityType)
		planned = append(planned, fmt.Sprintf("%s %s in %s (%d pods)", nc.InstanceType, nc.CapacityType, nc.Zone, len(nc.Pods)))
	}
	note("plan: %d nodes, $%.4f/hour at list prices, solved in %.0fms, on the instance types and prices the controller sees:",
		predicted.Summary.NodeClaims, sum.predictedPrice, predicted.Summary.SolveSeconds*1000)
	for _, p := range planned {
		note("  %s", p)
	}

	s.say("Scaling inflate 0 → %d", replicas)
	scaledAt := time.Now()
	if err := scale(ctx, c, "inflate", replicas); err != nil {
		return err
	}
	if sum.firstClaim, sum.allRunning, err = watchPods(ctx, c, scaledAt, int(replicas)); err != nil {
		return err
	}
	if sum.nodes, sum.price, err = describeNodes(ctx, c, clients.EC2); err != nil {
		return err
	}
	note("(the emulator prices every spot offering at $0.00001, so spot types tie there and the tie goes by")
	note(" name, in the prediction and in the launch alike; the table shows AWS list prices.)")
	if sum.effective, err = effectivePrice(ctx, stack.Config); err != nil {
		return err
	}
	note("$%.4f/hour effective with Commitment %s applied ($%.4f/hour at list prices)", sum.effective, reservation.Name, sum.price)

	s.say("terraform plan of a NodePool change (expire_after 720h → 360h): what it would do to the fleet")
	if sum.planImpact, err = planImpact(ctx, tf); err != nil {
		return err
	}
	for _, line := range strings.Split(sum.planImpact, "\n") {
		note("%s", line)
	}

	s.say("A spot interruption warning sent through EventBridge (the rule Terraform made routes it to the queue)")
	if sum.interruptedNode, sum.replacedIn, err = interrupt(ctx, c, clients, moto.Endpoint, int(replicas)); err != nil {
		return err
	}

	// To 0 rather than part way: the emulator prices every spot type the same, so a
	// smaller replacement would never be cheaper there and only empty nodes could go.
	s.say("Scaling inflate %d → 0: consolidation terminates the empty nodes (consolidateAfter 10s)", replicas)
	if err := scale(ctx, c, "inflate", 0); err != nil {
		return err
	}
	consolidating := time.Now()
	if err := watchConsolidation(ctx, c); err != nil {
		return err
	}
	sum.consolidationTook = time.Since(consolidating)
	running, err := liveInstances(ctx, clients.EC2)
	if err != nil {
		return err
	}
	note("every node cordoned, drained and terminated %.1fs after the scale-down; %d instances running", sum.consolidationTook.Seconds(), running)

	s.say("terraform destroy: the NodePool, the node class, the controller and its CRDs, IAM, the queue and the tags go")
	if err := c.Delete(ctx, inflate); err != nil {
		return err
	}
	destroyStart := time.Now()
	if err := tf.Destroy(ctx); err != nil {
		return err
	}
	sum.destroyTook = time.Since(destroyStart)
	if err := leftovers(ctx, c, clients, &sum); err != nil {
		return err
	}
	note("destroyed in %.1fs: %d instances running, %d NodeClaims, %d Dovetail CRDs, %d IAM roles or queues left",
		sum.destroyTook.Seconds(), sum.leftInstances, sum.leftClaims, sum.leftCRDs, sum.leftAWS)

	fmt.Println("\nSummary")
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "  terraform apply\t%d resources, second plan empty\n", sum.resources)
	fmt.Fprintf(tw, "  pods scheduled\t%d\n", replicas)
	verdict := "agree (within a node and 5%)"
	if !sum.agrees() {
		verdict = "DISAGREE"
	}
	fmt.Fprintf(tw, "  nodes launched\t%d (predicted %d)\n", sum.nodes, sum.predictedNodes)
	fmt.Fprintf(tw, "  price of the nodes\t$%.4f/hour at list prices (predicted $%.4f/hour)\n", sum.price, sum.predictedPrice)
	fmt.Fprintf(tw, "  with the Commitment\t$%.4f/hour effective: the reserved c3.4xlarge costs nothing more\n", sum.effective)
	fmt.Fprintf(tw, "  plan of expire_after 720h → 360h\t%s\n", strings.SplitN(sum.planImpact, "\n", 2)[0])
	fmt.Fprintf(tw, "  prediction and outcome\t%s\n", verdict)
	fmt.Fprintf(tw, "  first NodeClaim after scale\t%.2fs\n", sum.firstClaim.Seconds())
	fmt.Fprintf(tw, "  every pod Running after scale\t%.2fs\n", sum.allRunning.Seconds())
	fmt.Fprintf(tw, "  spot interruption\t%s drained; its pods Running elsewhere after %.1fs\n", sum.interruptedNode, sum.replacedIn.Seconds())
	fmt.Fprintf(tw, "  scale to 0\tevery node consolidated away in %.1fs\n", sum.consolidationTook.Seconds())
	fmt.Fprintf(tw, "  terraform destroy\t%.1fs; left behind: %d instances, %d NodeClaims, %d CRDs, %d IAM roles/queues\n",
		sum.destroyTook.Seconds(), sum.leftInstances, sum.leftClaims, sum.leftCRDs, sum.leftAWS)
	if err := tw.Flush(); err != nil {
		return err
	}
	if sum.leftInstances+sum.leftClaims+sum.leftCRDs+sum.leftAWS > 0 {
		return fmt.Errorf("terraform destroy left something behind")
	}
	if !sum.agrees() {
		return fmt.Errorf("the controller launched %d nodes ($%.4f/hour) where dovetail simulate predicted %d ($%.4f/hour)", sum.nodes, sum.price, sum.predictedNodes, sum.predictedPrice)
	}
	return nil
}

// predict runs the engine on the objects the cluster will see, as `dovetail
// simulate --catalog` does with a catalog of the region.
func predict(pool *v1.NodePool, class *awsv1.EC2NodeClass, d *appsv1.Deployment, replicas int32, offered *catalog.File) (*simulate.Plan, error) {
	in := &simulate.Inputs{NodePools: []*v1.NodePool{pool}, NodeClasses: []*awsv1.EC2NodeClass{class}, Commitments: []*dovetailv1alpha1.Commitment{reservation}}
	for i := int32(0); i < replicas; i++ {
		p := &corev1.Pod{Spec: d.Spec.Template.Spec}
		p.Name, p.Namespace, p.Labels = fmt.Sprintf("%s-%d", d.Name, i), "default", d.Spec.Template.Labels
		in.Pods = append(in.Pods, p)
	}
	return simulate.Run(in, offered, settings.Default(), clock.RealClock{})
}

// reservation is the demo's Commitment.
var reservation = &dovetailv1alpha1.Commitment{ObjectMeta: metav1.ObjectMeta{Name: "ri-demo"}, Spec: dovetailv1alpha1.CommitmentSpec{
	ReservedInstances: []dovetailv1alpha1.ReservedInstance{{InstanceType: "c3.4xlarge", Zone: "us-west-2a", Count: 1}}}}

// effectivePrice is what the cluster's NodePool nodes cost per hour with the
// Commitment charged to them as AWS bills it, read from the live cluster as
// `dovetail explain` reads it, at the list prices the node table shows.
func effectivePrice(ctx context.Context, cfg *rest.Config) (float64, error) {
	in := &simulate.Inputs{}
	if err := simulate.ReadLive(ctx, cfg, in); err != nil {
		return 0, err
	}
	in.Pods = nil
	plan, err := simulate.Run(in, embedded.InZones([]string{"us-west-2a", "us-west-2b", "us-west-2c"}), settings.Default(), clock.RealClock{})
	if err != nil {
		return 0, err
	}
	total := 0.0
	for _, n := range plan.NodePrices {
		total += n.PricePerHour
	}
	return total, nil
}

// planImpact runs terraform plan with a changed expire_after and returns the
// impact the provider worked out from the live cluster.
func planImpact(ctx context.Context, tf *localstack.Terraform) (string, error) {
	out, err := tf.Run(ctx, "plan", "-no-color", "-var", "expire_after=360h")
	if err != nil {
		return "", err
	}
	const marker = "Warning: Planned impact of changing NodePool"
	i := strings.Index(out, marker)
	if i < 0 {
		return "", fmt.Errorf("the plan has no planned impact:\n%s", out)
	}
	// The warning's detail follows where it is in the configuration; it is the
	// impact's text, which starts with one of these.
	var lines []string
	started := false
	for _, line := range strings.Split(out[i:], "\n")[1:] {
		line = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(line), "│"))
		if strings.HasPrefix(line, "╵") {
			break
		}
		started = started || strings.HasPrefix(line, "Of ") || strings.HasPrefix(line, "No node") || strings.HasPrefix(line, "Not worked out")
		switch {
		case !started || line == "":
		case len(lines) > 0 && !strings.HasPrefix(line, "Drift:") && !strings.HasPrefix(line, "Pacing:") && !strings.HasPrefix(line, "Cost:") && !strings.HasPrefix(line, "Warning:"):
			// terraform wraps long lines of a warning.
			lines[len(lines)-1] += " " + line
		default:
			lines = append(lines, line)
		}
	}
	return strings.Join(lines, "\n"), nil
}

// offeredTypes are the pool's types as the controller is offered them: the emulated
// region's types and offerings, with its spot prices, so prediction and outcome are
// priced the same; and its class, which shapes them.
func offeredTypes(ctx context.Context, c client.Client, clients *dtaws.Clients, pool *v1.NodePool) (*catalog.File, *awsv1.EC2NodeClass, error) {
	var offered *catalog.File
	var class *awsv1.EC2NodeClass
	// The controller resolves the node class's subnets and image first.
	err := waitFor(ctx, time.Minute, "the EC2NodeClass to be resolved", func() (bool, error) {
		var err error
		offered, class, err = localstack.Offered(ctx, c, clients, cluster, region, pool)
		return err == nil, nil
	})
	return offered, class, err
}

// agrees reports whether the launched fleet is the predicted one: within a node,
// and within 5% of the predicted list price.
func (s *summary) agrees() bool {
	d := s.nodes - s.predictedNodes
	return d >= -1 && d <= 1 && s.price >= s.predictedPrice*0.95 && s.price <= s.predictedPrice*1.05
}

// cluster is what the narration reports on: inflate's pods, the NodeClaims and the
// Nodes Dovetail launched (not the system nodes).
type clusterView struct {
	running, pending int
	claims, deleting int
	nodes            []corev1.Node
	podsOnNode       map[string]int
	price            float64 // list price of the nodes per hour
}

// embedded is the catalog prices are read from.
var embedded = func() *catalog.File {
	cat, err := catalog.EmbeddedAWS()
	if err != nil {
		panic(err)
	}
	return cat
}()

func look(ctx context.Context, c client.Client) (*clusterView, error) {
	var pods corev1.PodList
	var claims v1.NodeClaimList
	var nodes corev1.NodeList
	if err := c.List(ctx, &pods, client.InNamespace("default"), client.MatchingLabels{"app": "inflate"}); err != nil {
		return nil, err
	}
	if err := c.List(ctx, &claims); err != nil {
		return nil, err
	}
	if err := c.List(ctx, &nodes, client.HasLabels{v1.LabelNodePool}); err != nil {
		return nil, err
	}
	v := &clusterView{claims: len(claims.Items), nodes: nodes.Items, podsOnNode: map[string]int{}}
	for _, n := range nodes.Items {
		v.price += priceOf(embedded, n.Labels[v1.LabelInstanceType], n.Labels[v1.LabelTopologyZone], n.Labels[v1.LabelCapacityType])
	}
	for _, p := range pods.Items {
		switch {
		case p.DeletionTimestamp != nil:
		case p.Status.Phase == corev1.PodRunning:
			v.running++
			v.podsOnNode[p.Spec.NodeName]++
		case p.Status.Phase == corev1.PodPending:
			v.pending++
		}
	}
	for _, claim := range claims.Items {
		if claim.DeletionTimestamp != nil {
			v.deleting++
		}
	}
	return v, nil
}

// progress prints a line when the picture changes.
type progress struct {
	since time.Time
	last  string
}

func (p *progress) show(v *clusterView) {
	line := fmt.Sprintf("pods: %3d running, %3d pending  nodeclaims: %d (%d deleting)  nodes: %d  $%.4f/hour", v.running, v.pending, v.claims, v.deleting, len(v.nodes), v.price)
	if line != p.last {
		note("t=%5.1fs  %s", time.Since(p.since).Seconds(), line)
		p.last = line
	}
}

// watchPods waits until want inflate pods run and returns when the first NodeClaim
// appeared and when the last pod started.
func watchPods(ctx context.Context, c client.Client, since time.Time, want int) (firstClaim, allRunning time.Duration, err error) {
	pr := &progress{since: since}
	err = waitFor(ctx, 4*time.Minute, "pods to run", func() (bool, error) {
		v, err := look(ctx, c)
		if err != nil {
			return false, err
		}
		pr.show(v)
		if firstClaim == 0 && v.claims > 0 {
			firstClaim = time.Since(since)
		}
		if v.running == want {
			allRunning = time.Since(since)
			return true, nil
		}
		return false, nil
	})
	return firstClaim, allRunning, err
}

// watchConsolidation waits until consolidation has removed every node of the pool.
func watchConsolidation(ctx context.Context, c client.Client) error {
	pr := &progress{since: time.Now()}
	return waitFor(ctx, 3*time.Minute, "consolidation to remove the empty nodes", func() (bool, error) {
		v, err := look(ctx, c)
		if err != nil {
			return false, err
		}
		pr.show(v)
		return v.running+v.pending == 0 && v.claims == 0 && len(v.nodes) == 0, nil
	})
}

// describeNodes prints Dovetail's nodes and returns their count and total price.
func describeNodes(ctx context.Context, c client.Client, api *ec2.Client) (int, float64, error) {
	v, err := look(ctx, c)
	if err != nil {
		return 0, 0, err
	}
	sort.Slice(v.nodes, func(i, j int) bool { return v.nodes[i].Name < v.nodes[j].Name })
	fmt.Println()
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "      NODE\tEC2 INSTANCE\tINSTANCE TYPE\tZONE\tCAPACITY\tARCH\t$/HOUR\tPODS")
	for _, n := range v.nodes {
		l := n.Labels
		price := priceOf(embedded, l[v1.LabelInstanceType], l[v1.LabelTopologyZone], l[v1.LabelCapacityType])
		fmt.Fprintf(tw, "      %s\t%s\t%s\t%s\t%s\t%s\t%.4f\t%d\n", n.Name, instanceID(n.Spec.ProviderID), l[v1.LabelInstanceType], l[v1.LabelTopologyZone],
			l[v1.LabelCapacityType], l[v1.LabelArch], price, v.podsOnNode[n.Name])
	}
	if err := tw.Flush(); err != nil {
		return 0, 0, err
	}
	running, err := liveInstances(ctx, api)
	if err != nil {
		return 0, 0, err
	}
	note("%d nodes, $%.4f/hour (list prices); %d EC2 instances running in the emulator", len(v.nodes), v.price, running)
	return len(v.nodes), v.price, nil
}

func instanceID(providerID string) string { return providerID[strings.LastIndex(providerID, "/")+1:] }

// liveInstances counts the cluster's instances that are not terminated.
func liveInstances(ctx context.Context, api *ec2.Client) (int, error) {
	out, err := api.DescribeInstances(ctx, &ec2.DescribeInstancesInput{Filters: []ec2types.Filter{
		{Name: aws.String("tag:" + dtaws.ClusterTag(cluster)), Values: []string{"owned"}},
		{Name: aws.String("instance-state-name"), Values: []string{"pending", "running", "stopping", "stopped"}}}})
	if err != nil {
		return 0, err
	}
	n := 0
	for _, r := range out.Reservations {
		n += len(r.Instances)
	}
	return n, nil
}

// interrupt sends EC2's two-minute spot warning for a busy node's instance through
// EventBridge and waits until the node is drained and gone and its pods run elsewhere.
func interrupt(ctx context.Context, c client.Client, clients *dtaws.Clients, endpoint string, want int) (string, time.Duration, error) {
	v, err := look(ctx, c)
	if err != nil {
		return "", 0, err
	}
	var victim *corev1.Node
	for i := range v.nodes {
		if v.podsOnNode[v.nodes[i].Name] > 0 && v.nodes[i].Labels[v1.LabelCapacityType] == v1.CapacityTypeSpot {
			victim = &v.nodes[i]
			break
		}
	}
	if victim == nil {
		return "", 0, fmt.Errorf("no spot node runs inflate pods")
	}
	id := instanceID(victim.Spec.ProviderID)
	note("interrupting %s (%s, %s, %d pods)", victim.Name, id, victim.Labels[v1.LabelCapacityType], v.podsOnNode[victim.Name])
	events := eventbridge.New(eventbridge.Options{Region: region, BaseEndpoint: aws.String(endpoint),
		Credentials: credentials.NewStaticCredentialsProvider("testing", "testing", "")})
	sent := time.Now()
	out, err := events.PutEvents(ctx, &eventbridge.PutEventsInput{Entries: []ebtypes.PutEventsRequestEntry{{
		Source: aws.String("aws.ec2"), DetailType: aws.String("EC2 Spot Instance Interruption Warning"),
		Resources: []string{fmt.Sprintf("arn:aws:ec2:%s:123456789012:instance/%s", region, id)},
		Detail:    aws.String(`{"instance-id":"` + id + `","instance-action":"terminate"}`),
	}}})
	if err != nil {
		return "", 0, err
	}
	if out.FailedEntryCount > 0 {
		return "", 0, fmt.Errorf("EventBridge refused the event: %+v", out.Entries)
	}
	pr := &progress{since: sent}
	err = waitFor(ctx, 3*time.Minute, "the interrupted node to drain and its pods to run elsewhere", func() (bool, error) {
		v, err := look(ctx, c)
		if err != nil {
			return false, err
		}
		pr.show(v)
		for _, n := range v.nodes {
			if n.Name == victim.Name {
				return false, nil
			}
		}
		return v.running == want, nil
	})
	if err != nil {
		return "", 0, err
	}
	took := time.Since(sent)
	state, err := clients.EC2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{id}})
	if err != nil {
		return "", 0, err
	}
	note("%s cordoned, drained and its instance %s; every pod Running again %.1fs after the warning",
		victim.Name, state.Reservations[0].Instances[0].State.Name, took.Seconds())
	_, _, err = describeNodes(ctx, c, clients.EC2)
	return victim.Name, took, err
}

// leftovers counts what a destroy should have removed.
func leftovers(ctx context.Context, c client.Client, clients *dtaws.Clients, sum *summary) error {
	var err error
	if sum.leftInstances, err = liveInstances(ctx, clients.EC2); err != nil {
		return err
	}
	var claims v1.NodeClaimList
	if err := c.List(ctx, &claims); err == nil {
		sum.leftClaims = len(claims.Items)
	}
	var crds apiextensionsv1.CustomResourceDefinitionList
	if err := c.List(ctx, &crds); err != nil {
		return err
	}
	for _, crd := range crds.Items {
		if crd.Spec.Group == "karpenter.sh" || crd.Spec.Group == "karpenter.k8s.aws" {
			sum.leftCRDs++
		}
	}
	for _, role := range []string{"DovetailNode-" + cluster, "DovetailController-" + cluster} {
		if _, err := clients.IAM.GetRole(ctx, &iam.GetRoleInput{RoleName: aws.String(role)}); err == nil {
			sum.leftAWS++
		}
	}
	if _, err := clients.SQS.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(cluster + "-dovetail")}); err == nil {
		sum.leftAWS++
	}
	return nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func waitReady(ctx context.Context, port int, p *localstack.Process) error {
	url := fmt.Sprintf("http://127.0.0.1:%d/readyz", port)
	return waitFor(ctx, time.Minute, "the controller to be ready", func() (bool, error) {
		select {
		case <-p.Exited():
			return false, fmt.Errorf("dovetail-controller exited:\n%s", p.Tail(2000))
		default:
		}
		resp, err := http.Get(url)
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
}

func scale(ctx context.Context, c client.Client, name string, replicas int32) error {
	d := &appsv1.Deployment{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "default", Name: name}, d); err != nil {
		return err
	}
	patch := client.MergeFrom(d.DeepCopy())
	d.Spec.Replicas = &replicas
	return c.Patch(ctx, d, patch)
}

// priceOf is the list price of an offering; the embedded catalog's zones are
// us-east-1's, so the zone is matched only when the catalog has it.
func priceOf(cat *catalog.File, name, zone, capacityType string) float64 {
	e, ok := cat.Find(name)
	if !ok {
		return 0
	}
	price := 0.0
	for _, o := range e.Offerings {
		if o.CapacityType != capacityType {
			continue
		}
		if o.Zone == zone {
			return o.Price
		}
		price = o.Price
	}
	return price
}

func waitFor(ctx context.Context, timeout time.Duration, what string, done func() (bool, error)) error {
	deadline := time.Now().Add(timeout)
	for {
		ok, err := done()
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("timed out after %s waiting for %s", timeout, what)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("interrupted while waiting for %s", what)
		case <-time.After(100 * time.Millisecond):
		}
	}
}
