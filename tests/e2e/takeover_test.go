package e2e

import (
	"context"
	"encoding/base64"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	awsv1 "github.com/dovetail-sh/dovetail/controller/apis/aws/v1"
	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	dtaws "github.com/dovetail-sh/dovetail/controller/cloudprovider/aws"
	"github.com/dovetail-sh/dovetail/controller/cloudprovider/aws/userdata"
	"github.com/dovetail-sh/dovetail/tests/localstack"
)

// TestTakeOverKarpenterNodes: a cluster Karpenter v1 ran until now (instances with
// its tags on EC2, NodeClaims with its hash annotations, Nodes with its termination
// finalizer) gets a freshly started Dovetail. Dovetail judges every node and finds
// none drifted: no replacement, no CreateFleet, no instance terminated. Then
// consolidation removes the nodes a scale-down empties and termination releases
// Karpenter's finalizer, and deleting an adopted NodeClaim terminates its instance.
func TestTakeOverKarpenterNodes(t *testing.T) {
	ctx := context.Background()
	cluster, proc, ec2Calls := startAWSClusterProcess(t)
	c, clients := cluster.client, cluster.clients
	// Until now Karpenter ran the cluster: no Dovetail while its objects are made.
	proc.Kill()

	class := &awsv1.EC2NodeClass{}
	must(t, c.Get(ctx, client.ObjectKey{Name: "default"}, class))
	// Any replacement below could only come from a drift verdict.
	_, instances := karpenterNodes(t, cluster, class, 3)
	claims := slices.Sorted(maps.Keys(instances))
	must(t, c.Create(ctx, localstack.Deployment("adopted", 3, "1500m", "1Gi")))
	// kube-scheduler runs the pods on Karpenter's nodes, one each (two do not fit).
	allRunning(t, c, "adopted", 3, 60*time.Second)

	proc.Start()
	eventually(t, 90*time.Second, "every adopted claim judged by Dovetail's disruption pass and not drifted", func() error {
		for _, name := range claims {
			nc := &v1.NodeClaim{}
			if err := c.Get(ctx, client.ObjectKey{Name: name}, nc); err != nil {
				return err
			}
			if d := meta.FindStatusCondition(nc.Status.Conditions, v1.ConditionTypeDrifted); d != nil {
				t.Fatalf("adopted claim %s is marked drifted: %s %s", name, d.Reason, d.Message)
			}
			if nc.DeletionTimestamp != nil {
				t.Fatalf("adopted claim %s is being deleted", name)
			}
			if nc.Annotations[awsv1.AnnotationEC2NodeClassHashVersion] != awsv1.EC2NodeClassHashVersion {
				return fmt.Errorf("%s not re-stamped yet", name)
			}
			if !meta.IsStatusConditionTrue(nc.Status.Conditions, v1.ConditionTypeConsolidatable) {
				return fmt.Errorf("%s not judged by a disruption pass yet", name)
			}
		}
		return nil
	})
	if n := len(ec2Calls.Calls("CreateFleet")); n != 0 {
		t.Fatalf("%d CreateFleet calls after taking over; want none", n)
	}
	if n := len(ec2Calls.Calls("TerminateInstances")); n != 0 {
		t.Fatalf("%d TerminateInstances calls after taking over; want none", n)
	}
	t.Logf("took over %d Karpenter nodes: 0 drifted, 0 CreateFleet, 0 terminated", len(claims))

	// Consolidation works on them: the nodes a scale-down empties go, Karpenter's
	// finalizer on their Nodes is released, their instances are terminated.
	scale(t, c, "adopted", 1)
	kept := allRunning(t, c, "adopted", 1, 30*time.Second)[0].Spec.NodeName
	eventually(t, 120*time.Second, "the emptied Karpenter nodes consolidated away", func() error {
		var nodes corev1.NodeList
		if err := c.List(ctx, &nodes); err != nil {
			return err
		}
		if len(nodes.Items) != 1 || nodes.Items[0].Name != kept {
			var names []string
			for _, n := range nodes.Items {
				names = append(names, fmt.Sprintf("%s(deleting=%v finalizers=%v)", n.Name, n.DeletionTimestamp != nil, n.Finalizers))
			}
			return fmt.Errorf("nodes %v, want only %s", names, kept)
		}
		return nil
	})
	if n := len(ec2Calls.Calls("CreateFleet")); n != 0 {
		t.Errorf("%d CreateFleet calls while consolidating emptied nodes; want none", n)
	}

	// Deleting an adopted claim drains it, terminates its instance and releases its Node.
	scale(t, c, "adopted", 0)
	last := claimOfNode(t, c, kept)
	must(t, c.Delete(ctx, last))
	noNodesLeft(t, c)
	eventually(t, 60*time.Second, "every adopted instance terminated", func() error {
		for name, id := range instances {
			out, err := clients.EC2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{id}})
			if err != nil {
				return err
			}
			if s := out.Reservations[0].Instances[0].State.Name; s != ec2types.InstanceStateNameTerminated && s != ec2types.InstanceStateNameShuttingDown {
				return fmt.Errorf("instance %s of %s is %s", id, name, s)
			}
		}
		return nil
	})
	if n := len(ec2Calls.Calls("CreateFleet")); n != 0 {
		t.Errorf("%d CreateFleet calls in all; want none", n)
	}
}

