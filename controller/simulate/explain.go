package simulate

import (
	"fmt"
	"io"
	"math"
	"time"

	"github.com/dovetail-sh/dovetail/controller/catalog"
	"github.com/dovetail-sh/dovetail/controller/operator/settings"
)

// NodeExplanation is what `dovetail explain node` prints: whether consolidation
// removes the node now and why (not), and what removing it alone would do.
type NodeExplanation struct {
	Node         string   `json:"node"`
	NodeClaim    string   `json:"nodeClaim,omitempty"`
	NodePool     string   `json:"nodePool,omitempty"`
	InstanceType string   `json:"instanceType,omitempty"`
	CapacityType string   `json:"capacityType,omitempty"`
	PricePerHour *float64 `json:"pricePerHour,omitempty"`
	// Consolidated is set when the target removes the node now; Batch says in
	// which batch.
	Consolidated bool   `json:"consolidated"`
	Batch        string `json:"batch,omitempty"`
	// Why is what keeps the node (a disruption budget, a PDB, a do-not-disrupt
	// pod, consolidateAfter, the policy, no cheaper fit), as the controller's
	// Unconsolidatable and DisruptionBlocked events say it.
	Why string `json:"why,omitempty"`
	// IfRemoved is what removing the node alone would do now; nil for a node that
	// is not a consolidation candidate.
	IfRemoved *Removal `json:"ifRemoved,omitempty"`
}

// Removal is where a node's pods would go without it, and what that saves.
type Removal struct {
	Moves          []PodMove          `json:"moves"`
	Launch         []PlannedNodeClaim `json:"launch"`
	Unplaced       []Unschedulable    `json:"unplaced"`
	SavingsPerHour float64            `json:"savingsPerHour"`
}

// Explain says why consolidation does or does not remove the named node of a
// cluster snapshot at now, and what removing it alone would do.
func Explain(in *Inputs, cat *catalog.File, ctl *settings.Options, now time.Time, node string) (*NodeExplanation, error) {
	d, err := decide(in, cat, ctl, now)
	if err != nil {
		return nil, err
	}
	report := d.report()
	e := &NodeExplanation{Node: node}
	found := false
	for _, k := range report.Kept {
		if k.Node == node {
			found, e.NodeClaim, e.NodePool, e.Why = true, k.NodeClaim, k.NodePool, k.Reason
		}
	}
	for _, r := range report.Remove {
		if r.Node != node {
			continue
		}
		found, e.NodeClaim, e.NodePool = true, r.NodeClaim, r.NodePool
		if r.HeldBy != "" {
			e.Why = "in the cheapest fleet, but held back: " + r.HeldBy
		} else if e.Why == "" {
			e.Consolidated, e.Batch = true, r.Batch
		}
	}
	if !found {
		return nil, fmt.Errorf("node %q is not in the snapshot", node)
	}
	c := d.cl.Candidate(node)
	if c == nil {
		return e, nil
	}
	e.InstanceType, e.CapacityType = c.InstanceType, c.CapacityType
	if !math.IsNaN(c.Price) {
		p := round(c.Price)
		e.PricePerHour = &p
	}
	r, savings := d.cl.WithoutNode(c)
	removal := &Removal{Moves: []PodMove{}, Launch: []PlannedNodeClaim{}, Unplaced: []Unschedulable{}, SavingsPerHour: round(savings)}
	for _, p := range r.Existing {
		for _, pod := range p.Pods {
			removal.Moves = append(removal.Moves, PodMove{Pod: pod.Namespace + "/" + pod.Name, From: node, To: p.Node.Name})
		}
	}
	for _, nc := range r.NodeClaims {
		removal.Launch = append(removal.Launch, plannedNodeClaim(nc))
		for _, pod := range nc.Pods {
			removal.Moves = append(removal.Moves, PodMove{Pod: pod.Namespace + "/" + pod.Name, From: node, To: "new " + nc.InstanceType.Name})
		}
	}
	for _, u := range r.Unschedulable {
		removal.Unplaced = append(removal.Unplaced, Unschedulable{Pod: u.Pod.Namespace + "/" + u.Pod.Name, Reason: u.Reason})
	}
	e.IfRemoved = removal
	return e, nil
}

// WriteJSON prints the explanation as JSON.
func (e *NodeExplanation) WriteJSON(w io.Writer) error { return writeJSON(w, e) }

// WriteTable prints the explanation for people.
func (e *NodeExplanation) WriteTable(w io.Writer) error {
	what := e.Node
	if e.NodeClaim != "" {
		what = fmt.Sprintf("%s (nodeclaim %s, nodepool %s", e.Node, e.NodeClaim, e.NodePool)
		if e.InstanceType != "" {
			what += fmt.Sprintf(", %s %s", e.InstanceType, e.CapacityType)
		}
		if e.PricePerHour != nil {
			what += fmt.Sprintf(", $%.4f/h", *e.PricePerHour)
		}
		what += ")"
	}
	fmt.Fprintf(w, "NODE %s\n", what)
	if e.Consolidated {
		fmt.Fprintf(w, "CONSOLIDATED NOW: the cheapest fleet does without it (%s batch)\n", e.Batch)
	} else {
		fmt.Fprintf(w, "KEPT: %s\n", e.Why)
	}
	r := e.IfRemoved
	if r == nil {
		return nil
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "IF REMOVED NOW (alone): saves $%.4f/hour\n", r.SavingsPerHour)
	rows := make([][]string, 0, len(r.Moves))
	for _, m := range r.Moves {
		rows = append(rows, []string{m.Pod, m.To})
	}
	if len(rows) > 0 {
		if err := writeSection(w, "PODS GO TO", []string{"POD", "NODE"}, rows); err != nil {
			return err
		}
	}
	if len(r.Launch) > 0 {
		rows = rows[:0]
		for _, nc := range r.Launch {
			rows = append(rows, []string{nc.InstanceType, nc.Zone, nc.CapacityType, fmt.Sprintf("%.4f", nc.PricePerHour)})
		}
		if err := writeSection(w, "NEW NODES", []string{"INSTANCE TYPE", "ZONE", "CAPACITY", "$/HOUR"}, rows); err != nil {
			return err
		}
	}
	if len(r.Unplaced) > 0 {
		fmt.Fprintln(w, "NOWHERE TO GO")
		for _, u := range r.Unplaced {
			fmt.Fprintf(w, "  %s: %s\n", u.Pod, u.Reason)
		}
	}
	return nil
}
