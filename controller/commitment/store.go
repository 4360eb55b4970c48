package commitment

import "sync"

// Store holds the ledger of the Commitments the controller accepted last, for
// every solve to price with.
type Store struct {
	mu     sync.RWMutex
	ledger *Ledger
}

// Set replaces the commitments.
func (s *Store) Set(terms []Terms) {
	l := NewLedger(terms...)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ledger = l
}

// Ledger is the accepted commitments, nothing used; nil when there are none or
// the store is nil. Callers clone it before charging it.
func (s *Store) Ledger() *Ledger {
	if s == nil {
		return nil
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.ledger.Empty() {
		return nil
	}
	return s.ledger
}
