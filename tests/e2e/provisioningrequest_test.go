package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	autoscalingv1 "github.com/dovetail-sh/dovetail/controller/apis/autoscaling/v1"
	dovetailv1alpha1 "github.com/dovetail-sh/dovetail/controller/apis/dovetail/v1alpha1"
	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/controller/provreq"
	"github.com/dovetail-sh/dovetail/tests/localstack"
	"github.com/dovetail-sh/dovetail/tests/testenv"
)

// TestProvisioningRequest serves Kueue's ProvisioningRequest admission check on
// EC2 (moto), with the objects Kueue v0.17 creates for a Job of 4 pods admitted
// through a ClusterQueue with the check: PodTemplates ppt-WORKLOAD-PODSET, the
// request WORKLOAD-CHECK-ATTEMPT, and pods that name it in Kueue's annotations.
// The controller runs as the ServiceAccount with the ClusterRole the chart ships.
func TestProvisioningRequest(t *testing.T) {
	ctx := context.Background()
	// scarceFrom, when positive, is the number of the first CreateFleet call EC2
	// refuses for want of capacity (every offering); calls counts them.
	var scarceFrom, calls atomic.Int64
	cluster := prepareAWSCluster(t, func(env awsEnv) {
		checkIAM(t, &env.opts, env.clients, env.nodeRole, env.queueARN)
		// Offerings EC2 refused are tried again after seconds rather than minutes,
		// so that capacity can return within the test.
		env.opts.UnavailableOfferingsTTL = 5 * time.Second
		env.opts.AWSAPIOptions = append(env.opts.AWSAPIOptions, testenv.RefuseCapacityPerCall(func() func(string, string) bool {
			n := calls.Add(1)
			from := scarceFrom.Load()
			refused := from > 0 && n >= from
			return func(string, string) bool { return refused }
		}))
		env.stack.RunController(t, env.opts)
	})
	c, clients := cluster.client, cluster.clients
	// A pool of 4-vCPU types that consolidates empty nodes at once: a gang's
	// nodes stay only because they are booked.
	pool := localstack.NodePool("gang",
		localstack.Requirement(v1.LabelCapacityType, v1.OpIn, v1.CapacityTypeOnDemand),
		localstack.Requirement(v1.LabelInstanceType, v1.OpIn, "m5.xlarge", "m5a.xlarge", "m6i.xlarge", "m6a.xlarge"))
	pool.Spec.Disruption.ConsolidateAfter = v1.MustParseNillableDuration("0s")
	pool.Spec.Disruption.Budgets = []v1.Budget{{Nodes: "100%"}}
	must(t, c.Create(ctx, pool))
	must(t, c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ml"}}))
	kueueObjects(t, c, "train", "3")

	t.Run("BestEffortAtomicScaleUp: 4 nodes or none, and a retry when capacity returns", func(t *testing.T) {
		began := time.Now()
		step := func(what string) { t.Logf("%5.1fs %s", time.Since(began).Seconds(), what) }
		// EC2 launches three and refuses the fourth.
		scarceFrom.Store(calls.Load() + 4)
		pr := provisioningRequest("train-provision-1", "train", autoscalingv1.ProvisioningClassBestEffortAtomicScaleUp, 4, nil)
		must(t, c.Create(ctx, pr))
		waitCondition(t, c, pr, autoscalingv1.ConditionProvisioned, metav1.ConditionFalse, provreq.ReasonCapacityIsNotFound, 2*time.Minute)
		step("refused")
		eventually(t, time.Minute, "an event on the request saying a node of the 4 could not be launched", func() error {
			var events corev1.EventList
			must(t, c.List(ctx, &events, client.InNamespace("ml")))
			for _, e := range events.Items {
				if e.InvolvedObject.Name == pr.Name && e.Reason == provreq.ReasonCapacityIsNotFound && strings.Contains(e.Message, "of 4 node(s) could not be launched") && strings.Contains(e.Message, "all 4 were released") {
					return nil
				}
			}
			return fmt.Errorf("none among %d events", len(events.Items))
		})
		if calls.Load() < scarceFrom.Load() {
			t.Fatalf("%d CreateFleet calls; the fourth launch was never tried", calls.Load())
		}
		step("event seen")
		// Nothing of the gang keeps billing: its claims go and EC2 runs no instance.
		eventually(t, 2*time.Minute, "the gang's claims deleted and their instances terminated", func() error {
			if n := len(gangClaims(t, c, pr)); n != 0 {
				return fmt.Errorf("%d claims of the gang left", n)
			}
			if ids := runningInstances(t, clients.EC2); len(ids) != 0 {
				return fmt.Errorf("instances still running: %v", ids)
			}
			return nil
		})
		if c := condition(t, c, pr, autoscalingv1.ConditionProvisioned); c.Status != metav1.ConditionFalse {
			t.Fatalf("Provisioned is %+v with capacity still refused", c)
		}

		step("rolled back")
		// Capacity returns: the retry (after the backoff) launches all 4.
		scarceFrom.Store(0)
		waitCondition(t, c, pr, autoscalingv1.ConditionProvisioned, metav1.ConditionTrue, provreq.ReasonCapacityIsProvisioned, 2*time.Minute)
		step("provisioned")
		claims := gangClaims(t, c, pr)
		if len(claims) != 4 {
			t.Fatalf("%d claims launched for the gang; want 4", len(claims))
		}
		if ids := runningInstances(t, clients.EC2); len(ids) != 4 {
			t.Fatalf("%d instances running; want the gang's 4: %v", len(ids), ids)
		}
		step("instances counted")
		// Booked, the empty nodes are not consolidated away before the pods come.
		eventually(t, 2*time.Minute, "consolidation blocked on the gang's nodes by the booking", func() error {
			var events corev1.EventList
			must(t, c.List(ctx, &events))
			for _, e := range events.Items {
				if e.Reason == "DisruptionBlocked" && e.InvolvedObject.Kind == "Node" && strings.Contains(e.Message, "ProvisioningRequest ml/train-provision-1") {
					return nil
				}
			}
			return fmt.Errorf("no DisruptionBlocked event naming the request")
		})

		step("blocked")
		// Kueue admits the Job: its 4 pods run on the gang's nodes, and nothing
		// else is launched for them.
		kueuePods(t, c, "train", pr, 4, "3")
		eventually(t, 2*time.Minute, "the Job's 4 pods running on the gang's nodes", func() error {
			nodes := map[string]bool{}
			for _, nc := range gangClaims(t, c, pr) {
				nodes[nc.Status.NodeName] = true
			}
			var pods corev1.PodList
			must(t, c.List(ctx, &pods, client.InNamespace("ml"), client.MatchingLabels{"job-name": "train"}))
			running := 0
			for _, p := range pods.Items {
				if p.Status.Phase == corev1.PodRunning {
					if !nodes[p.Spec.NodeName] {
						return fmt.Errorf("pod %s runs on %s, not a node of the gang", p.Name, p.Spec.NodeName)
					}
					running++
				}
			}
			if running != 4 {
				return fmt.Errorf("%d of 4 running", running)
			}
			return nil
		})
		step("pods running")
		waitCondition(t, c, pr, autoscalingv1.ConditionBookingExpired, metav1.ConditionTrue, provreq.ReasonCapacityBookingConsumed, time.Minute)
		var all v1.NodeClaimList
		must(t, c.List(ctx, &all))
		if len(all.Items) != 4 {
			t.Errorf("%d nodeclaims; want the gang's 4 only", len(all.Items))
		}
	})

	t.Run("CheckCapacity: capacity there is, found and booked, launching nothing", func(t *testing.T) {
		kueueObjects(t, c, "eval", "500m")
		kueueObjects(t, c, "sweep", "3")
		fits := provisioningRequest("eval-check-1", "eval", autoscalingv1.ProvisioningClassCheckCapacity, 1, nil)
		must(t, c.Create(ctx, fits))
		waitCondition(t, c, fits, autoscalingv1.ConditionProvisioned, metav1.ConditionTrue, provreq.ReasonCapacityIsFound, time.Minute)
		later := provisioningRequest("sweep-check-1", "sweep", autoscalingv1.ProvisioningClassCheckCapacity, 4, nil)
		must(t, c.Create(ctx, later))
		waitCondition(t, c, later, autoscalingv1.ConditionProvisioned, metav1.ConditionFalse, provreq.ReasonCapacityIsNotFound, time.Minute)
		once := provisioningRequest("sweep-check-2", "sweep", autoscalingv1.ProvisioningClassCheckCapacity, 4, map[string]autoscalingv1.Parameter{provreq.NoRetryParameter: "true"})
		must(t, c.Create(ctx, once))
		waitCondition(t, c, once, autoscalingv1.ConditionFailed, metav1.ConditionTrue, provreq.ReasonCapacityIsNotFound, time.Minute)
		// The request is checked again after its backoff, still finds nothing, and
		// nothing is launched.
		eventually(t, time.Minute, "sweep-check-1 checked again", func() error {
			var events corev1.EventList
			must(t, c.List(ctx, &events, client.InNamespace("ml")))
			for _, e := range events.Items {
				if e.InvolvedObject.Name == later.Name && e.Reason == provreq.ReasonCapacityIsNotFound && e.Count >= 2 {
					return nil
				}
			}
			return fmt.Errorf("not yet")
		})
		if cond := condition(t, c, later, autoscalingv1.ConditionProvisioned); cond.Status != metav1.ConditionFalse {
			t.Errorf("sweep-check-1 Provisioned %+v after its retry; want False", cond)
		}
		var all v1.NodeClaimList
		must(t, c.List(ctx, &all))
		if len(all.Items) != 4 {
			t.Errorf("%d nodeclaims after the checks; want the 4 there were", len(all.Items))
		}
		if ids := runningInstances(t, clients.EC2); len(ids) != 4 {
			t.Errorf("%d instances running after the checks; want 4", len(ids))
		}
	})
}

// kueueObjects creates the PodTemplate Kueue makes for a workload's pod set: its
// pods ask cpu each.
func kueueObjects(t *testing.T, c client.Client, workload, cpu string) {
	t.Helper()
	zero := int64(0)
	must(t, c.Create(context.Background(), &corev1.PodTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: "ppt-" + workload + "-main", Namespace: "ml", Labels: map[string]string{"kueue.x-k8s.io/managed": "true"}},
		Template:   corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"job-name": workload}}, Spec: gangPodSpec(cpu, &zero)},
	}))
}

