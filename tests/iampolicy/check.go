package iampolicy

import (
	"fmt"
	"sort"
	"strings"
	"testing"
)

// Report is the outcome of checking recorded calls against a policy.
type Report struct {
	// Calls counts the calls per operation ("EC2 CreateFleet"), Requests the
	// authorization requests per action ("ec2:CreateFleet").
	Calls    map[string]int
	Requests map[string]int
	// Denied are the denied requests, alike ones grouped.
	Denied []Denial
	// Unchecked are the calls that could not be turned into requests.
	Unchecked []Call
}

// Denial is a group of alike denied requests: same action, resource kind and reason.
type Denial struct {
	Call    string
	Example Request
	Why     string
	Count   int
}

func (d Denial) String() string {
	keys := make([]string, 0, len(d.Example.Context))
	for k := range d.Example.Context {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var ctx []string
	for _, k := range keys {
		ctx = append(ctx, fmt.Sprintf("%s=%q", k, d.Example.Context[k]))
	}
	return fmt.Sprintf("%s denied %d time(s) in %s; e.g. on %s with {%s}: %s",
		d.Example.Action, d.Count, d.Call, d.Example.Resource, strings.Join(ctx, ", "), d.Why)
}

// Evaluate checks every recorded call against the policy document.
func Evaluate(policyJSON string, calls []Call) (*Report, error) {
	p, err := Parse(policyJSON)
	if err != nil {
		return nil, err
	}
	rep := &Report{Calls: map[string]int{}, Requests: map[string]int{}}
	groups := map[string]*Denial{}
	var order []string
	for _, c := range calls {
		rep.Calls[c.String()]++
		if c.Err != nil {
			rep.Unchecked = append(rep.Unchecked, c)
			continue
		}
		for _, r := range c.Requests {
			rep.Requests[r.Action]++
			d := p.Evaluate(r)
			if d.Allowed {
				continue
			}
			why := explain(d)
			key := strings.Join([]string{c.String(), r.Action, resourceKind(r.Resource), why}, "\x00")
			g, ok := groups[key]
			if !ok {
				g = &Denial{Call: c.String(), Example: r, Why: why}
				groups[key] = g
				order = append(order, key)
			}
			g.Count++
		}
	}
	for _, k := range order {
		rep.Denied = append(rep.Denied, *groups[k])
	}
	return rep, nil
}

func explain(d Decision) string {
	if d.By != "" {
		return "explicitly denied by " + d.By
	}
	if len(d.Misses) == 0 {
		return "no statement allows this action on this resource"
	}
	var parts []string
	for _, m := range d.Misses {
		parts = append(parts, m.Sid+" needs "+strings.Join(m.Failed, " and "))
	}
	return strings.Join(parts, "; ")
}

// resourceKind is an ARN without the id of its resource, so denials of the same
// kind of resource group together.
func resourceKind(arn string) string {
	if i := strings.LastIndex(arn, "/"); i >= 0 {
		return arn[:i]
	}
	return arn
}

// Summary lists the requests checked per action.
func (r *Report) Summary() string {
	actions := sortedKeys(r.Requests)
	total := 0
	parts := make([]string, 0, len(actions))
	for _, a := range actions {
		total += r.Requests[a]
		parts = append(parts, fmt.Sprintf("%s %d", a, r.Requests[a]))
	}
	calls := 0
	var ops []string
	for _, op := range sortedKeys(r.Calls) {
		calls += r.Calls[op]
		ops = append(ops, fmt.Sprintf("%s %d", op, r.Calls[op]))
	}
	return fmt.Sprintf("%d AWS calls (%s), %d authorization requests checked against the policy (%d denied groups, %d unchecked calls): %s",
		calls, strings.Join(ops, ", "), total, len(r.Denied), len(r.Unchecked), strings.Join(parts, ", "))
}

// Check fails the test for every call the policy denies, naming the action, the
// resource and the condition keys that mattered, and for every call that could not
// be checked; it logs how many requests of each action were checked.
func Check(t testing.TB, policyJSON string, rec *Recorder) *Report {
	t.Helper()
	rep, err := Evaluate(policyJSON, rec.Calls())
	if err != nil {
		t.Errorf("checking AWS calls against the IAM policy: %v", err)
		return nil
	}
	t.Logf("IAM: %s", rep.Summary())
	unchecked := map[string]int{}
	var order []string
	for _, c := range rep.Unchecked {
		why := c.String() + ": " + c.Err.Error()
		if unchecked[why] == 0 {
			order = append(order, why)
		}
		unchecked[why]++
	}
	for _, why := range order {
		t.Errorf("IAM: %d call(s) not checked against the policy: %s", unchecked[why], why)
	}
	for _, d := range rep.Denied {
		t.Errorf("IAM: the shipped controller policy denies a call the controller made: %s", d)
	}
	return rep
}
