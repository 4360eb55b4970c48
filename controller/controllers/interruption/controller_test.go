package interruption

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dovetail-sh/dovetail/controller/apis/scheme"
	"github.com/dovetail-sh/dovetail/controller/cloudprovider"
	"github.com/dovetail-sh/dovetail/controller/controllers/provisioning"
	"github.com/dovetail-sh/dovetail/controller/scheduling"
	"github.com/dovetail-sh/dovetail/controller/state"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
)

// laggingCache lists the NodeClaims as they were before any write, as an informer
// cache does for a moment after a delete.
type laggingCache struct {
	client.Client
	before v1.NodeClaimList
}

func (l *laggingCache) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if claims, ok := list.(*v1.NodeClaimList); ok {
		l.before.DeepCopyInto(claims)
		return nil
	}
	return l.Client.List(ctx, list, opts...)
}

// TestDuplicateMessagesActOnce: EventBridge delivers at least once, and a spot
// warning often comes with a state change; while the cache still shows the claim
// alive, only the first message acts (one drain, one set of replacements), and
// every copy is handled so that none is retried forever.
func TestDuplicateMessagesActOnce(t *testing.T) {
	nc := &v1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "default-abc", UID: "uid-1", Finalizers: []string{v1.TerminationFinalizer},
		Labels: map[string]string{v1.LabelNodePool: "default", v1.LabelCapacityType: v1.CapacityTypeSpot}},
		Status: v1.NodeClaimStatus{ProviderID: "aws:///us-west-2a/i-0abc"}}
	kube := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(nc).Build()
	cache := &laggingCache{Client: kube}
	if err := kube.List(context.Background(), &cache.before); err != nil {
		t.Fatal(err)
	}
	recorder := record.NewFakeRecorder(10)
	c := NewController(cache, nil, "q", nil, nil, recorder, clocktesting.NewFakeClock(time.Now()))
	spot := `{"id":"1","detail-type":"EC2 Spot Instance Interruption Warning","source":"aws.ec2","detail":{"instance-id":"i-0abc"}}`
	stopping := `{"id":"2","detail-type":"EC2 Instance State-change Notification","source":"aws.ec2","detail":{"instance-id":"i-0abc","state":"stopping"}}`
	var wg sync.WaitGroup
	for _, body := range []string{spot, spot, stopping, spot} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := c.handle(context.Background(), body); err != nil {
				t.Errorf("handling a duplicate: %v", err)
			}
		}()
	}
	wg.Wait()
	close(recorder.Events)
	var drains []string
	for e := range recorder.Events {
		if strings.Contains(e, "draining the node") {
			drains = append(drains, e)
		}
	}
	if len(drains) != 1 {
		t.Errorf("four copies of the interruption drained %d times, want once: %v", len(drains), drains)
	}
	got := &v1.NodeClaim{}
	if err := kube.Get(context.Background(), client.ObjectKeyFromObject(nc), got); err != nil || got.DeletionTimestamp == nil {
		t.Errorf("the interrupted claim is not deleting (%v)", err)
	}
}

// twoTypeCloud offers a 2-CPU and a 4-CPU instance type and launches nothing: the
// test reads the NodeClaims the controller creates.
type twoTypeCloud struct{ cloudprovider.CloudProvider }

func (twoTypeCloud) GetInstanceTypes(context.Context, *v1.NodePool) ([]*scheduling.InstanceType, error) {
	var out []*scheduling.InstanceType
	for i, cpu := range []string{"2", "4"} {
		out = append(out, scheduling.NewInstanceType("m."+cpu+"cpu", map[string]string{v1.LabelArch: "amd64"},
			corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse("8Gi"), corev1.ResourcePods: resource.MustParse("29"), corev1.ResourceEphemeralStorage: resource.MustParse("20Gi")},
			[]scheduling.Offering{{Zone: "a", CapacityType: v1.CapacityTypeOnDemand, Price: 0.1 * float64(i+1), Available: true}}, scheduling.DefaultAllocatableSettings()))
	}
	return out, nil
}

