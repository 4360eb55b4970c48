package simulate

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"

	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/controller/buffer"
	"github.com/dovetail-sh/dovetail/controller/catalog"
	"github.com/dovetail-sh/dovetail/controller/engineinput"
	"github.com/dovetail-sh/dovetail/controller/operator/settings"
	"github.com/dovetail-sh/dovetail/controller/scheduling"
)

// Plan is the JSON document `dovetail simulate -o json` prints.
type Plan struct {
	// Overlays are the input's NodeOverlays and whether each applies.
	Overlays []OverlayVerdict `json:"overlays,omitempty"`
	// Buffers are the input's CapacityBuffers and where their room is kept; their
	// virtual pods are in the plan under capacity-buffer-NAME-i.
	Buffers []BufferPlan `json:"buffers,omitempty"`
	// CapacityMixes are the pools with a spot/on-demand mix: their nodes before
	// and after the plan's launches, which hold it.
	CapacityMixes []MixReport `json:"capacityMixes,omitempty"`
	// ProvisioningRequests are the input's requests, each planned as a unit on the
	// cluster as read, as the controller plans one apart from the pending pods
	// (their pods are not in NodeClaims or Summary).
	ProvisioningRequests []RequestPlan `json:"provisioningRequests,omitempty"`
	// StaticPools are the input's static NodePools and what the static controller
	// launches or removes for them; their claims are apart from NodeClaims.
	StaticPools []StaticPoolPlan `json:"staticPools,omitempty"`
	// Commitments are the input's Commitments and what the plan uses of them;
	// NodePrices what the existing nodes cost with them.
	Commitments   []CommitmentUse    `json:"commitments,omitempty"`
	NodePrices    []NodePrice        `json:"nodePrices,omitempty"`
	NodeClaims    []PlannedNodeClaim `json:"nodeClaims"`
	ExistingNodes []PlannedExisting  `json:"existingNodes"`
	Unschedulable []Unschedulable    `json:"unschedulable"`
	Summary       Summary            `json:"summary"`
}

type PlannedNodeClaim struct {
	NodePool     string `json:"nodePool"`
	InstanceType string `json:"instanceType"`
	Zone         string `json:"zone"`
	CapacityType string `json:"capacityType"`
	// PricePerHour is what the node adds to the bill (commitments applied);
	// ListPricePerHour its on-demand or spot price.
	PricePerHour        float64  `json:"pricePerHour"`
	ListPricePerHour    float64  `json:"listPricePerHour"`
	CoveredBy           string   `json:"coveredBy,omitempty"`
	InstanceTypeOptions int      `json:"instanceTypeOptions"`
	Pods                []string `json:"pods"`
	// Requirements are the NodeClaim's requirements as the controller writes
	// them: what EC2 is asked for (any of these types, in any of these zones).
	Requirements []v1.NodeSelectorRequirementWithMinValues `json:"requirements"`
}

type PlannedExisting struct {
	Name string   `json:"name"`
	Pods []string `json:"pods"`
}

type Unschedulable struct {
	Pod    string `json:"pod"`
	Reason string `json:"reason"`
}

type Summary struct {
	Pods         int     `json:"pods"`
	Scheduled    int     `json:"scheduled"`
	NodeClaims   int     `json:"nodeClaims"`
	PricePerHour float64 `json:"pricePerHour"`
	// ListPricePerHour is the new claims' price without commitments.
	ListPricePerHour float64 `json:"listPricePerHour"`
	SolveSeconds     float64 `json:"solveSeconds"`
	// Rounds are the solves the provisioner would take: one per 5,000 pending pods,
	// the oldest first, each with the last ones' claims in flight.
	Rounds int `json:"rounds"`
}

// Run plans the inputs against the instance types. Every NodePool uses the same
// catalog: simulate has no cloud to resolve node classes against. The engine's
// input is built by the controller's own function from the objects read, so
// simulate sees what the controller would: which pools are Ready, which taints go
// away by themselves, NodeClaims still launching as capacity in flight, and which
// pods' volumes keep them off every node.
func Run(in *Inputs, cat *catalog.File, ctl *settings.Options, clk clock.PassiveClock) (*Plan, error) {
	plan, _, err := run(in, cat, ctl, clk)
	return plan, err
}

