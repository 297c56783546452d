package shard

import (
	"crypto/sha256"
	"encoding/binary"
)

// OwnerOf returns the replica of view that owns the cluster name: the one
// of highest score (rendezvous hashing), "" for an empty view. Every
// replica computes the same owner from the same view, a replica that joins
// takes from each of the others only the clusters it now scores highest
// on, about 1/N of them, and one that leaves moves only its own.
func OwnerOf(view []string, name string) string {
	var best string
	var top uint64
	for _, id := range view {
		if s := score(id, name); best == "" || s > top || (s == top && id > best) {
			best, top = id, s
		}
	}
	return best
}

// score is the replica id's weight for the cluster name: the same on every
// replica and in every run (a hash of a fixed function, never a seeded one).
func score(id, name string) uint64 {
	h := sha256.New()
	h.Write([]byte(id))
	h.Write([]byte{0})
	h.Write([]byte(name))
	var sum [sha256.Size]byte
	return binary.BigEndian.Uint64(h.Sum(sum[:0]))
}
