// Package commitment prices on-demand capacity at what it adds to the bill when
// Reserved Instances and Savings Plans already pay for some of it: the engine
// plans with these marginal prices. It does no I/O.
//
// A Ledger holds what the commitments still pay for. Instances are charged to it
// as AWS bills them: a Reserved Instance first (zonal, then regional, for the same
// type), then EC2 Instance Savings Plans of the family, then Compute Savings
// Plans, each plan by highest discount first. A reserved instance makes the
// instance cost 0 (it is paid for whether it runs or not); a Savings Plan prices
// it at the plan's rate while the hourly commitment lasts, and the list price
// after. A Savings Plan's unused commitment is also paid for regardless, but the
// plan covers any usage in the account, so the engine does not count it free.
package commitment

import (
	"fmt"
	"slices"
	"strconv"

	"github.com/dovetail-sh/dovetail/controller/apis/dovetail/v1alpha1"
)

// Instance is an on-demand instance as a commitment sees it.
type Instance struct {
	Type, Family, Zone string
	// ListPrice is the on-demand price per hour.
	ListPrice float64
}

type reservation struct {
	source     string
	typ, zone  string
	count, use int
}

// pays reports whether the reservation has an instance left that it would pay
// for: of its type, in its zone (any zone for a regional one).
func (r *reservation) pays(in Instance) bool {
	return r.typ == in.Type && (r.zone == "" || r.zone == in.Zone) && r.use < r.count
}

type plan struct {
	source string
	family string // "" for a Compute plan
	rate   float64
	per    float64 // the hourly commitment
	used   float64
}

// Ledger is what a set of commitments pays for, and what of it is used.
type Ledger struct {
	reservations []*reservation
	plans        []*plan
}

// Use is what one instance took from a ledger, and what it costs.
type Use struct {
	reservation *reservation
	parts       []part
	// Price is what the instance adds to the bill per hour; ListPrice what it
	// would without commitments.
	Price, ListPrice float64
	// By names what pays for it, e.g. "ri-m5: reserved m5.2xlarge in us-east-1a",
	// and Source the Commitment that does (the first, when plans share it).
	By, Source string
}

type part struct {
	plan   *plan
	amount float64
}

// Covered reports whether a commitment pays for any of the instance.
func (u Use) Covered() bool { return u.reservation != nil || len(u.parts) > 0 }

// Reserved reports whether a Reserved Instance pays for the instance, and which
// zone binds it ("" for a regional one).
func (u Use) Reserved() (zone string, ok bool) {
	if u.reservation == nil {
		return "", false
	}
	return u.reservation.zone, true
}

// Family is the instance family a Savings Plan covering the instance is bound
// to: "" when a Compute plan (or none) pays for it.
func (u Use) Family() string {
	for _, p := range u.parts {
		if p.plan.family != "" {
			return p.plan.family
		}
	}
	return ""
}

// Terms are a Commitment's spec, parsed.
type Terms struct {
	Name         string
	Reservations []v1alpha1.ReservedInstance
	Plans        []PlanTerms
}

// PlanTerms are a Savings Plan's, parsed.
type PlanTerms struct {
	Type              v1alpha1.SavingsPlanType
	Family            string
	CommitmentPerHour float64
	Discount          float64
}

// Parse checks what the CRD cannot and returns the commitment's terms.
func Parse(c *v1alpha1.Commitment) (Terms, error) {
	t := Terms{Name: c.Name, Reservations: c.Spec.ReservedInstances}
	for i, r := range c.Spec.ReservedInstances {
		if r.InstanceType == "" || r.Count < 1 {
			return Terms{}, fmt.Errorf("spec.reservedInstances[%d]: an instanceType and a count of at least 1 are required", i)
		}
	}
	for i, sp := range c.Spec.SavingsPlans {
		per, err := strconv.ParseFloat(sp.CommitmentPerHour, 64)
		if err != nil || per < 0 {
			return Terms{}, fmt.Errorf("spec.savingsPlans[%d].commitmentPerHour %q: want dollars per hour, e.g. \"25.00\"", i, sp.CommitmentPerHour)
		}
		d, err := strconv.ParseFloat(sp.Discount, 64)
		if err != nil || d <= 0 || d >= 1 {
			return Terms{}, fmt.Errorf("spec.savingsPlans[%d].discount %q: want a fraction between 0 and 1, e.g. \"0.28\" for 28%% off", i, sp.Discount)
		}
		switch {
		case sp.Type == v1alpha1.SavingsPlanEC2Instance && sp.Family == "":
			return Terms{}, fmt.Errorf("spec.savingsPlans[%d].family: an EC2Instance savings plan covers one family; name it, e.g. m7i", i)
		case sp.Type == v1alpha1.SavingsPlanCompute && sp.Family != "":
			return Terms{}, fmt.Errorf("spec.savingsPlans[%d].family: a Compute savings plan covers every family; remove family or use type EC2Instance", i)
		case sp.Type != v1alpha1.SavingsPlanCompute && sp.Type != v1alpha1.SavingsPlanEC2Instance:
			return Terms{}, fmt.Errorf("spec.savingsPlans[%d].type %q: want Compute or EC2Instance", i, sp.Type)
		}
		t.Plans = append(t.Plans, PlanTerms{Type: sp.Type, Family: sp.Family, CommitmentPerHour: per, Discount: d})
	}
	return t, nil
}

