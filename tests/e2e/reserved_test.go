package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	awsv1 "github.com/dovetail-sh/dovetail/controller/apis/aws/v1"
	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/controller/metrics"
	"github.com/dovetail-sh/dovetail/tests/localstack"
	"github.com/dovetail-sh/dovetail/tests/testenv"
)

// A pool that allows reserved and on-demand capacity fills its class's capacity
// reservation first (the engine prices it as all but free) and launches on-demand
// once it is full: two of three nodes go into a reservation for two, labelled as
// Karpenter labels them, and every pod runs. moto has no reservations; an SDK
// middleware on the controller's clients emulates them, after the IAM recorder, so
// every call is checked against the shipped policy. Then TerminateFirstDrift: a
// drifted node of a pool that can only launch into its full reservation goes
// first, and its replacement takes the place it freed.
func TestReservedCapacityIsUsedFirst(t *testing.T) {
	const id, exclusive = "cr-0e2e0e2e0e2e0e2e0", "cr-0e2e0e2e0e2e0e2e1"
	var emu *testenv.CapacityReservations
	var nodeRole string
	cluster := prepareAWSCluster(t, func(env awsEnv) {
		checkIAM(t, &env.opts, env.clients, env.nodeRole, env.queueARN)
		emu = testenv.NewCapacityReservations(env.clients.EC2, ec2types.CapacityReservation{
			CapacityReservationId: aws.String(id), InstanceType: aws.String("m5.large"), AvailabilityZone: aws.String("us-west-2a"),
			AvailableInstanceCount: aws.Int32(2), TotalInstanceCount: aws.Int32(2), State: ec2types.CapacityReservationStateActive,
			OwnerId: aws.String(motoAccount), InstanceMatchCriteria: ec2types.InstanceMatchCriteriaTargeted,
			ReservationType: ec2types.CapacityReservationTypeDefault,
			Tags:            []ec2types.Tag{{Key: aws.String("purpose"), Value: aws.String("training")}},
		}, ec2types.CapacityReservation{
			CapacityReservationId: aws.String(exclusive), InstanceType: aws.String("m5.xlarge"), AvailabilityZone: aws.String("us-west-2b"),
			AvailableInstanceCount: aws.Int32(1), TotalInstanceCount: aws.Int32(1), State: ec2types.CapacityReservationStateActive,
			OwnerId: aws.String(motoAccount), InstanceMatchCriteria: ec2types.InstanceMatchCriteriaTargeted,
			ReservationType: ec2types.CapacityReservationTypeDefault,
			Tags:            []ec2types.Tag{{Key: aws.String("purpose"), Value: aws.String("training")}},
		})
		env.opts.AWSAPIOptions = append(env.opts.AWSAPIOptions, emu.APIOption)
		env.opts.FeatureGates.TerminateFirstDrift = true
		nodeRole = env.nodeRole
		env.stack.RunController(t, env.opts)
	})
	ctx := context.Background()
	c := cluster.client

	class := localstack.NodeClass("reserved")
	class.Spec.Role = nodeRole
	class.Spec.SubnetSelectorTerms[0].Tags["karpenter.sh/discovery"] = "e2e"
	class.Spec.SecurityGroupSelectorTerms[0].Tags["karpenter.sh/discovery"] = "e2e"
	class.Spec.CapacityReservationSelectorTerms = []awsv1.CapacityReservationSelectorTerm{{Tags: map[string]string{"purpose": "training"}}}
	must(t, c.Create(ctx, class))
	eventually(t, 30*time.Second, "the class lists its reservation and is Ready", func() error {
		must(t, c.Get(ctx, client.ObjectKeyFromObject(class), class))
		if len(class.Status.CapacityReservations) != 2 || class.Status.CapacityReservations[0].ID != id || !meta.IsStatusConditionTrue(class.Status.Conditions, awsv1.ConditionTypeReady) {
			return fmt.Errorf("reservations %+v, conditions %+v", class.Status.CapacityReservations, class.Status.Conditions)
		}
		return nil
	})
	pool := localstack.NodePool("training",
		localstack.Requirement(v1.LabelCapacityType, v1.OpIn, v1.CapacityTypeReserved, v1.CapacityTypeOnDemand),
		localstack.Requirement(v1.LabelInstanceType, v1.OpIn, "m5.large"))
	pool.Spec.Template.Spec.NodeClassRef.Name = "reserved"
	must(t, c.Create(ctx, pool))
	// One pod per m5.large: 1.5 of its 2 vCPUs.
	must(t, c.Create(ctx, localstack.Deployment("train", 3, "1500m", "2Gi")))
	pods := allRunning(t, c, "train", 3, 180*time.Second)
	verifyPlacement(t, c, pods, "training")

	byType := map[string]int{}
	for _, p := range pods {
		node := &corev1.Node{}
		must(t, c.Get(ctx, client.ObjectKey{Name: p.Spec.NodeName}, node))
		ct := node.Labels[v1.LabelCapacityType]
		byType[ct]++
		switch ct {
		case v1.CapacityTypeReserved:
			if node.Labels[v1.LabelCapacityReservationID] != id || node.Labels[v1.LabelCapacityReservationType] != "default" || node.Labels[v1.LabelTopologyZone] != "us-west-2a" {
				t.Errorf("reserved node %s labels %v", node.Name, node.Labels)
			}
		case v1.CapacityTypeOnDemand:
			if _, ok := node.Labels[v1.LabelCapacityReservationID]; ok {
				t.Errorf("on-demand node %s carries a reservation id: %v", node.Name, node.Labels)
			}
		default:
			t.Errorf("node %s has capacity type %q", node.Name, ct)
		}
	}
	if byType[v1.CapacityTypeReserved] != 2 || byType[v1.CapacityTypeOnDemand] != 1 {
		t.Errorf("pods by capacity type of their node: %v; want 2 reserved (the reservation's size) and 1 on-demand", byType)
	}
	if n := emu.Launched(id); n != 2 {
		t.Errorf("%d instances launched into the reservation; want 2", n)
	}
	claims := &v1.NodeClaimList{}
	must(t, c.List(ctx, claims, client.MatchingLabels{v1.LabelNodePool: "training"}))
	if len(claims.Items) != 3 {
		t.Errorf("%d NodeClaims for 3 pods that each fill a node", len(claims.Items))
	}

	t.Run("TerminateFirstDrift: a drifted node holding the only place its replacement can take goes first", func(t *testing.T) {
		pool := localstack.NodePool("exclusive",
			localstack.Requirement(v1.LabelCapacityType, v1.OpIn, v1.CapacityTypeReserved),
			localstack.Requirement(v1.LabelInstanceType, v1.OpIn, "m5.xlarge"))
		pool.Spec.Template.Spec.NodeClassRef.Name = "reserved"
		must(t, c.Create(ctx, pool))
		must(t, c.Create(ctx, localstack.Deployment("exclusive", 1, "3", "2Gi", func(s *corev1.PodSpec) {
			s.NodeSelector = map[string]string{v1.LabelNodePool: "exclusive"}
		})))
		first := allRunning(t, c, "exclusive", 1, 180*time.Second)[0]
		counted := testutil.ToFloat64(metrics.VoluntaryDisruptionTerminateFirstDecisions.WithLabelValues("exclusive", "drifted", "no-reserved-capacity"))

		// Both nodes running at once would be a replacement launched first, which the
		// full reservation cannot hold.
		live := sample(func() (int, error) {
			claims := &v1.NodeClaimList{}
			if err := c.List(ctx, claims, client.MatchingLabels{v1.LabelNodePool: "exclusive"}); err != nil {
				return 0, err
			}
			n := 0
			for _, nc := range claims.Items {
				if nc.DeletionTimestamp == nil {
					n++
				}
			}
			return n, nil
		})
		must(t, c.Get(ctx, client.ObjectKeyFromObject(pool), pool))
		patch := client.MergeFrom(pool.DeepCopy())
		pool.Spec.Template.Spec.Taints = []corev1.Taint{{Key: "exclusive", Effect: corev1.TaintEffectPreferNoSchedule}}
		must(t, c.Patch(ctx, pool, patch))

		var moved *corev1.Pod
		eventually(t, 180*time.Second, "the pod runs on a new node in the reservation", func() error {
			pods, err := podsOf(c, "exclusive")
			if err != nil {
				return err
			}
			for i := range pods {
				p := &pods[i]
				if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil && p.Spec.NodeName != "" && p.Spec.NodeName != first.Spec.NodeName {
					moved = p
					return nil
				}
			}
			return fmt.Errorf("the pod has not moved off %s", first.Spec.NodeName)
		})
		_, most := live.finish()
		if most > 1 {
			t.Errorf("%d claims of the pool were live at once: the replacement launched before the drifted node went", most)
		}
		node := &corev1.Node{}
		must(t, c.Get(ctx, client.ObjectKey{Name: moved.Spec.NodeName}, node))
		if node.Labels[v1.LabelCapacityReservationID] != exclusive || len(node.Spec.Taints) == 0 {
			t.Errorf("the replacement %s: labels %v, taints %v; want it in %s with the pool's new taint", node.Name, node.Labels, node.Spec.Taints, exclusive)
		}
		if n := emu.Launched(exclusive); n != 2 {
			t.Errorf("%d instances launched into the reservation for one; want 2, one after the other", n)
		}
		if got := testutil.ToFloat64(metrics.VoluntaryDisruptionTerminateFirstDecisions.WithLabelValues("exclusive", "drifted", "no-reserved-capacity")) - counted; got != 1 {
			t.Errorf("karpenter_voluntary_disruption_terminate_first_decisions_total{nodepool=exclusive,reason=drifted} rose by %v; want 1", got)
		}
	})
}
