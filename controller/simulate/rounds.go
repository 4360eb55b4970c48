package simulate

import (
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"

	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/controller/buffer"
	"github.com/dovetail-sh/dovetail/controller/capacitymix"
	"github.com/dovetail-sh/dovetail/controller/engineinput"
	"github.com/dovetail-sh/dovetail/controller/provreq"
	"github.com/dovetail-sh/dovetail/controller/scheduling"
)

// maxPodsPerSolve is the provisioner's cap on one solve; a test lowers it.
var maxPodsPerSolve = scheduling.MaxPodsPerSolve

// solved is one round of a plan: what the engine was given, and what it planned.
type solved struct {
	input   scheduling.Input
	results *scheduling.Results
	// claims name the round's NodeClaims, as later rounds see them in flight.
	claims []string
}

// solveInRounds plans the pending pods as the provisioner does: the oldest
// maxPodsPerSolve of them a round, with the buffers' pods, and each round's claims
// (as the provisioner writes them) and placements in flight, their pods
// nominated, for the next; until every pod has been tried. A backlog under the
// cap is one round.
func (p *prepared) solveInRounds(now time.Time) []solved {
	snap := p.snap
	nominations := map[types.UID]engineinput.Nomination{}
	tried := sets.New[types.UID]()
	var rounds []solved
	for round := 1; ; round++ {
		pending, deferred := scheduling.OldestFirst(snap.Pending, maxPodsPerSolve, func(pod *corev1.Pod) bool { return tried.Has(pod.UID) })
		if round > 1 && !slices.ContainsFunc(pending, func(pod *corev1.Pod) bool { return !tried.Has(pod.UID) }) {
			// Only pods a round found no place for are left, as the provisioner
			// would try them again: nothing has changed for them.
			return rounds
		}
		input := snap.InputOn(snap.Nodes, nil, append(pending[:len(pending):len(pending)], p.virtual...), true)
		results := scheduling.Solve(input)
		// Launched as the provisioner launches them: within their pools' mixes.
		capacitymix.HoldOnPlans(results.NodeClaims, snap.Pools, p.view.Claims)
		rounds = append(rounds, solved{input: input, results: results})
		if deferred == 0 && round == 1 {
			return rounds
		}
		last := &rounds[len(rounds)-1]
		for _, u := range results.Unschedulable {
			tried.Insert(u.Pod.UID)
		}
		pools := poolsByName(snap)
		claims := make([]v1.NodeClaim, 0, len(results.NodeClaims))
		for i, plan := range results.NodeClaims {
			nc := launched(engineinput.ClaimOf(pools[plan.NodePool], plan), plan)
			nc.Name = fmt.Sprintf("%s-round%d-%d", plan.NodePool, round, i+1)
			nc.CreationTimestamp = metav1.NewTime(now)
			claims = append(claims, *nc)
			last.claims = append(last.claims, nc.Name)
			nominate(nominations, nc.Name, plan.Pods, now)
		}
		for _, e := range results.Existing {
			nominate(nominations, e.Node.Name, e.Pods, now)
		}
		p.view.AddClaims(claims...)
		snap = p.rebuild(nominations, now)
	}
}

// launched is the claim as the next round, seconds later, finds it: launched as
// the plan's cheapest offering, with that type's resources, not yet a node.
func launched(nc *v1.NodeClaim, plan *scheduling.NodeClaimPlan) *v1.NodeClaim {
	node := plan.Launched(nc.Name)
	for _, k := range []string{v1.LabelInstanceType, v1.LabelTopologyZone, v1.LabelCapacityType, v1.LabelArch, v1.LabelOS} {
		if v, ok := node.Labels[k]; ok {
			nc.Labels[k] = v
		}
	}
	nc.Status.Capacity, nc.Status.Allocatable = node.Capacity.ToResourceList(), node.Allocatable.ToResourceList()
	return nc
}

func nominate(nominations map[types.UID]engineinput.Nomination, target string, pods []*corev1.Pod, now time.Time) {
	for _, pod := range pods {
		// A buffer's pods are never bound: each round plans them again.
		if !buffer.IsVirtual(pod) {
			nominations[pod.UID] = engineinput.Nomination{Target: target, At: now}
		}
	}
}

// rebuild is the engine's input from the view as it now is, with the pods
// nominated, as the provisioner builds it each round.
func (p *prepared) rebuild(nominations map[types.UID]engineinput.Nomination, now time.Time) *scheduling.Snapshot {
	s, _ := engineinput.Build(context.Background(), p.view, func(_ context.Context, np *v1.NodePool) ([]*scheduling.InstanceType, error) {
		return p.typesOf(np), nil
	}, nominations, now)
	snap := s.Engine(p.costs, p.snap.Commitments)
	provreq.Hold(snap, p.bookings)
	return snap
}

// merged is the rounds' plans as one: every round's claims, with the pods later
// rounds put on them in flight; placements on nodes; the pods no round placed.
// The buffers' pods are the last round's, as the provisioner records where the
// last plan put them.
func merged(rounds []solved) *scheduling.Results {
	if len(rounds) == 1 {
		return rounds[0].results
	}
	out := &scheduling.Results{SpendLimited: map[string]float64{}}
	claimAt := map[string]int{}
	existingAt := map[string]int{}
	placed := sets.New[types.UID]()
	for r, round := range rounds {
		keep := func(pods []*corev1.Pod) []*corev1.Pod {
			var kept []*corev1.Pod
			for _, pod := range pods {
				if r == len(rounds)-1 || !buffer.IsVirtual(pod) {
					kept = append(kept, pod)
					placed.Insert(pod.UID)
				}
			}
			return kept
		}
		for i, plan := range round.results.NodeClaims {
			c := *plan
			c.Pods = keep(plan.Pods)
			if i < len(round.claims) {
				claimAt[round.claims[i]] = len(out.NodeClaims)
			}
			out.NodeClaims = append(out.NodeClaims, &c)
		}
		for _, e := range round.results.Existing {
			pods := keep(e.Pods)
			if at, ok := claimAt[e.Node.Name]; ok {
				out.NodeClaims[at].Pods = append(out.NodeClaims[at].Pods, pods...)
				continue
			}
			if at, ok := existingAt[e.Node.Name]; ok {
				out.Existing[at].Pods = append(out.Existing[at].Pods, pods...)
				continue
			}
			existingAt[e.Node.Name] = len(out.Existing)
			out.Existing = append(out.Existing, &scheduling.ExistingPlacement{Node: e.Node, Pods: pods})
		}
		for pool, spend := range round.results.SpendLimited {
			out.SpendLimited[pool] = max(out.SpendLimited[pool], spend)
		}
	}
	last := map[types.UID]scheduling.PodError{}
	var order []types.UID
	for _, round := range rounds {
		for _, u := range round.results.Unschedulable {
			if _, seen := last[u.Pod.UID]; !seen {
				order = append(order, u.Pod.UID)
			}
			last[u.Pod.UID] = u
		}
	}
	for _, uid := range order {
		if !placed.Has(uid) {
			out.Unschedulable = append(out.Unschedulable, last[uid])
		}
	}
	return out
}

func poolsByName(snap *scheduling.Snapshot) map[string]*v1.NodePool {
	pools := make(map[string]*v1.NodePool, len(snap.Pools))
	for _, np := range snap.Pools {
		pools[np.Name] = np
	}
	return pools
}
