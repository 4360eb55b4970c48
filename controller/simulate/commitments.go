package simulate

import (
	"fmt"
	"io"
	"math"

	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/controller/commitment"
	"github.com/dovetail-sh/dovetail/controller/scheduling"
)

// CommitmentUse is a Commitment of the input and what the plan uses of it.
type CommitmentUse struct {
	Name string `json:"name"`
	// Reserved are "used/count TYPE[ in ZONE]" per reservation; SavingsPlans
	// "$used/$commitment per hour" per plan.
	Reserved     []string `json:"reserved,omitempty"`
	SavingsPlans []string `json:"savingsPlans,omitempty"`
}

// NodePrice is what an existing node costs per hour with the commitments
// charged, and at list price.
type NodePrice struct {
	Name             string  `json:"name"`
	InstanceType     string  `json:"instanceType"`
	CapacityType     string  `json:"capacityType"`
	PricePerHour     float64 `json:"pricePerHour"`
	ListPricePerHour float64 `json:"listPricePerHour"`
	CoveredBy        string  `json:"coveredBy,omitempty"`
}

// ledgerOf is the input's Commitments as one ledger (nil without any), and
// their terms.
func ledgerOf(in *Inputs) (*commitment.Ledger, []commitment.Terms) {
	if len(in.Commitments) == 0 {
		return nil, nil
	}
	terms := make([]commitment.Terms, 0, len(in.Commitments))
	for _, c := range in.Commitments {
		// Read validated each one.
		t, _ := commitment.Parse(c)
		terms = append(terms, t)
	}
	return commitment.NewLedger(terms...), terms
}

// commitmentReport charges the existing nodes and the planned claims to the
// commitments and reports each node's prices and each commitment's use.
func commitmentReport(snap *scheduling.Snapshot, terms []commitment.Terms, claims []*scheduling.NodeClaimPlan) ([]NodePrice, []CommitmentUse) {
	if snap.Commitments.Empty() {
		return nil, nil
	}
	ledger := snap.Commitments.Clone()
	prices, uses := scheduling.ChargeNodes(snap.Nodes, snap.InstanceTypes, ledger)
	list, _ := scheduling.ChargeNodes(snap.Nodes, snap.InstanceTypes, nil)
	var nodes []NodePrice
	for i, n := range snap.Nodes {
		if math.IsNaN(prices[i]) {
			continue
		}
		nodes = append(nodes, NodePrice{Name: n.Name, InstanceType: n.Labels[v1.LabelInstanceType], CapacityType: n.Labels[v1.LabelCapacityType],
			PricePerHour: round(prices[i]), ListPricePerHour: round(list[i]), CoveredBy: uses[i].By})
	}
	// The claims took what the engine charged them; charge them again here, in
	// plan order, to report the commitments' use.
	for _, nc := range claims {
		if nc.CoveredBy != "" {
			ledger.Take(commitment.Instance{Type: nc.InstanceType.Name, Family: scheduling.Family(nc.InstanceType), Zone: nc.Offering.Zone, ListPrice: nc.ListPrice})
		}
	}
	var out []CommitmentUse
	for _, t := range terms {
		u := ledger.Usage(t)
		cu := CommitmentUse{Name: t.Name}
		for i, r := range t.Reservations {
			where := ""
			if r.Zone != "" {
				where = " in " + r.Zone
			}
			cu.Reserved = append(cu.Reserved, fmt.Sprintf("%d/%d %s%s", u.Reserved[i], r.Count, r.InstanceType, where))
		}
		for i, p := range t.Plans {
			cu.SavingsPlans = append(cu.SavingsPlans, fmt.Sprintf("$%.4f/$%.4f per hour", u.PlansPerHour[i], p.CommitmentPerHour))
		}
		out = append(out, cu)
	}
	return nodes, out
}

// writeCommitments prints the commitments' use and the existing nodes' prices.
func writeCommitments(w io.Writer, uses []CommitmentUse, nodes []NodePrice) error {
	if len(uses) == 0 {
		return nil
	}
	rows := make([][]string, 0, len(uses))
	for _, u := range uses {
		rows = append(rows, []string{u.Name, joinOr(u.Reserved), joinOr(u.SavingsPlans)})
	}
	if err := writeSection(w, "COMMITMENTS (used by existing and new nodes)", []string{"NAME", "RESERVED INSTANCES", "SAVINGS PLANS"}, rows); err != nil {
		return err
	}
	if len(nodes) == 0 {
		return nil
	}
	rows = rows[:0]
	for _, n := range nodes {
		rows = append(rows, []string{n.Name, n.InstanceType, n.CapacityType, fmt.Sprintf("%.4f", n.PricePerHour), fmt.Sprintf("%.4f", n.ListPricePerHour), joinOr([]string{n.CoveredBy})})
	}
	return writeSection(w, "EXISTING NODE PRICES", []string{"NODE", "INSTANCE TYPE", "CAPACITY", "$/HOUR", "LIST $/HOUR", "COVERED BY"}, rows)
}

func joinOr(parts []string) string {
	out := ""
	for _, p := range parts {
		if p == "" {
			continue
		}
		if out != "" {
			out += "; "
		}
		out += p
	}
	if out == "" {
		return "-"
	}
	return out
}
