// Package repair decides node repair as Karpenter v1.15 does it as a disruption
// method: which of a node's unhealthy conditions a cloud provider's repair policies
// cover, when each becomes eligible, what the node's repair is (replace or reboot),
// how long its drain may take, and how urgent it is against other nodes. Pure: the
// nodes and the clock's time are handed in.
package repair

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/sets"
)

// Action is what a policy asks done to the node.
type Action string

const (
	// Reboot recovers the node in place, through the cloud provider.
	Reboot Action = "RebootNode"
	// Replace launches a replacement and removes the node.
	Replace Action = "ReplaceNode"
)

// disruptiveness orders actions: where two policies apply, the more disruptive
// action wins (a node that must be replaced is not helped by a reboot).
func (a Action) disruptiveness() int {
	if a == Replace {
		return 1
	}
	return 0
}

// Policy says when a node condition means the node needs repair, and what repair.
type Policy struct {
	ConditionType   corev1.NodeConditionType
	ConditionStatus corev1.ConditionStatus
	// ReasonRegex is matched against the condition's reason. Empty makes the policy
	// the set's one fallback: it applies to every condition type and status the set
	// covers when no policy of that type and status matches the reason.
	ReasonRegex string
	// Toleration is how long the condition must hold before repair.
	Toleration time.Duration
	// TerminationGracePeriod bounds the drain of a repaired node: nil inherits the
	// NodeClaim's, 0 is forceful (the kubelet cannot evict through the condition),
	// more is min(this, the NodeClaim's).
	TerminationGracePeriod *time.Duration
	// Priority (0-100) orders repairs, higher first; only the order matters.
	Priority int
	Action   Action
}

const (
	minPriority = 0
	maxPriority = 100
	// aging is how long a node waits past its toleration to earn one priority rank:
	// a node overtakes a newly eligible one a rank above it after this long, so no
	// repair starves.
	aging = 30 * time.Minute
)

type conditionKey struct {
	conditionType corev1.NodeConditionType
	status        corev1.ConditionStatus
}

type compiled struct {
	Policy
	reason *regexp.Regexp
}

// Matcher holds a validated set of policies.
type Matcher struct {
	specific map[conditionKey][]compiled
	fallback compiled
	ranks    map[int]int
}

// NewMatcher validates a cloud provider's policy set, as Karpenter does: exactly one
// fallback, which replaces; every field in range; every action one of supported.
// The error lists every problem, each naming the policy.
func NewMatcher(policies []Policy, supported sets.Set[Action]) (*Matcher, error) {
	m := &Matcher{specific: map[conditionKey][]compiled{}, ranks: denseRanks(policies)}
	var errs []error
	hasFallback := false
	for i, p := range policies {
		c, err := compile(i, p, supported)
		errs = append(errs, err)
		key := conditionKey{p.ConditionType, p.ConditionStatus}
		if p.ReasonRegex != "" {
			m.specific[key] = append(m.specific[key], c)
			continue
		}
		// The fallback's condition still counts as covered.
		if _, ok := m.specific[key]; !ok {
			m.specific[key] = nil
		}
		if hasFallback {
			errs = append(errs, fmt.Errorf("repair policy set has multiple default fallbacks: %+v and %+v", m.fallback.Policy, p))
			continue
		}
		m.fallback, hasFallback = c, true
	}
	switch {
	case !hasFallback:
		errs = append(errs, fmt.Errorf("repair policy set must define one default fallback (a policy with no reasonRegex)"))
	case m.fallback.Action != Replace:
		errs = append(errs, fmt.Errorf("default fallback policy %+v must use action %q", m.fallback.Policy, Replace))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return m, nil
}

func compile(i int, p Policy, supported sets.Set[Action]) (compiled, error) {
	c := compiled{Policy: p}
	what := fmt.Sprintf("repair policy[%d]=%+v", i, p)
	var errs []error
	if p.ConditionType == "" {
		errs = append(errs, fmt.Errorf("%s has an empty condition type", what))
	}
	if s := p.ConditionStatus; s != corev1.ConditionTrue && s != corev1.ConditionFalse && s != corev1.ConditionUnknown {
		errs = append(errs, fmt.Errorf("%s has invalid condition status %q", what, s))
	}
	if p.Toleration < 0 {
		errs = append(errs, fmt.Errorf("%s has negative toleration duration %s", what, p.Toleration))
	}
	if p.TerminationGracePeriod != nil && *p.TerminationGracePeriod < 0 {
		errs = append(errs, fmt.Errorf("%s has negative termination grace period %s", what, *p.TerminationGracePeriod))
	}
	if p.Priority < minPriority || p.Priority > maxPriority {
		errs = append(errs, fmt.Errorf("%s has priority %d outside the supported range [%d, %d]", what, p.Priority, minPriority, maxPriority))
	}
	if !supported.Has(p.Action) {
		errs = append(errs, fmt.Errorf("%s has unsupported action %q", what, p.Action))
	}
	if p.ReasonRegex != "" {
		re, err := regexp.Compile(p.ReasonRegex)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s has invalid reason regex, %w", what, err))
		}
		c.reason = re
	}
	return c, errors.Join(errs...)
}

