// Package iampolicy checks the controller's AWS calls against the IAM policy Dovetail
// ships: an evaluator of identity-based policies (Action, Resource and Condition, with
// explicit deny and default deny), a recorder that turns each SDK call into the
// authorization requests AWS makes for it, and a test helper that fails on a denied
// call. The emulator enforces no IAM, so without this a policy that refuses the
// controller's first launch on real AWS passes every test.
//
// No well-kept Go library evaluates IAM policies (the maintained ones only parse
// them), so the evaluator is small and covers what identity policies for the
// controller use: the string, ARN, Bool, Numeric and Null operators, IfExists, and
// the ForAnyValue / ForAllValues set qualifiers. Anything else is refused at parse
// time rather than guessed at.
package iampolicy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// Policy is a parsed identity-based policy document.
type Policy struct {
	Statements []Statement
}

// Statement is one statement of a policy.
type Statement struct {
	Sid    string
	Effect string // "Allow" or "Deny"
	// Actions are the Action patterns, or the NotAction ones when NotAction is set.
	Actions   []string
	NotAction bool
	// Resources are the Resource patterns, or the NotResource ones when NotResource is set.
	Resources   []string
	NotResource bool
	Conditions  []Condition
}

// Condition is one key of one condition operator: all of a statement's conditions
// must hold (AND); the values of one condition are alternatives (OR).
type Condition struct {
	// Operator is as written, e.g. "ForAllValues:StringEqualsIfExists".
	Operator string
	Key      string
	Values   []string

	set      string // "", "ForAnyValue" or "ForAllValues"
	base     string // the operator without qualifier and IfExists
	ifExists bool
}

// operators maps each supported operator to whether it is a negated one: a negated
// operator holds when no policy value matches, and on a missing key.
var operators = map[string]bool{
	"StringEquals": false, "StringNotEquals": true,
	"StringEqualsIgnoreCase": false, "StringNotEqualsIgnoreCase": true,
	"StringLike": false, "StringNotLike": true,
	"ArnEquals": false, "ArnNotEquals": true, "ArnLike": false, "ArnNotLike": true,
	"Bool":          false,
	"NumericEquals": false, "NumericNotEquals": true, "NumericLessThan": false, "NumericLessThanEquals": false,
	"NumericGreaterThan": false, "NumericGreaterThanEquals": false,
	"Null": false,
}

// positiveOf is the operator a negated one negates.
var positiveOf = map[string]string{
	"StringNotEquals": "StringEquals", "StringNotEqualsIgnoreCase": "StringEqualsIgnoreCase", "StringNotLike": "StringLike",
	"ArnNotEquals": "ArnEquals", "ArnNotLike": "ArnLike", "NumericNotEquals": "NumericEquals",
}

// Parse reads a policy document: Statement as one object or an array; Action,
// NotAction, Resource and NotResource as a string or an array; condition values as
// strings, booleans or numbers, alone or in arrays.
func Parse(doc string) (*Policy, error) {
	var raw struct {
		Version   string          `json:"Version"`
		Statement json.RawMessage `json:"Statement"`
	}
	dec := json.NewDecoder(strings.NewReader(doc))
	dec.UseNumber()
	if err := dec.Decode(&raw); err != nil {
		return nil, fmt.Errorf("parsing the policy document, %w", err)
	}
	if len(raw.Statement) == 0 {
		return nil, fmt.Errorf("the policy document has no Statement")
	}
	var rawStatements []json.RawMessage
	if trimmed := bytes.TrimSpace(raw.Statement); len(trimmed) > 0 && trimmed[0] == '[' {
		if err := json.Unmarshal(raw.Statement, &rawStatements); err != nil {
			return nil, fmt.Errorf("parsing Statement, %w", err)
		}
	} else {
		rawStatements = []json.RawMessage{raw.Statement}
	}
	p := &Policy{}
	for i, rs := range rawStatements {
		s, err := parseStatement(rs)
		if err != nil {
			return nil, fmt.Errorf("statement %d, %w", i, err)
		}
		p.Statements = append(p.Statements, s)
	}
	return p, nil
}

