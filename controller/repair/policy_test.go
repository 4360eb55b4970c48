package repair

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
)

var (
	both         = sets.New(Replace, Reboot)
	fallback     = Policy{ConditionType: "AcceleratorReady", ConditionStatus: corev1.ConditionFalse, Toleration: 30 * time.Minute, Action: Replace}
	rebootXID    = Policy{ConditionType: "AcceleratorReady", ConditionStatus: corev1.ConditionFalse, ReasonRegex: `^NvidiaXID(48|63|95)Error$`, Toleration: 10 * time.Minute, Action: Reboot}
	t0           = time.Date(2026, time.September, 1, 12, 0, 0, 0, time.UTC)
	minutes      = func(n int) time.Duration { return time.Duration(n) * time.Minute }
	durationOf   = func(d time.Duration) *time.Duration { return &d }
	conditionNow = corev1.NodeCondition{Type: "AcceleratorReady", Status: corev1.ConditionFalse, Reason: "NvidiaXID48Error", LastTransitionTime: metav1.NewTime(t0)}
)

func mustMatcher(t *testing.T, policies ...Policy) *Matcher {
	t.Helper()
	m, err := NewMatcher(policies, both)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func evaluate(m *Matcher, now time.Time, conditions ...corev1.NodeCondition) Result {
	return Resolve(m.Match(&corev1.Node{Status: corev1.NodeStatus{Conditions: conditions}}), now, time.Time{})
}

// Karpenter v1.15's "validating complete policy sets" table.
func TestPolicySetValidation(t *testing.T) {
	for _, tc := range []struct {
		name      string
		policies  []Policy
		supported sets.Set[Action]
		want      string
	}{
		{"accepts valid policies", []Policy{rebootXID, fallback}, both, ""},
		{"accepts every Kubernetes condition status", []Policy{
			{ConditionType: "ConditionTrue", ConditionStatus: corev1.ConditionTrue, Action: Replace},
			{ConditionType: "ConditionFalse", ConditionStatus: corev1.ConditionFalse, ReasonRegex: ".*", Action: Replace},
			{ConditionType: "ConditionUnknown", ConditionStatus: corev1.ConditionUnknown, ReasonRegex: ".*", Action: Replace}}, both, ""},
		{"rejects an empty condition type", []Policy{{ConditionStatus: corev1.ConditionFalse, Action: Replace}}, both, "empty condition type"},
		{"rejects an invalid condition status", []Policy{{ConditionType: "AcceleratorReady", Action: Replace}}, both, "invalid condition status"},
		{"rejects an invalid reason regex", []Policy{{ConditionType: "AcceleratorReady", ConditionStatus: corev1.ConditionFalse, ReasonRegex: "[", Action: Reboot}, fallback}, both, "invalid reason regex"},
		{"rejects an unsupported action", []Policy{rebootXID, fallback}, sets.New(Replace), `unsupported action "RebootNode"`},
		{"rejects a negative toleration", []Policy{{ConditionType: "AcceleratorReady", ConditionStatus: corev1.ConditionFalse, Toleration: -time.Second, Action: Replace}}, both, "negative toleration duration"},
		{"rejects a negative termination grace period", []Policy{{ConditionType: "AcceleratorReady", ConditionStatus: corev1.ConditionFalse, TerminationGracePeriod: durationOf(-time.Second), Action: Replace}}, both, "negative termination grace period"},
		{"rejects a negative priority", []Policy{{ConditionType: "AcceleratorReady", ConditionStatus: corev1.ConditionFalse, Priority: -1, Action: Replace}}, both, "priority -1 outside the supported range [0, 100]"},
		{"rejects a priority above the supported range", []Policy{{ConditionType: "AcceleratorReady", ConditionStatus: corev1.ConditionFalse, Priority: 101, Action: Replace}}, both, "priority 101 outside the supported range [0, 100]"},
		{"rejects a missing default fallback", []Policy{rebootXID}, both, "must define one default fallback"},
		{"rejects multiple default fallbacks", []Policy{fallback, {ConditionType: "StorageReady", ConditionStatus: corev1.ConditionFalse, Action: Replace}}, both, "multiple default fallbacks"},
		{"requires a replacement default fallback", []Policy{{ConditionType: "AcceleratorReady", ConditionStatus: corev1.ConditionFalse, Action: Reboot}}, both, "default fallback policy"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewMatcher(tc.policies, tc.supported)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("error %v, want one saying %q", err, tc.want)
			}
		})
	}
	// includes the complete policy in validation errors
	_, err := NewMatcher([]Policy{{ConditionType: "AcceleratorReady", ConditionStatus: corev1.ConditionFalse, ReasonRegex: "[", Priority: 17, Action: Reboot}, fallback}, both)
	for _, want := range []string{"ConditionType:AcceleratorReady", "ReasonRegex:[", "Priority:17"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v does not name the policy (%s)", err, want)
		}
	}
}

