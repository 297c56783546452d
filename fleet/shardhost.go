package fleet

import "github.com/authvault/authvault/fleet/internal/shard"

// shardHost is the fleet as the shards' driver sees it: its seats, under
// its mu. The driver decides which clusters this replica owns; the fleet
// makes and ends their members.
type shardHost struct{ f *Fleet }

func (h shardHost) Lock()   { h.f.mu.Lock() }
func (h shardHost) Unlock() { h.f.mu.Unlock() }

func (h shardHost) DropLocked(name string, gen uint64, cause error) (shard.Moved, bool) {
	s := h.f.clusters[name]
	if s == nil || s.member == nil || s.member.gen != gen {
		return shard.Moved{}, false // the fleet took it out itself: it tells the driver
	}
	m := s.dropMemberLocked(cause)
	return shard.Moved{Name: name, Gen: gen, Stop: m.vault.Close, Hook: func() { h.f.tellRemove(m) }}, true
}

func (h shardHost) TakeLocked(name string, serial, gen uint64) (shard.Moved, bool) {
	f := h.f
	s := f.clusters[name]
	if f.closed || s == nil || s.serial != serial || s.member != nil {
		return shard.Moved{}, false
	}
	m := f.newMemberLocked(s)
	m.gen = gen
	s.member = m
	return shard.Moved{Name: name, Gen: gen, Hook: func() { f.tellAdd(m) }}, true
}

func (h shardHost) OwnedLocked() int {
	n := 0
	for _, s := range h.f.clusters {
		if s.member != nil {
			n++
		}
	}
	return n
}
