package commitment

import (
	"math"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dovetail-sh/dovetail/controller/apis/dovetail/v1alpha1"
)

func terms(t *testing.T, spec v1alpha1.CommitmentSpec) Terms {
	t.Helper()
	tm, err := Parse(&v1alpha1.Commitment{ObjectMeta: metav1.ObjectMeta{Name: "c"}, Spec: spec})
	if err != nil {
		t.Fatal(err)
	}
	return tm
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

// TestReservedInstancePricesCoveredInstancesAtZero: 4 zonal RIs make 4 instances
// of the type in the zone cost 0, the fifth the list price; other zones and
// types are not covered; releasing one frees it.
func TestReservedInstancePricesCoveredInstancesAtZero(t *testing.T) {
	l := NewLedger(terms(t, v1alpha1.CommitmentSpec{ReservedInstances: []v1alpha1.ReservedInstance{{InstanceType: "m5.2xlarge", Zone: "us-east-1a", Count: 4}}}))
	m5a := Instance{Type: "m5.2xlarge", Family: "m5", Zone: "us-east-1a", ListPrice: 0.384}
	if p := l.Price(Instance{Type: "m5.2xlarge", Family: "m5", Zone: "us-east-1b", ListPrice: 0.384}); p != 0.384 {
		t.Errorf("another zone: %v; want the list price", p)
	}
	var uses []Use
	for range 4 {
		u := l.Take(m5a)
		if u.Price != 0 || !u.Covered() || !strings.Contains(u.By, "reserved m5.2xlarge in us-east-1a") {
			t.Fatalf("a reserved instance: %+v; want price 0", u)
		}
		uses = append(uses, u)
	}
	if u := l.Take(m5a); u.Price != 0.384 || u.Covered() {
		t.Errorf("the fifth: %+v; want the list price", u)
	}
	l.Release(uses[0])
	if p := l.Price(m5a); p != 0 {
		t.Errorf("after a release: %v; want 0", p)
	}
	if got := l.Usage(terms(t, v1alpha1.CommitmentSpec{ReservedInstances: []v1alpha1.ReservedInstance{{InstanceType: "m5.2xlarge", Zone: "us-east-1a", Count: 4}}})); got.Reserved[0] != 3 {
		t.Errorf("usage %+v; want 3 used", got)
	}
	regional := NewLedger(terms(t, v1alpha1.CommitmentSpec{ReservedInstances: []v1alpha1.ReservedInstance{{InstanceType: "m5.2xlarge", Count: 1}}}))
	if p := regional.Price(Instance{Type: "m5.2xlarge", Zone: "us-east-1c", ListPrice: 0.384}); p != 0 {
		t.Errorf("a regional RI in any zone: %v; want 0", p)
	}
}

// TestSavingsPlanPricesAtItsRateUntilTheCommitmentIsUsed: a $1/h Compute plan at
// 25% off prices a $0.40 instance at $0.30 until $1 of commitment is spent; the
// instance that crosses it is priced partly at the rate, partly at list; after,
// list. An EC2Instance plan covers only its family, and comes first.
func TestSavingsPlanPricesAtItsRateUntilTheCommitmentIsUsed(t *testing.T) {
	l := NewLedger(terms(t, v1alpha1.CommitmentSpec{SavingsPlans: []v1alpha1.SavingsPlan{{Type: v1alpha1.SavingsPlanCompute, CommitmentPerHour: "1.00", Discount: "0.25"}}}))
	in := Instance{Type: "c7i.xlarge", Family: "c7i", ListPrice: 0.40}
	for i := range 3 {
		if u := l.Take(in); !near(u.Price, 0.30) {
			t.Fatalf("instance %d: %v; want 0.30", i, u.Price)
		}
	}
	// $0.10 of commitment left covers $0.1333 of list; the rest, $0.2667, at list.
	if u := l.Take(in); !near(u.Price, 0.10+0.40-0.10/0.75) {
		t.Errorf("the crossing instance: %v; want %v", u.Price, 0.10+0.40-0.10/0.75)
	}
	if u := l.Take(in); !near(u.Price, 0.40) || u.Covered() {
		t.Errorf("past the commitment: %+v; want list", u)
	}

	both := NewLedger(terms(t, v1alpha1.CommitmentSpec{SavingsPlans: []v1alpha1.SavingsPlan{
		{Type: v1alpha1.SavingsPlanCompute, CommitmentPerHour: "10", Discount: "0.28"},
		{Type: v1alpha1.SavingsPlanEC2Instance, Family: "m7i", CommitmentPerHour: "10", Discount: "0.40"},
	}}))
	if u := both.Take(Instance{Type: "m7i.large", Family: "m7i", ListPrice: 1}); !near(u.Price, 0.60) || u.Family() != "m7i" {
		t.Errorf("an m7i: %+v; want the EC2Instance plan's 0.60", u)
	}
	if u := both.Take(Instance{Type: "c7i.large", Family: "c7i", ListPrice: 1}); !near(u.Price, 0.72) || u.Family() != "" {
		t.Errorf("a c7i: %+v; want the Compute plan's 0.72", u)
	}
}

// TestReservedInstanceChargeCoversMatchingInstancesFirst: charging a fleet gives
// reservations to the instances they match before Savings Plans take any, as AWS
// bills.
func TestReservedInstanceChargeCoversMatchingInstancesFirst(t *testing.T) {
	l := NewLedger(terms(t, v1alpha1.CommitmentSpec{
		ReservedInstances: []v1alpha1.ReservedInstance{{InstanceType: "m5.large", Count: 1}},
		SavingsPlans:      []v1alpha1.SavingsPlan{{Type: v1alpha1.SavingsPlanCompute, CommitmentPerHour: "0.1", Discount: "0.5"}},
	}))
	uses := l.Charge([]Instance{{Type: "c5.large", ListPrice: 0.2}, {Type: "m5.large", ListPrice: 0.2}})
	if !near(uses[0].Price, 0.1) || uses[1].Price != 0 {
		t.Errorf("prices %v, %v; want the c5 on the plan (0.10) and the m5 reserved (0)", uses[0].Price, uses[1].Price)
	}
}

func TestCommitmentParseNamesTheField(t *testing.T) {
	for _, c := range []struct {
		sp   v1alpha1.SavingsPlan
		want string
	}{
		{v1alpha1.SavingsPlan{Type: v1alpha1.SavingsPlanCompute, CommitmentPerHour: "x", Discount: "0.2"}, "spec.savingsPlans[0].commitmentPerHour"},
		{v1alpha1.SavingsPlan{Type: v1alpha1.SavingsPlanCompute, CommitmentPerHour: "1", Discount: "1.5"}, "spec.savingsPlans[0].discount"},
		{v1alpha1.SavingsPlan{Type: v1alpha1.SavingsPlanEC2Instance, CommitmentPerHour: "1", Discount: "0.2"}, "spec.savingsPlans[0].family"},
		{v1alpha1.SavingsPlan{Type: v1alpha1.SavingsPlanCompute, Family: "m5", CommitmentPerHour: "1", Discount: "0.2"}, "remove family"},
	} {
		_, err := Parse(&v1alpha1.Commitment{Spec: v1alpha1.CommitmentSpec{SavingsPlans: []v1alpha1.SavingsPlan{c.sp}}})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v; want an error naming %s", c.sp, err, c.want)
		}
	}
}