func parseStatement(raw json.RawMessage) (Statement, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		return Statement{}, err
	}
	var s Statement
	for name := range fields {
		switch name {
		case "Sid", "Effect", "Action", "NotAction", "Resource", "NotResource", "Condition":
		case "Principal", "NotPrincipal":
			return s, fmt.Errorf("%s has no place in an identity-based policy", name)
		default:
			return s, fmt.Errorf("unknown element %q", name)
		}
	}
	if v, ok := fields["Sid"]; ok {
		if err := json.Unmarshal(v, &s.Sid); err != nil {
			return s, fmt.Errorf("Sid, %w", err)
		}
	}
	if err := json.Unmarshal(fields["Effect"], &s.Effect); err != nil || (s.Effect != "Allow" && s.Effect != "Deny") {
		return s, fmt.Errorf("%s: Effect must be Allow or Deny", s.Sid)
	}
	var err error
	if s.Actions, s.NotAction, err = stringsOf(fields, "Action", "NotAction"); err != nil {
		return s, fmt.Errorf("%s: %w", s.Sid, err)
	}
	if s.Resources, s.NotResource, err = stringsOf(fields, "Resource", "NotResource"); err != nil {
		return s, fmt.Errorf("%s: %w", s.Sid, err)
	}
	for _, r := range s.Resources {
		if strings.Contains(r, "${") {
			return s, fmt.Errorf("%s: policy variables (%s) are not supported", s.Sid, r)
		}
	}
	if v, ok := fields["Condition"]; ok {
		if s.Conditions, err = parseConditions(v); err != nil {
			return s, fmt.Errorf("%s: %w", s.Sid, err)
		}
	}
	return s, nil
}

// stringsOf reads the element or its Not form, exactly one of which must be given.
func stringsOf(fields map[string]json.RawMessage, name, notName string) ([]string, bool, error) {
	v, has := fields[name]
	nv, hasNot := fields[notName]
	switch {
	case has && hasNot:
		return nil, false, fmt.Errorf("both %s and %s", name, notName)
	case !has && !hasNot:
		return nil, false, fmt.Errorf("neither %s nor %s", name, notName)
	case hasNot:
		v = nv
	}
	out, err := stringOrSlice(v)
	if err != nil {
		return nil, false, fmt.Errorf("%s, %w", name, err)
	}
	if len(out) == 0 {
		return nil, false, fmt.Errorf("%s is empty", name)
	}
	return out, hasNot, nil
}

func stringOrSlice(raw json.RawMessage) ([]string, error) {
	var one string
	if err := json.Unmarshal(raw, &one); err == nil {
		return []string{one}, nil
	}
	var many []string
	if err := json.Unmarshal(raw, &many); err != nil {
		return nil, fmt.Errorf("want a string or an array of strings")
	}
	return many, nil
}

func parseConditions(raw json.RawMessage) ([]Condition, error) {
	var block map[string]map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&block); err != nil {
		return nil, fmt.Errorf("Condition, %w", err)
	}
	var out []Condition
	for _, op := range sortedKeys(block) {
		c := Condition{Operator: op}
		rest := op
		if q, r, ok := strings.Cut(op, ":"); ok {
			if q != "ForAnyValue" && q != "ForAllValues" {
				return nil, fmt.Errorf("unknown set qualifier %q in %s", q, op)
			}
			c.set, rest = q, r
		}
		if b, ok := strings.CutSuffix(rest, "IfExists"); ok {
			c.ifExists, rest = true, b
		}
		c.base = rest
		if _, ok := operators[c.base]; !ok {
			return nil, fmt.Errorf("condition operator %s is not supported by this evaluator", op)
		}
		if c.base == "Null" && (c.set != "" || c.ifExists) {
			return nil, fmt.Errorf("%s: Null takes no set qualifier nor IfExists", op)
		}
		for _, key := range sortedKeys(block[op]) {
			values, err := conditionValues(block[op][key])
			if err != nil {
				return nil, fmt.Errorf("%s %s, %w", op, key, err)
			}
			for _, v := range values {
				if strings.Contains(v, "${") {
					return nil, fmt.Errorf("%s %s: policy variables (%s) are not supported", op, key, v)
				}
			}
			cc := c
			cc.Key, cc.Values = key, values
			out = append(out, cc)
		}
	}
	return out, nil
}

