package consolidation

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/robfig/cron/v3"

	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
)

// Reasons are the voluntary disruption reasons, in the order methods run.
var Reasons = []v1.DisruptionReason{v1.DisruptionReasonDrifted, v1.DisruptionReasonEmpty, v1.DisruptionReasonUnderutilized}

// Allowed is how many more of a pool's nodes may be disrupted for reason at now:
// the most restrictive budget active then (schedule hit within its duration, or no
// schedule) that covers the reason, less the nodes already disrupting. With no active
// budget, every node may be.
func Allowed(np *v1.NodePool, reason v1.DisruptionReason, total, disrupting int, now time.Time) (int, error) {
	limit := math.MaxInt
	for i, b := range np.Spec.Disruption.Budgets {
		if !covers(b, reason) {
			continue
		}
		active, err := budgetActive(b, now)
		if err != nil {
			return 0, fmt.Errorf("nodepool %s: spec.disruption.budgets[%d]: %w", np.Name, i, err)
		}
		if !active {
			continue
		}
		n, err := budgetNodes(b.Nodes, total)
		if err != nil {
			return 0, fmt.Errorf("nodepool %s: spec.disruption.budgets[%d].nodes: %w", np.Name, i, err)
		}
		limit = min(limit, n)
	}
	if limit == math.MaxInt {
		limit = total
	}
	return max(0, limit-disrupting), nil
}

func covers(b v1.Budget, reason v1.DisruptionReason) bool {
	if len(b.Reasons) == 0 {
		return true
	}
	for _, r := range b.Reasons {
		if r == reason {
			return true
		}
	}
	return false
}

// budgetActive: a scheduled budget is active for duration after each cron hit (UTC).
func budgetActive(b v1.Budget, now time.Time) (bool, error) {
	if b.Schedule == nil {
		return true, nil
	}
	if b.Duration == nil {
		return false, fmt.Errorf("schedule %q needs a duration", *b.Schedule)
	}
	schedule, err := cron.ParseStandard(*b.Schedule)
	if err != nil {
		return false, fmt.Errorf("schedule %q is not a cron expression (minute hour day month weekday, or @daily...): %v", *b.Schedule, err)
	}
	now = now.UTC()
	next := schedule.Next(now.Add(-b.Duration.Duration))
	return !next.After(now), nil
}

// budgetNodes reads "5" or "10%" of total, rounding a percentage up so that a
// non-zero percentage always allows at least one node.
func budgetNodes(nodes string, total int) (int, error) {
	if pct, ok := strings.CutSuffix(nodes, "%"); ok {
		p, err := strconv.Atoi(pct)
		if err != nil || p < 0 || p > 100 {
			return 0, fmt.Errorf("%q is not a percentage from 0%% to 100%%", nodes)
		}
		return int(math.Ceil(float64(total) * float64(p) / 100)), nil
	}
	n, err := strconv.Atoi(nodes)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%q is not a node count or a percentage", nodes)
	}
	return n, nil
}
