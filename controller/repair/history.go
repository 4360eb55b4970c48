package repair

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// A node rebooted this many times within RebootHistoryWindow is replaced the next
// time, as in Karpenter v1.15: a fault that keeps coming back is the hardware's.
const (
	RebootsBeforeReplacement = 2
	RebootHistoryWindow      = 24 * time.Hour
)

// RebootHistory keeps the reboots committed to each claim, by UID. Like Karpenter's
// it lives in memory: a restart forgets it, and a node may then be rebooted twice
// more before it is replaced.
type RebootHistory struct {
	mu      sync.Mutex
	reboots map[types.UID][]time.Time
}

// NewRebootHistory is an empty history.
func NewRebootHistory() *RebootHistory {
	return &RebootHistory{reboots: map[types.UID][]time.Time{}}
}

// Record counts a reboot committed to the claim at the time.
func (h *RebootHistory) Record(claim types.UID, at time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.reboots[claim] = append(h.reboots[claim], at)
	if n := len(h.reboots[claim]); n > RebootsBeforeReplacement {
		h.reboots[claim] = h.reboots[claim][n-RebootsBeforeReplacement:]
	}
}

// Escalate turns a reboot into a replacement when the claim was rebooted
// RebootsBeforeReplacement times in the window before now, and reports whether it
// did.
func (h *RebootHistory) Escalate(r *Result, claim types.UID, now time.Time) bool {
	if r.Action != Reboot {
		return false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	recent := 0
	for _, at := range h.reboots[claim] {
		if now.Sub(at) < RebootHistoryWindow {
			recent++
		}
	}
	if recent < RebootsBeforeReplacement {
		return false
	}
	r.Action = Replace
	return true
}

// Forget drops the history of claims that are gone.
func (h *RebootHistory) Forget(keep func(types.UID) bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for uid := range h.reboots {
		if !keep(uid) {
			delete(h.reboots, uid)
		}
	}
}
