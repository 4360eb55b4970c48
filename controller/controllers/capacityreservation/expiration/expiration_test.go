package expiration

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	fakeclient "sigs.k8s.io/controller-runtime/pkg/client/fake"

	awsv1 "github.com/dovetail-sh/dovetail/controller/apis/aws/v1"
	"github.com/dovetail-sh/dovetail/controller/apis/scheme"
	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/controller/cloudprovider/aws/nodeclass"
)

// TestCapacityBlockExpiration: on a fake clock, a capacity block's claim stays
// until 40 minutes before the block ends, then is deleted with an event; a
// default reservation's claim, with no end, stays.
func TestCapacityBlockExpiration(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	end := metav1.NewTime(now.Add(time.Hour))
	class := &awsv1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: "gpu"}}
	class.Status.CapacityReservations = []awsv1.CapacityReservation{
		{ID: "cr-block", ReservationType: nodeclass.ReservationTypeCapacityBlock, EndTime: &end, AvailabilityZone: "a", InstanceType: "p5.48xlarge"},
		{ID: "cr-odcr", ReservationType: nodeclass.ReservationTypeDefault, AvailabilityZone: "a", InstanceType: "p5.48xlarge"},
	}
	claim := func(name, reservation string) *v1.NodeClaim {
		return &v1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{v1.LabelCapacityReservationID: reservation, v1.LabelNodePool: "gpu"}},
			Spec: v1.NodeClaimSpec{NodeClassRef: &v1.NodeClassReference{Group: awsv1.Group, Kind: "EC2NodeClass", Name: "gpu"}}}
	}
	kube := fakeclient.NewClientBuilder().WithScheme(scheme.New()).WithObjects(class, claim("in-block", "cr-block"), claim("in-odcr", "cr-odcr")).Build()
	clk := clocktesting.NewFakeClock(now)
	rec := record.NewFakeRecorder(10)
	c := NewController(kube, clk, rec)
	exists := func(name string) bool {
		return kube.Get(ctx, client.ObjectKey{Name: name}, &v1.NodeClaim{}) == nil
	}
	if err := c.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	if !exists("in-block") {
		t.Fatal("deleted an hour before the block ends")
	}
	clk.Step(20*time.Minute + time.Second)
	if err := c.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	if exists("in-block") {
		t.Error("a claim of a block ending in under 40 minutes stays")
	}
	if !exists("in-odcr") {
		t.Error("a default reservation's claim was deleted")
	}
	if e := <-rec.Events; !strings.Contains(e, "CapacityBlockExpiring Capacity block cr-block ends at") {
		t.Errorf("event %q", e)
	}
}