// denseRanks maps each distinct priority to its place among them, from 0: only the
// order of priorities weighs against age.
func denseRanks(policies []Policy) map[int]int {
	priorities := sets.New[int]()
	for _, p := range policies {
		priorities.Insert(p.Priority)
	}
	sorted := sets.List(priorities)
	slices.Sort(sorted)
	ranks := make(map[int]int, len(sorted))
	for rank, p := range sorted {
		ranks[p] = rank
	}
	return ranks
}

// Match is a policy that applies to one of a node's conditions, whatever the time.
type Match struct {
	policy    compiled
	condition corev1.NodeCondition
	rank      int
	// eligibleAt is when the condition has held for the policy's toleration.
	eligibleAt time.Time
}

// Match lists the policies that apply to the node's conditions: for each covered
// condition, the policies of its type and status whose reason pattern matches, or
// the fallback when none does (even while those that match still wait).
func (m *Matcher) Match(node *corev1.Node) []Match {
	var out []Match
	for _, c := range node.Status.Conditions {
		specific, covered := m.specific[conditionKey{c.Type, c.Status}]
		if !covered {
			continue
		}
		// A condition cannot predate its node; this also bounds a condition that
		// carries no transition time.
		since := c.LastTransitionTime.UTC()
		if created := node.CreationTimestamp.UTC(); since.Before(created) {
			since = created
		}
		condition := corev1.NodeCondition{Type: c.Type, Status: c.Status, Reason: c.Reason}
		matched := false
		for _, p := range specific {
			if p.reason.MatchString(c.Reason) {
				matched = true
				out = append(out, m.match(p, condition, since))
			}
		}
		if !matched {
			out = append(out, m.match(m.fallback, condition, since))
		}
	}
	return out
}

func (m *Matcher) match(p compiled, condition corev1.NodeCondition, since time.Time) Match {
	return Match{policy: p, condition: condition, rank: m.ranks[p.Priority], eligibleAt: since.Add(p.Toleration)}
}

// Covers reports whether some policy covers the condition's type and status,
// whatever its reason and age: what the unhealthy share of a pool counts.
func (m *Matcher) Covers(c corev1.NodeCondition) bool {
	_, ok := m.specific[conditionKey{c.Type, c.Status}]
	return ok
}

// Result is a node's repair at one moment, merged from its eligible policies.
type Result struct {
	// Action is empty when no policy is eligible yet.
	Action Action
	// Condition, Status, Reason, ReasonRegex, Fallback and EligibleAt say which
	// policy chose the action.
	Condition   corev1.NodeConditionType
	Status      corev1.ConditionStatus
	Reason      string
	ReasonRegex string
	Fallback    bool
	EligibleAt  time.Time
	// TerminationGracePeriod is the shortest drain bound of the eligible policies;
	// TerminationGracePeriodCondition the condition whose policy set it.
	TerminationGracePeriod          *time.Duration
	TerminationGracePeriodCondition corev1.NodeConditionType

	priority        int
	boundEligibleAt time.Time
	scoreRank       int
	scoreEligibleAt time.Time
}

// Resolve merges the matches eligible at now, measuring each toleration from no
// earlier than notBefore (the end of the node's last reboot: a condition a reboot
// left behind is tolerated afresh).
func Resolve(matches []Match, now, notBefore time.Time) Result {
	var r Result
	for _, m := range matches {
		eligibleAt := m.eligibleAt
		if earliest := notBefore.Add(m.policy.Toleration); eligibleAt.Before(earliest) {
			eligibleAt = earliest
		}
		if eligibleAt.After(now) {
			continue
		}
		r.merge(m, eligibleAt, now)
	}
	return r
}

// ScoreAt is how urgent the repair is at now: the highest rank + age/aging over the
// eligible policies, 0 when none is. Scoring every node at one time keeps nodes of
// equal rank and age tied however far apart they were resolved.
func (r Result) ScoreAt(now time.Time) float64 {
	if r.Action == "" {
		return 0
	}
	return score(r.scoreRank, r.scoreEligibleAt, now)
}

