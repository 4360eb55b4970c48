package overlay

import (
	"sync"

	"github.com/dovetail-sh/dovetail/controller/apis/v1alpha1"
)

// Store holds the overlays the NodeOverlay controller accepted last, for the cloud
// provider to apply on every read of a pool's types.
type Store struct {
	mu        sync.RWMutex
	evaluated bool
	version   uint64
	accepted  []*v1alpha1.NodeOverlay
}

// Set replaces the accepted overlays (in the order they apply).
func (s *Store) Set(accepted []*v1alpha1.NodeOverlay) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.accepted, s.evaluated = accepted, true
	s.version++
}

// Get returns the accepted overlays and a version that changes with them; ok is
// false until the controller has evaluated the overlays once.
func (s *Store) Get() (accepted []*v1alpha1.NodeOverlay, version uint64, ok bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.accepted, s.version, s.evaluated
}