func gangPodSpec(cpu string, grace *int64) corev1.PodSpec {
	return corev1.PodSpec{TerminationGracePeriodSeconds: grace, RestartPolicy: corev1.RestartPolicyNever,
		Containers: []corev1.Container{{Name: "worker", Image: "registry.k8s.io/pause:3.10", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse("1Gi")}}}}}
}

func provisioningRequest(name, workload, class string, count int32, params map[string]autoscalingv1.Parameter) *autoscalingv1.ProvisioningRequest {
	return &autoscalingv1.ProvisioningRequest{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ml"},
		Spec: autoscalingv1.ProvisioningRequestSpec{ProvisioningClassName: class, Parameters: params,
			PodSets: []autoscalingv1.PodSet{{PodTemplateRef: autoscalingv1.Reference{Name: "ppt-" + workload + "-main"}, Count: count}}},
	}
}

// kueuePods are the Job's pods once Kueue admitted it: they name the request.
func kueuePods(t *testing.T, c client.Client, workload string, pr *autoscalingv1.ProvisioningRequest, n int, cpu string) {
	t.Helper()
	zero := int64(0)
	for i := range n {
		must(t, c.Create(context.Background(), &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", workload, i), Namespace: "ml", Labels: map[string]string{"job-name": workload},
				Annotations: map[string]string{autoscalingv1.ConsumeAnnotationKey: pr.Name, autoscalingv1.ClassAnnotationKey: pr.Spec.ProvisioningClassName}},
			Spec: gangPodSpec(cpu, &zero),
		}))
	}
}