func score(rank int, eligibleAt, now time.Time) float64 {
	return float64(rank) + now.Sub(eligibleAt).Minutes()/aging.Minutes()
}

func (r *Result) merge(m Match, eligibleAt, now time.Time) {
	p, c := m.policy, m.condition
	first := r.Action == ""
	// Every policy's score grows at the same rate, so the one scoring highest now
	// stays the highest: keeping it is enough for ScoreAt at any later time.
	if first || score(m.rank, eligibleAt, now) > r.ScoreAt(now) {
		r.scoreRank, r.scoreEligibleAt = m.rank, eligibleAt
	}
	if p.TerminationGracePeriod != nil && r.shorterBound(*p.TerminationGracePeriod, c.Type, eligibleAt) {
		r.TerminationGracePeriod, r.TerminationGracePeriodCondition, r.boundEligibleAt = p.TerminationGracePeriod, c.Type, eligibleAt
	}
	// The more disruptive action wins; between policies of one action, the higher
	// priority, then the earlier eligible, then the lower condition type, so the
	// order of the node's conditions does not matter.
	selected := first || p.Action.disruptiveness() > r.Action.disruptiveness()
	if p.Action == r.Action {
		switch {
		case p.Priority != r.priority:
			selected = p.Priority > r.priority
		case !eligibleAt.Equal(r.EligibleAt):
			selected = eligibleAt.Before(r.EligibleAt)
		default:
			selected = c.Type < r.Condition
		}
	}
	if selected {
		r.Action, r.Condition, r.Status, r.Reason = p.Action, c.Type, c.Status, c.Reason
		r.ReasonRegex, r.Fallback, r.EligibleAt, r.priority = p.ReasonRegex, p.ReasonRegex == "", eligibleAt, p.Priority
	}
}

// shorterBound reports whether bound replaces the drain bound kept so far; of equal
// bounds the earliest eligible condition, then the lowest type, is named.
func (r *Result) shorterBound(bound time.Duration, condition corev1.NodeConditionType, eligibleAt time.Time) bool {
	switch {
	case r.TerminationGracePeriod == nil:
		return true
	case bound != *r.TerminationGracePeriod:
		return bound < *r.TerminationGracePeriod
	case !eligibleAt.Equal(r.boundEligibleAt):
		return eligibleAt.Before(r.boundEligibleAt)
	default:
		return condition < r.TerminationGracePeriodCondition
	}
}

// LogValues are the decision as log key/value pairs.
func (r Result) LogValues() []any {
	out := []any{"condition", r.Condition, "status", r.Status, "reason", r.Reason, "reason-regex", r.ReasonRegex,
		"fallback", r.Fallback, "action", r.Action, "eligible-at", r.EligibleAt}
	if r.TerminationGracePeriod != nil {
		out = append(out, "termination-grace-period", *r.TerminationGracePeriod, "termination-grace-period-condition", r.TerminationGracePeriodCondition)
	}
	return out
}

// DrainBound is how long a repaired node's drain may take, stamped on its claim
// just before it is deleted: nil when the policy sets no bound (the claim's own
// terminationGracePeriod holds, as for any disruption), else the shorter of the
// policy's and the claim's.
func DrainBound(r Result, claimTGP *time.Duration) *time.Duration {
	if r.TerminationGracePeriod == nil {
		return nil
	}
	bound := *r.TerminationGracePeriod
	if claimTGP != nil && *claimTGP < bound {
		bound = *claimTGP
	}
	return &bound
}

// unhealthyShare is the share of a pool's nodes (rounded up, so one unhealthy node
// never stops a small pool) that may be unhealthy for repair in it to go on: beyond,
// the cause is likelier the pool's (a bad image, a zone outage) than the nodes'.
var unhealthyShare = intstr.FromString("20%")

// TrippedPools are the pools with more unhealthy nodes than the share allows. A
// node counts as unhealthy as soon as a policy covers one of its conditions,
// whatever the reason and however recent.
func (m *Matcher) TrippedPools(nodes []corev1.Node, poolOf func(*corev1.Node) string) sets.Set[string] {
	total, unhealthy := map[string]int{}, map[string]int{}
	for i := range nodes {
		pool := poolOf(&nodes[i])
		if pool == "" {
			continue
		}
		total[pool]++
		if slices.ContainsFunc(nodes[i].Status.Conditions, m.Covers) {
			unhealthy[pool]++
		}
	}
	out := sets.New[string]()
	for pool, n := range total {
		if allowed, _ := intstr.GetScaledValueFromIntOrPercent(&unhealthyShare, n, true); unhealthy[pool] > allowed {
			out.Insert(pool)
		}
	}
	return out
}
