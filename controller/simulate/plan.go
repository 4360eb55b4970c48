package simulate

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
	"text/tabwriter"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/controller/scheduling"
)

// Plan is the JSON document `dovetail simulate -o json` prints.
type Plan struct {
	NodeClaims    []PlannedNodeClaim `json:"nodeClaims"`
	ExistingNodes []PlannedExisting  `json:"existingNodes"`
	Unschedulable []Unschedulable    `json:"unschedulable"`
	Summary       Summary            `json:"summary"`
}

type PlannedNodeClaim struct {
	NodePool            string   `json:"nodePool"`
	InstanceType        string   `json:"instanceType"`
	Zone                string   `json:"zone"`
	CapacityType        string   `json:"capacityType"`
	PricePerHour        float64  `json:"pricePerHour"`
	InstanceTypeOptions int      `json:"instanceTypeOptions"`
	Pods                []string `json:"pods"`
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
	SolveSeconds float64 `json:"solveSeconds"`
}

// Run plans the inputs against the instance types. Every NodePool uses the same
// catalog: simulate has no cloud to resolve node classes against.
func Run(in *Inputs, instanceTypes []*scheduling.InstanceType, costs scheduling.NodeCosts, clk clock.PassiveClock) *Plan {
	input := scheduling.Input{
		Pods: in.Pods, NodePools: in.NodePools, DaemonSetPods: in.DaemonSetPods, NodeCosts: &costs,
		InstanceTypes: map[string][]*scheduling.InstanceType{},
	}
	for _, np := range in.NodePools {
		input.InstanceTypes[np.Name] = instanceTypes
	}
	var refused []Unschedulable
	input.Pods, input.VolumeRequirements, refused = volumeRequirements(in)
	for _, n := range in.Nodes {
		en := &scheduling.ExistingNode{
			Name: n.Name, Labels: n.Labels, Taints: n.Spec.Taints, NodePool: n.Labels[v1.LabelNodePool],
			Capacity: scheduling.FromResourceList(n.Status.Capacity), Allocatable: scheduling.FromResourceList(n.Status.Allocatable),
		}
		if en.Labels == nil {
			en.Labels = map[string]string{}
		}
		for _, p := range in.BoundPods {
			if p.Spec.NodeName == n.Name {
				en.Pods = append(en.Pods, p)
			}
		}
		input.Nodes = append(input.Nodes, en)
	}
	start := clk.Now()
	results := scheduling.Solve(input)
	elapsed := clk.Since(start)
	plan := &Plan{NodeClaims: []PlannedNodeClaim{}, ExistingNodes: []PlannedExisting{}, Unschedulable: []Unschedulable{}}
	for _, nc := range results.NodeClaims {
		plan.NodeClaims = append(plan.NodeClaims, plannedNodeClaim(nc))
		plan.Summary.Scheduled += len(nc.Pods)
	}
	for _, e := range results.Existing {
		plan.ExistingNodes = append(plan.ExistingNodes, PlannedExisting{Name: e.Node.Name, Pods: podNames(e.Pods)})
		plan.Summary.Scheduled += len(e.Pods)
	}
	for _, u := range results.Unschedulable {
		plan.Unschedulable = append(plan.Unschedulable, Unschedulable{Pod: u.Pod.Namespace + "/" + u.Pod.Name, Reason: u.Reason})
	}
	plan.Unschedulable = append(plan.Unschedulable, refused...)
	plan.Summary.Pods = len(in.Pods)
	plan.Summary.NodeClaims = len(plan.NodeClaims)
	plan.Summary.PricePerHour = round(results.PricePerHour())
	plan.Summary.SolveSeconds = elapsed.Seconds()
	return plan
}

// volumeRequirements holds pods with volumes to their volumes' zones, as the
// controller does, when the inputs include claims, volumes or storage classes. Pods
// whose volumes keep kube-scheduler from placing them anywhere (a claim missing or
// unbound with Immediate binding) are not planned: the controller would not launch
// nodes for them either.
func volumeRequirements(in *Inputs) ([]*corev1.Pod, map[types.UID]scheduling.Requirements, []Unschedulable) {
	if len(in.Claims)+len(in.Volumes)+len(in.StorageClasses) == 0 {
		return in.Pods, nil, nil
	}
	volumes := scheduling.NewVolumes(in.Claims, in.Volumes, in.StorageClasses)
	byPod := map[types.UID]scheduling.Requirements{}
	var pods []*corev1.Pod
	var refused []Unschedulable
	for _, p := range in.Pods {
		reqs, err := volumes.Requirements(p)
		if err != nil {
			refused = append(refused, Unschedulable{Pod: p.Namespace + "/" + p.Name, Reason: err.Error()})
			continue
		}
		if reqs != nil {
			if p.UID == "" {
				// The engine keys volume requirements by UID; files seldom carry one.
				p = p.DeepCopy()
				p.UID = types.UID("simulate:" + p.Namespace + "/" + p.Name)
			}
			byPod[p.UID] = reqs
		}
		pods = append(pods, p)
	}
	return pods, byPod, refused
}

func plannedNodeClaim(nc *scheduling.NodeClaimPlan) PlannedNodeClaim {
	return PlannedNodeClaim{NodePool: nc.NodePool, InstanceType: nc.InstanceType.Name, Zone: nc.Offering.Zone, CapacityType: nc.Offering.CapacityType,
		PricePerHour: round(nc.Offering.Price), InstanceTypeOptions: len(nc.InstanceTypeOptions), Pods: podNames(nc.Pods)}
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
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	if len(p.NodeClaims) > 0 {
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
	_, err := fmt.Fprintf(w, "%d/%d pods scheduled, %d new nodeclaims, $%.4f/hour, solved in %.3fs\n", s.Scheduled, s.Pods, s.NodeClaims, s.PricePerHour, s.SolveSeconds)
	return err
}

// summarize shortens a long pod list: "default/web-0, default/web-1 and 38 more".
func summarize(pods []string) string {
	const shown = 3
	if len(pods) <= shown {
		return strings.Join(pods, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(pods[:shown], ", "), len(pods)-shown)
}
