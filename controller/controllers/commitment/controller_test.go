package commitment

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	fakeclient "sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/dovetail-sh/dovetail/controller/apis/dovetail/v1alpha1"
	"github.com/dovetail-sh/dovetail/controller/apis/scheme"
	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/controller/cloudprovider/fake"
	"github.com/dovetail-sh/dovetail/controller/commitment"
)

func launched(name, typ, zone, ct string) *v1.NodeClaim {
	return &v1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{v1.LabelNodePool: "default", v1.LabelInstanceType: typ, v1.LabelTopologyZone: zone, v1.LabelCapacityType: ct}},
		Status: v1.NodeClaimStatus{ProviderID: "fake:///" + name}}
}

// TestCommitmentReconcile: a valid commitment goes to the store and reports what
// the launched claims use of it (two of three reservations, $0.06 of a plan); an
// invalid one is Ready=False with the field named, and the engine does not plan
// with it.
func TestCommitmentReconcile(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC))
	good := &v1alpha1.Commitment{ObjectMeta: metav1.ObjectMeta{Name: "ri-m5", Generation: 1}, Spec: v1alpha1.CommitmentSpec{
		ReservedInstances: []v1alpha1.ReservedInstance{{InstanceType: "m5.2xlarge", Zone: "test-zone-a", Count: 3}},
		SavingsPlans:      []v1alpha1.SavingsPlan{{Type: v1alpha1.SavingsPlanCompute, CommitmentPerHour: "1.00", Discount: "0.40"}},
	}}
	bad := &v1alpha1.Commitment{ObjectMeta: metav1.ObjectMeta{Name: "typo"}, Spec: v1alpha1.CommitmentSpec{
		SavingsPlans: []v1alpha1.SavingsPlan{{Type: v1alpha1.SavingsPlanEC2Instance, CommitmentPerHour: "1", Discount: "0.4"}},
	}}
	kube := fakeclient.NewClientBuilder().WithScheme(scheme.New()).WithStatusSubresource(&v1alpha1.Commitment{}).WithObjects(
		good, bad, &v1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "default"}},
		launched("a", "m5.2xlarge", "test-zone-a", v1.CapacityTypeOnDemand),
		launched("b", "m5.2xlarge", "test-zone-a", v1.CapacityTypeOnDemand),
		launched("c", "c5.large", "test-zone-a", v1.CapacityTypeOnDemand),
		launched("d", "m5.2xlarge", "test-zone-a", v1.CapacityTypeSpot),
	).Build()
	cloud := fake.New(clk, fake.InstanceType("m5.2xlarge", "8", "32Gi", "test-zone-a"), fake.InstanceType("c5.large", "2", "4Gi", "test-zone-a"))
	store := &commitment.Store{}
	ctrl := NewController(kube, cloud, store, clk)
	if _, err := ctrl.Reconcile(context.Background(), reconcile.Request{}); err != nil {
		t.Fatal(err)
	}
	if store.Ledger().Price(commitment.Instance{Type: "m5.2xlarge", Zone: "test-zone-a", ListPrice: 1}) != 0 {
		t.Errorf("the store does not hold the valid commitment")
	}
	got := &v1alpha1.Commitment{}
	if err := kube.Get(context.Background(), client.ObjectKey{Name: "ri-m5"}, got); err != nil {
		t.Fatal(err)
	}
	if !meta.IsStatusConditionTrue(got.Status.Conditions, ConditionTypeReady) || len(got.Status.ReservedInstances) != 1 || got.Status.ReservedInstances[0].Used != 2 ||
		got.Status.SavingsPlans[0].UsedPerHour != "0.0600" || got.Status.CoveredNodes != 3 {
		t.Errorf("status %+v; want Ready, 2 of 3 reserved used, $0.06/h of the plan (the c5.large at 60%% of $0.10), 3 nodes covered", got.Status)
	}
	if err := kube.Get(context.Background(), client.ObjectKey{Name: "typo"}, got); err != nil {
		t.Fatal(err)
	}
	cond := meta.FindStatusCondition(got.Status.Conditions, ConditionTypeReady)
	if cond == nil || cond.Status != metav1.ConditionFalse || cond.Reason != "InvalidSpec" || cond.Message == "" {
		t.Errorf("the invalid commitment's Ready: %+v; want False, InvalidSpec, naming the field", cond)
	}
}
