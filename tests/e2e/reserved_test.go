package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	awsv1 "github.com/dovetail-sh/dovetail/controller/apis/aws/v1"
	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/tests/localstack"
	"github.com/dovetail-sh/dovetail/tests/testenv"
)

// A pool that allows reserved and on-demand capacity fills its class's capacity
// reservation first (the engine prices it as all but free) and launches on-demand
// once it is full: two of three nodes go into a reservation for two, labelled as
// Karpenter labels them, and every pod runs. moto has no reservations; an SDK
// middleware on the controller's clients emulates them, after the IAM recorder, so
// every call is checked against the shipped policy.
func TestReservedCapacityIsUsedFirst(t *testing.T) {
	const id = "cr-0e2e0e2e0e2e0e2e0"
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
		})
		env.opts.AWSAPIOptions = append(env.opts.AWSAPIOptions, emu.APIOption)
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
		if len(class.Status.CapacityReservations) != 1 || class.Status.CapacityReservations[0].ID != id || !meta.IsStatusConditionTrue(class.Status.Conditions, awsv1.ConditionTypeReady) {
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
}
