package interruption

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dovetail-sh/dovetail/controller/apis/scheme"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"
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