// karpenterNodes makes a NodePool of one type only, so consolidation has no cheaper
// node to swap in, with n nodes Karpenter launched for it (karpenterNode); it returns
// the pool and the instance of each claim.
func karpenterNodes(t *testing.T, cluster *awsCluster, class *awsv1.EC2NodeClass, n int) (*v1.NodePool, map[string]string) {
	t.Helper()
	ctx := context.Background()
	c := cluster.client
	pool := localstack.NodePool("default",
		localstack.Requirement(v1.LabelCapacityType, v1.OpIn, v1.CapacityTypeOnDemand),
		localstack.Requirement(v1.LabelInstanceType, v1.OpIn, "m5.large"))
	pool.Spec.Disruption.ConsolidateAfter = v1.MustParseNillableDuration("1s")
	must(t, c.Create(ctx, pool))
	must(t, c.Get(ctx, client.ObjectKeyFromObject(pool), pool))
	instances := map[string]string{} // claim → instance id
	for i := 0; i < n; i++ {
		name, id := karpenterNode(t, c, cluster.clients.EC2, cluster.eksEndpoint, pool, class, i)
		instances[name] = id
	}
	return pool, instances
}

// karpenterClassHashVersion is Karpenter v1.15's EC2NodeClass hash version, on its
// classes and claims.
const karpenterClassHashVersion = "v6"

// karpenterPoolHash is Karpenter's karpenter.sh/nodepool-hash of localstack.NodePool's
// template (see TestNodePoolHashIsKarpenters).
const karpenterPoolHash = "6821555240594823858"

