package repair

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// Karpenter v1.15's RebootHistory: two committed reboots within 24 hours and the
// third repair replaces; reboots age out of a sliding window; a claim is known by
// its UID; a replacement stays one.
func TestRebootHistoryEscalatesTheThirdReboot(t *testing.T) {
	t0 := time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC)
	h := NewRebootHistory()
	reboot := func() *Result { return &Result{Action: Reboot, Condition: "AcceleratedHardwareReady"} }
	h.Record("a", t0)
	if r := reboot(); h.Escalate(r, "a", t0.Add(time.Hour)) || r.Action != Reboot {
		t.Fatal("one reboot in the window escalated")
	}
	h.Record("a", t0.Add(13*time.Hour))
	r := reboot()
	if !h.Escalate(r, "a", t0.Add(14*time.Hour)) || r.Action != Replace || r.Condition != "AcceleratedHardwareReady" {
		t.Fatalf("two reboots in the window: %+v; want a replacement of the same condition", r)
	}
	if r := reboot(); h.Escalate(r, "b", t0.Add(14*time.Hour)) {
		t.Error("another claim's reboots escalated this one")
	}
	if r := reboot(); h.Escalate(r, "a", t0.Add(25*time.Hour)) {
		t.Error("the first reboot, 25 hours ago, still counts: the window is 24 hours, sliding")
	}
	if r := (&Result{Action: Replace}); h.Escalate(r, "a", t0.Add(14*time.Hour)) || r.Action != Replace {
		t.Error("a replacement was escalated")
	}
	h.Forget(func(types.UID) bool { return false })
	if r := reboot(); h.Escalate(r, "a", t0.Add(14*time.Hour)) {
		t.Error("a forgotten claim's reboots still count")
	}
}
