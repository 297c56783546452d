package shard

import "sync"

// Host is what the driver gives clusters up from and takes them into: the
// fleet's seats. The driver calls the Locked methods with the host locked,
// all the drops and takes of one step under one lock.
type Host interface {
	sync.Locker
	// DropLocked ends the member of the cluster name, when it is still
	// the one numbered gen, with cause, and returns it.
	DropLocked(name string, gen uint64, cause error) (Moved, bool)
	// TakeLocked makes a member numbered gen for the cluster name, when
	// its seat is still the one numbered serial, has no member and the host
	// is not closed, and returns it.
	TakeLocked(name string, serial, gen uint64) (Moved, bool)
	// OwnedLocked is how many clusters have a member here.
	OwnedLocked() int
}

// Moved is a member the driver gave up or took, as the host made it.
type Moved struct {
	Name string
	Gen  uint64
	// Stop closes its vault: its logins stop (one given up; nil for one
	// taken).
	Stop func()
	// Hook runs its OnRemove (one given up) or its OnAdd (one taken).
	Hook func()
}
