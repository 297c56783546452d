package fleet

import (
	"sync"

	"github.com/authvault/authvault/login"
)

// seat is a cluster the fleet has seen (by Add, a Secret or a
// ClusterProfile): what serves it, and its member while this process owns
// it. The watches keep seats (which source names a cluster), the shards
// decide whether this process owns a seat's cluster, and the fleet gives an
// owned seat its member. Without Options.Shards every seat has its member
// from the start.
type seat struct {
	// Set by Fleet.add, never changed.
	name    string
	serial  uint64 // tells it from a seat of the same name before or after it
	handler login.Handler
	opts    []login.Option
	yields  bool // gives its name up to a seat that does not (Fleet.addYielding)

	member *Member // guarded by the fleet's mu; nil while another replica owns the cluster

	mu     sync.Mutex // guards source
	source string     // what serves the cluster, for the fleet's log: "Fleet.Add", "Secret <namespace>/<name>"…
}

// sourced returns what serves the cluster.
func (s *seat) sourced() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.source
}

// setSource records what serves the cluster now (a ClusterProfile's
// provider changed).
func (s *seat) setSource(source string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.source = source
}

// dropMemberLocked takes s's member away, its metrics unregistered and its
// context ended for cause, and returns it (nil when s had none). The
// fleet's mu is held.
func (s *seat) dropMemberLocked(cause error) *Member {
	m := s.member
	if m == nil {
		return nil
	}
	s.member = nil
	if m.reg != nil {
		m.reg.drop()
	}
	m.leave(cause)
	return m
}