// Karpenter v1.15's "Matching" context.
func TestMatching(t *testing.T) {
	xid := mustMatcher(t,
		Policy{ConditionType: "AcceleratorReady", ConditionStatus: corev1.ConditionFalse, ReasonRegex: `XID(48|63)`, Toleration: minutes(10), Action: Reboot},
		Policy{ConditionType: "AcceleratorReady", ConditionStatus: corev1.ConditionFalse, ReasonRegex: `48Error$`, Toleration: minutes(30), Action: Replace},
		Policy{ConditionType: "AcceleratorReady", ConditionStatus: corev1.ConditionFalse, Action: Replace})

	t.Run("suppresses an eligible fallback while specific policies are waiting", func(t *testing.T) {
		if a := evaluate(xid, t0.Add(minutes(5)), conditionNow).Action; a != "" {
			t.Errorf("at 5m: %q, want nothing yet", a)
		}
		if a := evaluate(xid, t0.Add(minutes(10)), conditionNow).Action; a != Reboot {
			t.Errorf("at 10m: %q, want a reboot", a)
		}
	})
	t.Run("merges eligible policies into a single result", func(t *testing.T) {
		r := evaluate(xid, t0.Add(minutes(15)), conditionNow)
		if r.Action != Reboot || r.Condition != "AcceleratorReady" || r.Status != corev1.ConditionFalse || r.Reason != "NvidiaXID48Error" ||
			r.ReasonRegex != `XID(48|63)` || r.Fallback || !r.EligibleAt.Equal(t0.Add(minutes(10))) {
			t.Errorf("at 15m: %+v", r)
		}
		r = evaluate(xid, t0.Add(minutes(35)), conditionNow)
		if r.Action != Replace || r.ReasonRegex != `48Error$` || r.Fallback || !r.EligibleAt.Equal(t0.Add(minutes(30))) {
			t.Errorf("at 35m: %+v", r)
		}
		if s := r.ScoreAt(t0.Add(minutes(35))); fmt.Sprintf("%.4f", s) != fmt.Sprintf("%.4f", 25.0/30.0) {
			t.Errorf("score %v, want 25/30", s)
		}
	})
	t.Run("retains the earliest eligibility across same-action policies", func(t *testing.T) {
		policies := []Policy{
			{ConditionType: "AcceleratorReady", ConditionStatus: corev1.ConditionFalse, ReasonRegex: "XID48", Toleration: minutes(20), Action: Replace},
			{ConditionType: "AcceleratorReady", ConditionStatus: corev1.ConditionFalse, ReasonRegex: "48Error", Toleration: minutes(10), Action: Replace},
			{ConditionType: "AcceleratorReady", ConditionStatus: corev1.ConditionFalse, Action: Replace}}
		for _, ordered := range [][]Policy{policies, reversed(policies)} {
			if r := evaluate(mustMatcher(t, ordered...), t0.Add(minutes(25)), conditionNow); r.Action != Replace || !r.EligibleAt.Equal(t0.Add(minutes(10))) {
				t.Errorf("%+v", r)
			}
		}
	})
	t.Run("selects the shortest termination grace period across eligible actions", func(t *testing.T) {
		policies := []Policy{
			{ConditionType: "AcceleratorReady", ConditionStatus: corev1.ConditionFalse, ReasonRegex: "XID48", TerminationGracePeriod: durationOf(minutes(15)), Action: Replace},
			{ConditionType: "AcceleratorReady", ConditionStatus: corev1.ConditionFalse, ReasonRegex: "48Error", TerminationGracePeriod: durationOf(minutes(5)), Action: Reboot},
			{ConditionType: "AcceleratorReady", ConditionStatus: corev1.ConditionFalse, Action: Replace}}
		for _, ordered := range [][]Policy{policies, reversed(policies)} {
			r := evaluate(mustMatcher(t, ordered...), t0, conditionNow)
			if r.Action != Replace || r.TerminationGracePeriod == nil || *r.TerminationGracePeriod != minutes(5) {
				t.Errorf("%+v", r)
			}
		}
	})
	t.Run("uses the default fallback across supported conditions", func(t *testing.T) {
		m := mustMatcher(t, fallback, Policy{ConditionType: "StorageReady", ConditionStatus: corev1.ConditionFalse, ReasonRegex: "^KnownStorageFailure$", Action: Reboot})
		storage := conditionNow
		storage.Type, storage.Reason = "StorageReady", "NewStorageFailure"
		r := evaluate(m, t0.Add(minutes(31)), storage)
		if r.Action != Replace || r.Condition != "StorageReady" || r.Reason != "NewStorageFailure" || r.ReasonRegex != "" || !r.Fallback || !r.EligibleAt.Equal(t0.Add(minutes(30))) {
			t.Errorf("%+v", r)
		}
	})
	t.Run("treats a non-empty match-all expression as a specific policy", func(t *testing.T) {
		m := mustMatcher(t, Policy{ConditionType: "AcceleratorReady", ConditionStatus: corev1.ConditionFalse, ReasonRegex: ".*", Action: Reboot},
			Policy{ConditionType: "AcceleratorReady", ConditionStatus: corev1.ConditionFalse, Action: Replace})
		if a := evaluate(m, t0, conditionNow).Action; a != Reboot {
			t.Errorf("%q, want a reboot", a)
		}
	})
	t.Run("does not match a different condition type or status", func(t *testing.T) {
		otherType, otherStatus := conditionNow, conditionNow
		otherType.Type, otherStatus.Status = "DifferentCondition", corev1.ConditionTrue
		if a := evaluate(xid, t0.Add(time.Hour), otherType).Action + evaluate(xid, t0.Add(time.Hour), otherStatus).Action; a != "" {
			t.Errorf("%q", a)
		}
	})
	priorities := func(low, high Policy) *Matcher {
		return mustMatcher(t, low, high, Policy{ConditionType: "Fallback", ConditionStatus: corev1.ConditionFalse, Action: Replace})
	}
	since := func(conditionType string, reason string, ago time.Duration) corev1.NodeCondition {
		return corev1.NodeCondition{Type: corev1.NodeConditionType(conditionType), Status: corev1.ConditionFalse, Reason: reason, LastTransitionTime: metav1.NewTime(t0.Add(-ago))}
	}
	t.Run("scores a node using its most urgent eligible policy", func(t *testing.T) {
		m := priorities(Policy{ConditionType: "LowPriority", ConditionStatus: corev1.ConditionFalse, ReasonRegex: ".*", Toleration: minutes(30), Priority: 10, Action: Replace},
			Policy{ConditionType: "HighPriority", ConditionStatus: corev1.ConditionFalse, ReasonRegex: ".*", Toleration: minutes(30), Priority: 90, Action: Replace})
		r := evaluate(m, t0, since("LowPriority", "", minutes(180)), since("HighPriority", "", minutes(45)))
		if r.ScoreAt(t0) != 6 || r.Action != Replace || r.Condition != "HighPriority" {
			t.Errorf("score %v, %+v; want 6 from LowPriority's age (rank 1 + 150m/30m), the action from HighPriority", r.ScoreAt(t0), r)
		}
	})
	t.Run("merges score, action, condition, eligibility, and TGP across conditions", func(t *testing.T) {
		m := priorities(Policy{ConditionType: "HighPriority", ConditionStatus: corev1.ConditionFalse, ReasonRegex: ".*", Toleration: minutes(30), Priority: 90, TerminationGracePeriod: durationOf(minutes(5)), Action: Reboot},
			Policy{ConditionType: "LowPriority", ConditionStatus: corev1.ConditionFalse, ReasonRegex: ".*", Toleration: minutes(30), Priority: 10, TerminationGracePeriod: durationOf(minutes(15)), Action: Replace})
		high, low := since("HighPriority", "HighPriorityFailure", minutes(180)), since("LowPriority", "LowPriorityFailure", minutes(45))
		for _, conditions := range [][]corev1.NodeCondition{{high, low}, {low, high}} {
			r := evaluate(m, t0, conditions...)
			if r.ScoreAt(t0) != 7 || r.Action != Replace || r.Condition != "LowPriority" || r.Reason != "LowPriorityFailure" || r.ReasonRegex != ".*" || r.Fallback ||
				!r.EligibleAt.Equal(t0.Add(-minutes(15))) || r.TerminationGracePeriod == nil || *r.TerminationGracePeriod != minutes(5) || r.TerminationGracePeriodCondition != "HighPriority" {
				t.Errorf("score %v, %+v", r.ScoreAt(t0), r)
			}
		}
	})
	t.Run("uses earliest eligibility, then condition type, to attribute equal termination grace periods", func(t *testing.T) {
		five := durationOf(minutes(5))
		m := mustMatcher(t, Policy{ConditionType: "ConditionA", ConditionStatus: corev1.ConditionFalse, ReasonRegex: ".*", TerminationGracePeriod: five, Action: Replace},
			Policy{ConditionType: "ConditionB", ConditionStatus: corev1.ConditionFalse, ReasonRegex: ".*", TerminationGracePeriod: five, Action: Replace},
			Policy{ConditionType: "ConditionC", ConditionStatus: corev1.ConditionFalse, ReasonRegex: ".*", TerminationGracePeriod: five, Action: Replace},
			Policy{ConditionType: "Fallback", ConditionStatus: corev1.ConditionFalse, Action: Replace})
		a, b, c := since("ConditionA", "", 0), since("ConditionB", "", time.Minute), since("ConditionC", "", time.Minute)
		for _, conditions := range [][]corev1.NodeCondition{{a, b, c}, {c, b, a}} {
			if got := evaluate(m, t0, conditions...).TerminationGracePeriodCondition; got != "ConditionB" {
				t.Errorf("bound set by %s, want ConditionB", got)
			}
		}
	})
	t.Run("uses earliest eligibility to break equal-priority condition ties", func(t *testing.T) {
		m := priorities(Policy{ConditionType: "Earlier", ConditionStatus: corev1.ConditionFalse, ReasonRegex: ".*", Toleration: minutes(20), Priority: 50, Action: Replace},
			Policy{ConditionType: "Later", ConditionStatus: corev1.ConditionFalse, ReasonRegex: ".*", Toleration: minutes(10), Priority: 50, Action: Replace})
		earlier, later := since("Earlier", "", minutes(40)), since("Later", "", minutes(15))
		for _, conditions := range [][]corev1.NodeCondition{{earlier, later}, {later, earlier}} {
			if got := evaluate(m, t0, conditions...).Condition; got != "Earlier" {
				t.Errorf("%s, want Earlier", got)
			}
		}
	})
	t.Run("uses condition type to break complete policy ties", func(t *testing.T) {
		m := priorities(Policy{ConditionType: "ConditionA", ConditionStatus: corev1.ConditionFalse, ReasonRegex: ".*", Priority: 50, Action: Replace},
			Policy{ConditionType: "ConditionB", ConditionStatus: corev1.ConditionFalse, ReasonRegex: ".*", Priority: 50, Action: Replace})
		a, b := since("ConditionA", "", 0), since("ConditionB", "", 0)
		for _, conditions := range [][]corev1.NodeCondition{{a, b}, {b, a}} {
			if got := evaluate(m, t0, conditions...).Condition; got != "ConditionA" {
				t.Errorf("%s, want ConditionA", got)
			}
		}
	})
	t.Run("does not treat a missing transition time as predating the Node", func(t *testing.T) {
		c := conditionNow
		c.LastTransitionTime = metav1.Time{}
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: metav1.NewTime(t0)}, Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{c}}}
		if a := Resolve(xid.Match(node), t0.Add(minutes(9)), time.Time{}).Action; a != "" {
			t.Errorf("at 9m: %q", a)
		}
		if r := Resolve(xid.Match(node), t0.Add(minutes(10)), time.Time{}); r.Action != Reboot || !r.EligibleAt.Equal(t0.Add(minutes(10))) {
			t.Errorf("at 10m: %+v", r)
		}
	})
	t.Run("reconstructs eligibility from the current condition after restart", func(t *testing.T) {
		policies := []Policy{{ConditionType: "AcceleratorReady", ConditionStatus: corev1.ConditionFalse, ReasonRegex: "^ImmediateReason$", Toleration: minutes(30), Action: Replace},
			{ConditionType: "AcceleratorReady", ConditionStatus: corev1.ConditionFalse, Toleration: 2 * time.Hour, Action: Replace}}
		c := since("AcceleratorReady", "UnknownReason", time.Hour)
		if a := evaluate(mustMatcher(t, policies...), t0, c).Action; a != "" {
			t.Errorf("unknown reason after 1h: %q, want the fallback's 2h toleration", a)
		}
		c.Reason = "ImmediateReason"
		if r := evaluate(mustMatcher(t, policies...), t0, c); r.Action != Replace || !r.EligibleAt.Equal(t0.Add(-minutes(30))) {
			t.Errorf("%+v", r)
		}
	})
}