// NewLedger is a ledger of the commitments, nothing used.
func NewLedger(terms ...Terms) *Ledger {
	l := &Ledger{}
	for _, t := range terms {
		for _, r := range t.Reservations {
			l.reservations = append(l.reservations, &reservation{source: t.Name, typ: r.InstanceType, zone: r.Zone, count: int(r.Count)})
		}
		for _, p := range t.Plans {
			l.plans = append(l.plans, &plan{source: t.Name, family: p.Family, rate: 1 - p.Discount, per: p.CommitmentPerHour})
		}
	}
	// Zonal reservations before regional ones; EC2 Instance plans before Compute
	// plans, the deeper discount first: the order AWS applies them in.
	slices.SortStableFunc(l.reservations, func(a, b *reservation) int {
		return boolOrder(a.zone == "", b.zone == "")
	})
	slices.SortStableFunc(l.plans, func(a, b *plan) int {
		if o := boolOrder(a.family == "", b.family == ""); o != 0 {
			return o
		}
		switch {
		case a.rate < b.rate:
			return -1
		case a.rate > b.rate:
			return 1
		}
		return 0
	})
	return l
}

func boolOrder(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	}
	return -1
}

// Empty reports whether the ledger holds no commitment.
func (l *Ledger) Empty() bool { return l == nil || len(l.reservations)+len(l.plans) == 0 }

// Clone is an independent copy, uses included. Uses taken from the original must
// be released to the original.
func (l *Ledger) Clone() *Ledger {
	if l == nil {
		return nil
	}
	out := &Ledger{}
	for _, r := range l.reservations {
		c := *r
		out.reservations = append(out.reservations, &c)
	}
	for _, p := range l.plans {
		c := *p
		out.plans = append(out.plans, &c)
	}
	return out
}

// Price is what one more such instance would cost now.
func (l *Ledger) Price(in Instance) float64 {
	u := l.cover(in, false)
	return u.Price
}

// Take charges the instance to the ledger.
func (l *Ledger) Take(in Instance) Use { return l.cover(in, true) }

// Release gives back what a use took.
func (l *Ledger) Release(u Use) {
	if u.reservation != nil {
		u.reservation.use--
	}
	for _, p := range u.parts {
		p.plan.used -= p.amount
	}
}

func (l *Ledger) cover(in Instance, take bool) Use {
	u := Use{Price: in.ListPrice, ListPrice: in.ListPrice}
	if l == nil {
		return u
	}
	for _, r := range l.reservations {
		if r.pays(in) {
			if take {
				r.use++
			}
			where := "regional"
			if r.zone != "" {
				where = "in " + r.zone
			}
			u.reservation, u.Price, u.By, u.Source = r, 0, fmt.Sprintf("%s: reserved %s %s", r.source, r.typ, where), r.source
			return u
		}
	}
	// uncovered is the share of the list price no plan has covered yet.
	uncovered, price := in.ListPrice, 0.0
	for _, p := range l.plans {
		if uncovered <= 0 {
			break
		}
		if p.family != "" && p.family != in.Family {
			continue
		}
		left := p.per - p.used
		if left <= 1e-12 {
			continue
		}
		amount := min(left, uncovered*p.rate)
		if take {
			p.used += amount
		}
		uncovered -= amount / p.rate
		price += amount
		u.parts = append(u.parts, part{plan: p, amount: amount})
		kind := "Compute"
		if p.family != "" {
			kind = "EC2Instance " + p.family
		}
		if u.By == "" {
			u.Source = p.source
			u.By = fmt.Sprintf("%s: %s savings plan at %.0f%% off", p.source, kind, (1-p.rate)*100)
		}
	}
	if len(u.parts) > 0 {
		u.Price = price + max(uncovered, 0)
	}
	return u
}

// Charge charges a fleet's instances as AWS bills them: reservations to every
// instance they match first, then Savings Plans to the rest, in order. It returns
// each instance's use.
func (l *Ledger) Charge(fleet []Instance) []Use {
	uses := make([]Use, len(fleet))
	if l.Empty() {
		for i, in := range fleet {
			uses[i] = Use{Price: in.ListPrice, ListPrice: in.ListPrice}
		}
		return uses
	}
	reserved := make([]bool, len(fleet))
	for i, in := range fleet {
		for _, r := range l.reservations {
			if r.pays(in) {
				uses[i] = l.Take(in)
				reserved[i] = true
				break
			}
		}
	}
	for i, in := range fleet {
		if !reserved[i] {
			uses[i] = l.Take(in)
		}
	}
	return uses
}

// Usage is what of each commitment is used, for its status.
type Usage struct {
	// Reserved are, per reservation of the commitment in spec order, the
	// instances it pays for.
	Reserved []int
	// PlansPerHour are, per Savings Plan in spec order, the commitment spent.
	PlansPerHour []float64
}

// Usage reports what the named commitment's reservations and plans are used for,
// in the order of its terms.
func (l *Ledger) Usage(t Terms) Usage {
	var u Usage
	taken := map[*reservation]bool{}
	for _, r := range t.Reservations {
		n := 0
		for _, lr := range l.reservations {
			if !taken[lr] && lr.source == t.Name && lr.typ == r.InstanceType && lr.zone == r.Zone && lr.count == int(r.Count) {
				taken[lr], n = true, lr.use
				break
			}
		}
		u.Reserved = append(u.Reserved, n)
	}
	seen := map[*plan]bool{}
	for _, p := range t.Plans {
		used := 0.0
		for _, lp := range l.plans {
			if !seen[lp] && lp.source == t.Name && lp.family == p.Family && lp.per == p.CommitmentPerHour && lp.rate == 1-p.Discount {
				seen[lp], used = true, lp.used
				break
			}
		}
		u.PlansPerHour = append(u.PlansPerHour, used)
	}
	return u
}