// spotNode is a spot claim, its node of the given CPUs, and a pod of cpu on it.
func spotNode(name, nodeCPU, podCPU string) []client.Object {
	labels := map[string]string{v1.LabelNodePool: "default", v1.LabelInstanceType: "m." + nodeCPU + "cpu", v1.LabelCapacityType: v1.CapacityTypeSpot, v1.LabelTopologyZone: "a"}
	nc := &v1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID(name + "-uid"), Finalizers: []string{v1.TerminationFinalizer}, Labels: labels},
		Status: v1.NodeClaimStatus{ProviderID: "aws:///a/i-" + name, NodeName: name + "-node",
			Conditions: []metav1.Condition{{Type: v1.ConditionTypeInitialized, Status: metav1.ConditionTrue, Reason: "Initialized"}}}}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name + "-node", Labels: labels}, Spec: corev1.NodeSpec{ProviderID: nc.Status.ProviderID},
		Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(nodeCPU), corev1.ResourceMemory: resource.MustParse("8Gi"), corev1.ResourcePods: resource.MustParse("29")}}}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name + "-pod", Namespace: "default", UID: types.UID(name + "-pod-uid"),
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web", UID: "rs", Controller: ptr.To(true)}}},
		Spec: corev1.PodSpec{NodeName: node.Name, Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(podCPU), corev1.ResourceMemory: resource.MustParse("128Mi")}}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	return []client.Object{nc, node, pod}
}

// Two spot nodes are reclaimed one after the other, before the cache shows the
// first deleting: the second message's plan must count neither the first node's
// free CPU nor the first's replacement, which its pods have not reached yet, as
// room for its pod, or that pod would have no place to go.
func TestSecondInterruptionDoesNotCountTheFirstNodeAsRoom(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC))
	// first's pod needs a new 4-CPU node; second's (500m) fits only in the room
	// first's node has free.
	objs := append(spotNode("first", "8", "3700m"), spotNode("second", "2", "500m")...)
	objs = append(objs, &v1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "default"}})
	kube := fake.NewClientBuilder().WithScheme(scheme.New()).WithStatusSubresource(&v1.NodeClaim{}, &v1.NodePool{}).WithObjects(objs...).Build()
	cache := &laggingCache{Client: kube}
	if err := kube.List(context.Background(), &cache.before); err != nil {
		t.Fatal(err)
	}
	recorder := record.NewFakeRecorder(100)
	prov := provisioning.NewProvisioner(cache, state.NewCluster(cache, clk), twoTypeCloud{}, clk, recorder,
		provisioning.NewBatcher(clk, time.Second, 10*time.Second), scheduling.DefaultNodeCosts())
	c := NewController(cache, nil, "q", prov, nil, recorder, clk)
	for _, id := range []string{"i-first", "i-second"} {
		body := `{"id":"` + id + `","detail-type":"EC2 Spot Instance Interruption Warning","source":"aws.ec2","detail":{"instance-id":"` + id + `"}}`
		if err := c.handle(context.Background(), body); err != nil {
			t.Fatal(err)
		}
	}
	var claims v1.NodeClaimList
	if err := kube.List(context.Background(), &claims); err != nil {
		t.Fatal(err)
	}
	var replacements []string
	for _, nc := range claims.Items {
		if nc.Name != "first" && nc.Name != "second" {
			for _, r := range nc.Spec.Requirements {
				if r.Key == v1.LabelInstanceType {
					replacements = append(replacements, strings.Join(r.Values, ","))
				}
			}
		}
	}
	// One 4-CPU node for first's pod, which also has no room left for second's;
	// then one for second's.
	if len(replacements) != 2 {
		t.Errorf("two interrupted nodes got replacements of types %v; want two, one for each node's pod", replacements)
	}
}