func reversed(p []Policy) []Policy {
	out := slices.Clone(p)
	slices.Reverse(out)
	return out
}

func TestRanksTolerationAndLogs(t *testing.T) {
	epoch := time.Unix(0, 0)
	onCondition := func(reason string) *corev1.Node {
		return &corev1.Node{Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: "AcceleratorReady", Status: corev1.ConditionFalse, Reason: reason, LastTransitionTime: metav1.NewTime(epoch)}}}}
	}
	t.Run("ranks a fallback-matched condition by the fallback's priority", func(t *testing.T) {
		m := mustMatcher(t, Policy{ConditionType: "AcceleratorReady", ConditionStatus: corev1.ConditionFalse, Toleration: time.Minute, Priority: 10, Action: Replace},
			Policy{ConditionType: "AcceleratorReady", ConditionStatus: corev1.ConditionFalse, ReasonRegex: "^XID$", Toleration: time.Minute, Priority: 0, Action: Replace})
		now := epoch.Add(time.Hour)
		if other, specific := Resolve(m.Match(onCondition("Other")), now, time.Time{}).ScoreAt(now), Resolve(m.Match(onCondition("XID")), now, time.Time{}).ScoreAt(now); other <= specific {
			t.Errorf("fallback-matched %v, not above the specific match's %v", other, specific)
		}
	})
	t.Run("describes a decision with the condition that set its drain bound", func(t *testing.T) {
		m := mustMatcher(t, Policy{ConditionType: "AcceleratorReady", ConditionStatus: corev1.ConditionFalse, Toleration: time.Minute, TerminationGracePeriod: durationOf(time.Minute), Action: Replace})
		got := fmt.Sprint(Resolve(m.Match(onCondition("")), epoch.Add(time.Hour), time.Time{}).LogValues())
		for _, want := range []string{"action ReplaceNode", "termination-grace-period 1m0s", "termination-grace-period-condition AcceleratorReady"} {
			if !strings.Contains(got, want) {
				t.Errorf("%s lacks %q", got, want)
			}
		}
	})
	t.Run("measures toleration from no earlier than notBefore", func(t *testing.T) {
		m := mustMatcher(t, Policy{ConditionType: "AcceleratorReady", ConditionStatus: corev1.ConditionFalse, Toleration: minutes(10), Action: Replace})
		matches := m.Match(onCondition(""))
		notBefore := epoch.Add(time.Hour)
		if a := Resolve(matches, notBefore.Add(minutes(9)), notBefore).Action; a != "" {
			t.Errorf("9m after the reboot: %q", a)
		}
		if r := Resolve(matches, notBefore.Add(minutes(10)), notBefore); r.Action != Replace || !r.EligibleAt.Equal(notBefore.Add(minutes(10))) {
			t.Errorf("%+v", r)
		}
	})
}