// karpenterNode makes what Karpenter v1 leaves behind for one node: an instance
// with its tags, a NodeClaim with its hash annotations and status, and a Node with
// its labels, owner and termination finalizer. It returns the claim and instance.
func karpenterNode(t *testing.T, c client.Client, api *ec2.Client, endpoint string, pool *v1.NodePool, class *awsv1.EC2NodeClass, i int) (string, string) {
	t.Helper()
	ctx := context.Background()
	name := fmt.Sprintf("default-karp%d", i)
	subnet := class.Status.Subnets[i%len(class.Status.Subnets)]
	ami := ""
	for _, a := range class.Status.AMIs {
		for _, r := range a.Requirements {
			if r.Key == v1.LabelArch && len(r.Values) == 1 && r.Values[0] == v1.ArchitectureAmd64 {
				ami = a.ID
			}
		}
	}
	if ami == "" {
		t.Fatalf("no amd64 image in the class status: %+v", class.Status.AMIs)
	}
	labels := map[string]string{v1.LabelNodePool: pool.Name, v1.LabelInstanceType: "m5.large", v1.LabelTopologyZone: subnet.Zone,
		v1.LabelCapacityType: v1.CapacityTypeOnDemand, v1.LabelArch: v1.ArchitectureAmd64, v1.LabelOS: "linux", "karpenter.k8s.aws/ec2nodeclass": class.Name}
	ud, err := userdata.Render(userdata.Options{Family: userdata.FamilyAL2023, ClusterName: "e2e", ClusterEndpoint: endpoint, ClusterCABundle: "Q0E=", Labels: labels, MaxPods: 29})
	must(t, err)
	tags := []ec2types.Tag{
		{Key: aws.String(dtaws.TagNodePool), Value: aws.String(pool.Name)},
		{Key: aws.String(dtaws.TagNodeClaim), Value: aws.String(name)},
		{Key: aws.String(dtaws.TagNodeClass), Value: aws.String(class.Name)},
		{Key: aws.String(dtaws.ClusterTag("e2e")), Value: aws.String("owned")},
		{Key: aws.String(dtaws.TagEKSCluster), Value: aws.String("e2e")},
		{Key: aws.String("Name"), Value: aws.String(name)},
	}
	in := &ec2.RunInstancesInput{ImageId: aws.String(ami), InstanceType: ec2types.InstanceTypeM5Large, MinCount: aws.Int32(1), MaxCount: aws.Int32(1),
		SubnetId: aws.String(subnet.ID), SecurityGroupIds: []string{class.Status.SecurityGroups[0].ID}, UserData: aws.String(base64.StdEncoding.EncodeToString([]byte(ud))),
		TagSpecifications: []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeInstance, Tags: tags}, {ResourceType: ec2types.ResourceTypeVolume, Tags: tags}}}
	// Karpenter launches with the profile in the class's status.
	if class.Status.InstanceProfile != "" {
		in.IamInstanceProfile = &ec2types.IamInstanceProfileSpecification{Name: aws.String(class.Status.InstanceProfile)}
	}
	run, err := api.RunInstances(ctx, in)
	must(t, err)
	id := aws.ToString(run.Instances[0].InstanceId)
	providerID := dtaws.ProviderIDPrefix + subnet.Zone + "/" + id

	yes := true
	nc := &v1.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, Finalizers: []string{v1.TerminationFinalizer},
			Annotations: map[string]string{
				// Karpenter's own hashes: the pool's is what Karpenter v1.12.0 computes
				// for this template (a nodeClassRef and expireAfter 720h; requirements
				// do not count), the class's is under Karpenter v1.15's class hash version v6.
				v1.NodePoolHashAnnotationKey: karpenterPoolHash, v1.NodePoolHashVersionAnnotationKey: "v3",
				awsv1.AnnotationEC2NodeClassHash: "9467862354421516513", awsv1.AnnotationEC2NodeClassHashVersion: karpenterClassHashVersion,
			},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: v1.SchemeGroupVersion.String(), Kind: "NodePool", Name: pool.Name, UID: pool.UID, BlockOwnerDeletion: &yes}}},
		Spec: v1.NodeClaimSpec{NodeClassRef: pool.Spec.Template.Spec.NodeClassRef, ExpireAfter: v1.MustParseNillableDuration("720h"),
			Requirements: []v1.NodeSelectorRequirementWithMinValues{
				{Key: v1.LabelInstanceType, RequirementBody: v1.RequirementBody{Operator: v1.OpIn, Values: []string{"m5.large"}}},
				{Key: v1.LabelNodePool, RequirementBody: v1.RequirementBody{Operator: v1.OpIn, Values: []string{pool.Name}}},
			}},
	}
	if class.Status.InstanceProfile != "" {
		nc.Annotations[awsv1.AnnotationInstanceProfile] = class.Status.InstanceProfile
	}
	must(t, c.Create(ctx, nc))

	var node corev1.Node
	eventually(t, 60*time.Second, "the instance's kubelet registers its node", func() error {
		var nodes corev1.NodeList
		if err := c.List(ctx, &nodes); err != nil {
			return err
		}
		for _, n := range nodes.Items {
			if n.Spec.ProviderID == providerID {
				node = n
				return nil
			}
		}
		return fmt.Errorf("no node with provider ID %s", providerID)
	})
	patch := client.MergeFrom(node.DeepCopy())
	controllerutil.AddFinalizer(&node, v1.TerminationFinalizer)
	for k, v := range labels {
		node.Labels[k] = v
	}
	node.Labels[v1.LabelNodeRegistered], node.Labels[v1.LabelNodeInitialized] = "true", "true"
	node.OwnerReferences = []metav1.OwnerReference{{APIVersion: v1.SchemeGroupVersion.String(), Kind: "NodeClaim", Name: nc.Name, UID: nc.UID, BlockOwnerDeletion: &yes}}
	must(t, c.Patch(ctx, &node, patch))

	status := client.MergeFrom(nc.DeepCopy())
	nc.Status.ProviderID, nc.Status.NodeName, nc.Status.ImageID = providerID, node.Name, ami
	nc.Status.Capacity, nc.Status.Allocatable = node.Status.Capacity, node.Status.Allocatable
	now := metav1.Now()
	for _, cond := range []string{v1.ConditionTypeLaunched, v1.ConditionTypeRegistered, v1.ConditionTypeInitialized, v1.ConditionTypeReady} {
		meta.SetStatusCondition(&nc.Status.Conditions, metav1.Condition{Type: cond, Status: metav1.ConditionTrue, Reason: cond, LastTransitionTime: now})
	}
	must(t, c.Status().Patch(ctx, nc, status))
	return name, id
}