// run is Run with the engine's input and results, for checking them.
func run(in *Inputs, cat *catalog.File, ctl *settings.Options, clk clock.PassiveClock) (*Plan, []solved, error) {
	p, err := prepare(in, cat, ctl)
	if err != nil {
		return nil, nil, err
	}
	snap, overlays, buffers, terms := p.snap, p.overlays, p.buffers, p.terms
	start := clk.Now()
	rounds := p.solveInRounds(start)
	results := merged(rounds)
	elapsed := clk.Since(start)
	placeBuffers(buffers, results)
	plan := &Plan{Overlays: overlays, Buffers: buffers, StaticPools: staticPools(in, snap, ctl), NodeClaims: []PlannedNodeClaim{}, ExistingNodes: []PlannedExisting{}, Unschedulable: []Unschedulable{}}
	real := func(pods []*corev1.Pod) int {
		return len(pods) - len(slices.DeleteFunc(slices.Clone(pods), func(p *corev1.Pod) bool { return !buffer.IsVirtual(p) }))
	}
	for _, nc := range results.NodeClaims {
		plan.NodeClaims = append(plan.NodeClaims, plannedNodeClaim(nc))
		plan.Summary.Scheduled += real(nc.Pods)
	}
	for _, e := range results.Existing {
		plan.ExistingNodes = append(plan.ExistingNodes, PlannedExisting{Name: e.Node.Name, Pods: podNames(e.Pods)})
		plan.Summary.Scheduled += real(e.Pods)
	}
	for _, u := range append(results.Unschedulable, snap.Refused...) {
		if buffer.IsVirtual(u.Pod) {
			continue
		}
		plan.Unschedulable = append(plan.Unschedulable, Unschedulable{Pod: u.Pod.Namespace + "/" + u.Pod.Name, Reason: u.Reason})
	}
	sort.SliceStable(plan.Unschedulable, func(i, j int) bool { return plan.Unschedulable[i].Pod < plan.Unschedulable[j].Pod })
	plan.Summary.Pods = len(in.Pods)
	plan.Summary.NodeClaims = len(plan.NodeClaims)
	plan.Summary.PricePerHour = round(results.PricePerHour())
	for _, nc := range results.NodeClaims {
		plan.Summary.ListPricePerHour += nc.ListPrice
	}
	plan.Summary.ListPricePerHour = round(plan.Summary.ListPricePerHour)
	plan.NodePrices, plan.Commitments = commitmentReport(snap, terms, results.NodeClaims)
	plan.Summary.SolveSeconds = elapsed.Seconds()
	plan.Summary.Rounds = len(rounds)
	plan.ProvisioningRequests = planRequests(in, snap)
	plan.CapacityMixes = mixReports(snap, p.view.Claims, results.NodeClaims)
	return plan, rounds, nil
}

func plannedNodeClaim(nc *scheduling.NodeClaimPlan) PlannedNodeClaim {
	return PlannedNodeClaim{NodePool: nc.NodePool, InstanceType: nc.InstanceType.Name, Zone: nc.Offering.Zone, CapacityType: nc.Offering.CapacityType,
		PricePerHour: round(nc.Offering.Price), ListPricePerHour: round(nc.ListPrice), CoveredBy: nc.CoveredBy, InstanceTypeOptions: len(nc.InstanceTypeOptions), Pods: podNames(nc.Pods),
		Requirements: engineinput.NodeClaimRequirements(nc)}
}

func round(f float64) float64 { return math.Round(f*1e6) / 1e6 }

func podNames(pods []*corev1.Pod) []string {
	out := make([]string, len(pods))
	for i, p := range pods {
		out[i] = p.Namespace + "/" + p.Name
	}
	sort.Strings(out)
	return out
}