func TestDrainBound(t *testing.T) {
	for _, tc := range []struct {
		policy, claim, want *time.Duration
	}{
		{nil, durationOf(time.Hour), nil},
		{durationOf(minutes(10)), nil, durationOf(minutes(10))},
		{durationOf(minutes(10)), durationOf(minutes(5)), durationOf(minutes(5))},
		{durationOf(minutes(10)), durationOf(time.Hour), durationOf(minutes(10))},
		{durationOf(0), durationOf(time.Hour), durationOf(0)},
	} {
		got := DrainBound(Result{TerminationGracePeriod: tc.policy}, tc.claim)
		if (got == nil) != (tc.want == nil) || got != nil && *got != *tc.want {
			t.Errorf("policy %v, claim %v: %v, want %v", tc.policy, tc.claim, got, tc.want)
		}
	}
}

// A pool stops repairs with more than 20% of its nodes (rounded up) unhealthy.
func TestTrippedPools(t *testing.T) {
	m := mustMatcher(t, Policy{ConditionType: corev1.NodeReady, ConditionStatus: corev1.ConditionFalse, Toleration: minutes(30), Action: Replace})
	var nodes []corev1.Node
	add := func(pool string, healthy, unhealthy int) {
		for i := range healthy + unhealthy {
			status := corev1.ConditionTrue
			if i < unhealthy {
				status = corev1.ConditionFalse
			}
			nodes = append(nodes, corev1.Node{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"pool": pool}},
				Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: status, LastTransitionTime: metav1.NewTime(t0)}}}})
		}
	}
	add("small", 2, 1)    // 1 of 3: 20% rounds up to 1
	add("tripped", 7, 3)  // 3 of 10: over 2
	add("at-limit", 8, 2) // 2 of 10
	add("", 0, 5)         // no pool: not counted
	got := m.TrippedPools(nodes, func(n *corev1.Node) string { return n.Labels["pool"] })
	if !got.Equal(sets.New("tripped")) {
		t.Errorf("tripped %v, want [tripped]", sets.List(got))
	}
}
