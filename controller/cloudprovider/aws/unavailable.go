package aws

import (
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// UnavailableTTL is how long an offering EC2 refused stays out of plans: long enough
// not to ask again in the same burst, short enough to use capacity that returns.
const UnavailableTTL = 3 * time.Minute

// UnavailableOfferings remembers offerings EC2 recently had no capacity for.
type UnavailableOfferings struct {
	clock clock.Clock
	ttl   time.Duration
	mu    sync.Mutex
	until map[offeringKey]time.Time
	seq   uint64
}

type offeringKey struct{ instanceType, zone, capacityType string }

// NewUnavailableOfferings builds an empty cache that keeps an offering out for
// ttl (UnavailableTTL when 0).
func NewUnavailableOfferings(clk clock.Clock, ttl time.Duration) *UnavailableOfferings {
	if ttl <= 0 {
		ttl = UnavailableTTL
	}
	return &UnavailableOfferings{clock: clk, ttl: ttl, until: map[offeringKey]time.Time{}}
}

// Mark takes an offering out of plans for UnavailableTTL.
func (u *UnavailableOfferings) Mark(instanceType, zone, capacityType string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.until[offeringKey{instanceType, zone, capacityType}] = u.clock.Now().Add(u.ttl)
	u.seq++
}

// MarkCapacityType takes every offering of a capacity type out of plans for
// UnavailableTTL: spot, when the account cannot launch spot at all.
func (u *UnavailableOfferings) MarkCapacityType(capacityType string) { u.Mark("", "", capacityType) }

// IsUnavailable says whether EC2 refused the offering, or its whole capacity type,
// within UnavailableTTL.
func (u *UnavailableOfferings) IsUnavailable(instanceType, zone, capacityType string) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.refused(offeringKey{"", "", capacityType}) || u.refused(offeringKey{instanceType, zone, capacityType})
}

func (u *UnavailableOfferings) refused(k offeringKey) bool {
	until, ok := u.until[k]
	if !ok {
		return false
	}
	if !u.clock.Now().Before(until) {
		delete(u.until, k)
		u.seq++
		return false
	}
	return true
}

// Purge forgets expired entries and returns a number that changes whenever the set
// does, so callers can cache what they derive from it.
func (u *UnavailableOfferings) Purge() uint64 {
	u.mu.Lock()
	defer u.mu.Unlock()
	now := u.clock.Now()
	for k, until := range u.until {
		if !now.Before(until) {
			delete(u.until, k)
			u.seq++
		}
	}
	return u.seq
}