// WriteJSON prints the plan as JSON.
func (p *Plan) WriteJSON(w io.Writer) error { return writeJSON(w, p) }

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// WriteTable prints the plan for people.
func (p *Plan) WriteTable(w io.Writer) error {
	if err := writeOverlays(w, p.Overlays); err != nil {
		return err
	}
	if len(p.Buffers) > 0 {
		rows := make([][]string, 0, len(p.Buffers))
		for _, b := range p.Buffers {
			where := fmt.Sprintf("%d on existing nodes, %d on new, %d nowhere", b.Existing, b.New, b.Failed)
			if b.Problem != "" {
				where = b.Problem
			}
			rows = append(rows, []string{b.Name, fmt.Sprint(b.Replicas), where})
		}
		if err := writeSection(w, "CAPACITY BUFFERS (room kept, never bound)", []string{"BUFFER", "PODS", "WHERE"}, rows); err != nil {
			return err
		}
	}
	if len(p.CapacityMixes) > 0 {
		rows := make([][]string, 0, len(p.CapacityMixes))
		for _, m := range p.CapacityMixes {
			rows = append(rows, []string{m.NodePool, m.Mix, fmt.Sprintf("%d on-demand, %d spot", m.Before.OnDemand, m.Before.Spot), fmt.Sprintf("%d on-demand, %d spot", m.After.OnDemand, m.After.Spot)})
		}
		if err := writeSection(w, "CAPACITY MIXES", []string{"NODEPOOL", "MIX", "NODES NOW", "AFTER THE PLAN"}, rows); err != nil {
			return err
		}
	}
	if len(p.ProvisioningRequests) > 0 {
		rows := make([][]string, 0, len(p.ProvisioningRequests))
		for _, r := range p.ProvisioningRequests {
			what := r.Reason
			if r.Outcome == RequestLaunches {
				what = fmt.Sprintf("%d on existing capacity, %d new node(s) at $%.4f/hour: %s", r.OnExistingNodes, len(r.NodeClaims), r.PricePerHour, r.Reason)
			}
			rows = append(rows, []string{r.Name, r.Class, fmt.Sprint(r.Pods), r.Outcome, what})
		}
		if err := writeSection(w, "PROVISIONING REQUESTS (each planned as a unit, on the cluster as read)", []string{"REQUEST", "CLASS", "PODS", "OUTCOME", "WHAT"}, rows); err != nil {
			return err
		}
	}
	if len(p.StaticPools) > 0 {
		rows := make([][]string, 0, len(p.StaticPools))
		for _, s := range p.StaticPools {
			change := fmt.Sprintf("launch %d", s.Launch)
			if s.Launch > 0 {
				change += fmt.Sprintf(" %s in %s (%s, $%.4f/hour each)", s.InstanceType, s.Zone, s.CapacityType, s.PricePerHour)
			}
			if s.Remove > 0 {
				change = fmt.Sprintf("remove %d", s.Remove)
			}
			if s.Problem != "" {
				change += "; " + s.Problem
			}
			rows = append(rows, []string{s.NodePool, fmt.Sprint(s.Replicas), fmt.Sprint(s.Existing), change})
		}
		if err := writeSection(w, "STATIC NODEPOOLS", []string{"NODEPOOL", "REPLICAS", "CLAIMS", "CHANGE"}, rows); err != nil {
			return err
		}
	}
	if err := writeCommitments(w, p.Commitments, p.NodePrices); err != nil {
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	if len(p.NodeClaims) > 0 && len(p.Commitments) > 0 {
		fmt.Fprintln(tw, "NEW NODECLAIMS\t\t\t\t\t\t\t\t")
		fmt.Fprintln(tw, "NODEPOOL\tINSTANCE TYPE\tZONE\tCAPACITY\t$/HOUR\tLIST $/HOUR\tCOVERED BY\tOPTIONS\tPODS")
		for _, nc := range p.NodeClaims {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%.4f\t%.4f\t%s\t%d\t%s\n", nc.NodePool, nc.InstanceType, nc.Zone, nc.CapacityType, nc.PricePerHour, nc.ListPricePerHour, joinOr([]string{nc.CoveredBy}), nc.InstanceTypeOptions, summarize(nc.Pods))
		}
		fmt.Fprintln(tw)
	} else if len(p.NodeClaims) > 0 {
		fmt.Fprintln(tw, "NEW NODECLAIMS\t\t\t\t\t\t")
		fmt.Fprintln(tw, "NODEPOOL\tINSTANCE TYPE\tZONE\tCAPACITY\t$/HOUR\tOPTIONS\tPODS")
		for _, nc := range p.NodeClaims {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%.4f\t%d\t%s\n", nc.NodePool, nc.InstanceType, nc.Zone, nc.CapacityType, nc.PricePerHour, nc.InstanceTypeOptions, summarize(nc.Pods))
		}
		fmt.Fprintln(tw)
	}
	if len(p.ExistingNodes) > 0 {
		fmt.Fprintln(tw, "EXISTING NODES\t")
		fmt.Fprintln(tw, "NODE\tPODS")
		for _, e := range p.ExistingNodes {
			fmt.Fprintf(tw, "%s\t%s\n", e.Name, summarize(e.Pods))
		}
		fmt.Fprintln(tw)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(p.Unschedulable) > 0 {
		fmt.Fprintln(w, "UNSCHEDULABLE")
		for _, u := range p.Unschedulable {
			fmt.Fprintf(w, "  %s: %s\n", u.Pod, u.Reason)
		}
		fmt.Fprintln(w)
	}
	s := p.Summary
	price := fmt.Sprintf("$%.4f/hour", s.PricePerHour)
	if len(p.Commitments) > 0 {
		price = fmt.Sprintf("$%.4f/hour effective ($%.4f/hour at list prices)", s.PricePerHour, s.ListPricePerHour)
	}
	rounds := ""
	if s.Rounds > 1 {
		rounds = fmt.Sprintf(" in %d rounds of at most %d pods, as the controller plans a backlog", s.Rounds, maxPodsPerSolve)
	}
	_, err := fmt.Fprintf(w, "%d/%d pods scheduled, %d new nodeclaims, %s, solved%s in %.3fs\n", s.Scheduled, s.Pods, s.NodeClaims, price, rounds, s.SolveSeconds)
	return err
}

// writeOverlays lists the NodeOverlays and what each changed.
func writeOverlays(w io.Writer, overlays []OverlayVerdict) error {
	if len(overlays) == 0 {
		return nil
	}
	rows := make([][]string, 0, len(overlays))
	for _, o := range overlays {
		changes := fmt.Sprintf("price of %d type(s), capacity of %d", o.PricedTypes, o.CapacityTypes)
		if !o.Applied {
			changes = o.Reason + ": " + o.Message
		}
		rows = append(rows, []string{o.Name, fmt.Sprint(o.Applied), changes})
	}
	return writeSection(w, "NODE OVERLAYS", []string{"NAME", "APPLIED", "CHANGES"}, rows)
}

// summarize shortens a long pod list: "default/web-0, default/web-1 and 38 more".
func summarize(pods []string) string {
	const shown = 3
	if len(pods) <= shown {
		return strings.Join(pods, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(pods[:shown], ", "), len(pods)-shown)
}