func conditionValues(raw json.RawMessage) ([]string, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	scalar := func(x any) (string, error) {
		switch x := x.(type) {
		case string:
			return x, nil
		case bool:
			return strconv.FormatBool(x), nil
		case json.Number:
			return x.String(), nil
		}
		return "", fmt.Errorf("want a string, boolean or number, got %T", x)
	}
	if list, ok := v.([]any); ok {
		out := make([]string, 0, len(list))
		for _, x := range list {
			s, err := scalar(x)
			if err != nil {
				return nil, err
			}
			out = append(out, s)
		}
		return out, nil
	}
	s, err := scalar(v)
	if err != nil {
		return nil, err
	}
	return []string{s}, nil
}

// Context is a request's condition keys and their values. Keys are matched without
// regard to case, as AWS matches them; values keep their case.
type Context map[string][]string

// Get returns the key's values, finding the key in any case.
func (c Context) Get(key string) ([]string, bool) {
	if v, ok := c[key]; ok {
		return v, true
	}
	for k, v := range c {
		if strings.EqualFold(k, key) {
			return v, true
		}
	}
	return nil, false
}

// Request is one authorization request: what AWS checks for one action on one
// resource, with the condition keys of the call.
type Request struct {
	Action   string
	Resource string
	Context  Context
}

func (r Request) String() string {
	return r.Action + " on " + r.Resource
}

// Decision is the outcome of evaluating a request.
type Decision struct {
	Allowed bool
	// By is the statement that decided: the explicit Deny, or the first Allow.
	By string
	// Misses are the Allow statements whose action and resource matched but some of
	// whose conditions did not hold, with those conditions: what a reader needs to
	// see why a request was denied.
	Misses []Miss
}

// Miss is an Allow statement that matched a request's action and resource but not
// its conditions.
type Miss struct {
	Sid    string
	Failed []string
}

// Evaluate decides a request as AWS decides one under a single identity policy: an
// explicit Deny wins, then any Allow, and otherwise the request is denied.
func (p *Policy) Evaluate(r Request) Decision {
	var d Decision
	allowedBy := ""
	for i, s := range p.Statements {
		if !s.matchesAction(r.Action) || !s.matchesResource(r.Resource) {
			continue
		}
		failed := s.failedConditions(r.Context)
		if len(failed) > 0 {
			if s.Effect == "Allow" {
				d.Misses = append(d.Misses, Miss{Sid: s.name(i), Failed: failed})
			}
			continue
		}
		if s.Effect == "Deny" {
			return Decision{Allowed: false, By: s.name(i)}
		}
		if allowedBy == "" {
			allowedBy = s.name(i)
		}
	}
	if allowedBy != "" {
		return Decision{Allowed: true, By: allowedBy}
	}
	return d
}

func (s Statement) name(i int) string {
	if s.Sid != "" {
		return s.Sid
	}
	return fmt.Sprintf("statement %d", i)
}

func (s Statement) matchesAction(action string) bool {
	for _, a := range s.Actions {
		if glob(strings.ToLower(a), strings.ToLower(action)) {
			return !s.NotAction
		}
	}
	return s.NotAction
}

func (s Statement) matchesResource(resource string) bool {
	for _, r := range s.Resources {
		if glob(r, resource) {
			return !s.NotResource
		}
	}
	return s.NotResource
}