func condition(t *testing.T, c client.Client, pr *autoscalingv1.ProvisioningRequest, kind string) metav1.Condition {
	t.Helper()
	got := &autoscalingv1.ProvisioningRequest{}
	must(t, c.Get(context.Background(), client.ObjectKeyFromObject(pr), got))
	if cond := meta.FindStatusCondition(got.Status.Conditions, kind); cond != nil {
		return *cond
	}
	return metav1.Condition{}
}

func waitCondition(t *testing.T, c client.Client, pr *autoscalingv1.ProvisioningRequest, kind string, status metav1.ConditionStatus, reason string, timeout time.Duration) metav1.Condition {
	t.Helper()
	var got metav1.Condition
	eventually(t, timeout, fmt.Sprintf("%s: %s=%s (%s)", pr.Name, kind, status, reason), func() error {
		got = condition(t, c, pr, kind)
		if got.Status != status || got.Reason != reason {
			return fmt.Errorf("%s is %s (%s): %s", kind, got.Status, got.Reason, got.Message)
		}
		return nil
	})
	return got
}

// gangClaims are the claims launched for the request, deleting or not.
func gangClaims(t *testing.T, c client.Client, pr *autoscalingv1.ProvisioningRequest) []v1.NodeClaim {
	t.Helper()
	got := &autoscalingv1.ProvisioningRequest{}
	must(t, c.Get(context.Background(), client.ObjectKeyFromObject(pr), got))
	var list v1.NodeClaimList
	must(t, c.List(context.Background(), &list, client.MatchingLabels{dovetailv1alpha1.ProvisioningRequestLabelKey: string(got.UID)}))
	return list.Items
}

// runningInstances are the IDs of the instances EC2 has pending or running.
func runningInstances(t *testing.T, ec2Client *ec2.Client) []string {
	t.Helper()
	out, err := ec2Client.DescribeInstances(context.Background(), &ec2.DescribeInstancesInput{Filters: []ec2types.Filter{
		{Name: aws.String("instance-state-name"), Values: []string{"pending", "running"}}}})
	must(t, err)
	var ids []string
	for _, r := range out.Reservations {
		for _, i := range r.Instances {
			ids = append(ids, aws.ToString(i.InstanceId))
		}
	}
	return ids
}