// failedConditions describes the statement's conditions the context does not meet.
func (s Statement) failedConditions(ctx Context) []string {
	var failed []string
	for _, c := range s.Conditions {
		if !c.Holds(ctx) {
			got, ok := ctx.Get(c.Key)
			have := "missing"
			if ok {
				have = fmt.Sprintf("%q", got)
			}
			failed = append(failed, fmt.Sprintf("%s %s %q (request: %s)", c.Operator, c.Key, c.Values, have))
		}
	}
	return failed
}

// Holds evaluates the condition against a request's context.
func (c Condition) Holds(ctx Context) bool {
	values, present := ctx.Get(c.Key)
	present = present && len(values) > 0
	if c.base == "Null" {
		for _, want := range c.Values {
			if (strings.EqualFold(want, "true") && !present) || (strings.EqualFold(want, "false") && present) {
				return true
			}
		}
		return false
	}
	negated := operators[c.base]
	switch c.set {
	case "ForAllValues":
		// True on a missing or empty key: every one of no values matches.
		for _, v := range values {
			if !c.match(v) {
				return false
			}
		}
		return true
	case "ForAnyValue":
		if !present {
			return c.ifExists
		}
		for _, v := range values {
			if c.match(v) {
				return true
			}
		}
		return false
	}
	if !present {
		// A missing key matches no value: a positive operator fails on it, a negated
		// one holds.
		return c.ifExists || negated
	}
	if negated {
		for _, v := range values {
			if !c.match(v) {
				return false
			}
		}
		return true
	}
	for _, v := range values {
		if c.match(v) {
			return true
		}
	}
	return false
}

// match reports whether one request value satisfies the operator against the
// condition's values: for a negated operator, that it matches none of them.
func (c Condition) match(v string) bool {
	if pos, ok := positiveOf[c.base]; ok {
		return !matchAny(pos, v, c.Values)
	}
	return matchAny(c.base, v, c.Values)
}

func matchAny(op, v string, values []string) bool {
	for _, want := range values {
		if matchOne(op, v, want) {
			return true
		}
	}
	return false
}

func matchOne(op, v, want string) bool {
	switch op {
	case "StringEquals":
		return v == want
	case "StringEqualsIgnoreCase":
		return strings.EqualFold(v, want)
	case "StringLike":
		return glob(want, v)
	case "ArnEquals", "ArnLike":
		return arnMatch(want, v)
	case "Bool":
		return strings.EqualFold(v, want)
	}
	if strings.HasPrefix(op, "Numeric") {
		a, err1 := strconv.ParseFloat(v, 64)
		b, err2 := strconv.ParseFloat(want, 64)
		if err1 != nil || err2 != nil {
			return false
		}
		switch op {
		case "NumericEquals":
			return a == b
		case "NumericLessThan":
			return a < b
		case "NumericLessThanEquals":
			return a <= b
		case "NumericGreaterThan":
			return a > b
		case "NumericGreaterThanEquals":
			return a >= b
		}
	}
	return false
}

// arnMatch compares the six colon-separated parts of two ARNs one by one, each with
// * and ? wildcards, as ArnLike does (ArnEquals behaves the same in IAM).
func arnMatch(pattern, arn string) bool {
	pp := strings.SplitN(pattern, ":", 6)
	ap := strings.SplitN(arn, ":", 6)
	if len(pp) != 6 || len(ap) != 6 {
		return false
	}
	for i := range pp {
		if !glob(pp[i], ap[i]) {
			return false
		}
	}
	return true
}

// glob matches s against a pattern where * is any run of characters and ? any one.
func glob(pattern, s string) bool {
	p, i := []rune(pattern), []rune(s)
	pi, si := 0, 0
	star, mark := -1, 0
	for si < len(i) {
		switch {
		case pi < len(p) && (p[pi] == '?' || p[pi] == i[si]):
			pi++
			si++
		case pi < len(p) && p[pi] == '*':
			star, mark = pi, si
			pi++
		case star >= 0:
			pi = star + 1
			mark++
			si = mark
		default:
			return false
		}
	}
	for pi < len(p) && p[pi] == '*' {
		pi++
	}
	return pi == len(p)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
