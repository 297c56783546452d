package shard

import "fmt"

// notOwnedError says which replica owns a cluster, or why this one gave
// it up. It matches Config.NotOwned (fleet.ErrNotOwned).
type notOwnedError struct {
	name, self, owner string
	why               string // when the cluster left this replica
	is                error
}

func (e *notOwnedError) Error() string {
	switch {
	case e.why != "":
		return fmt.Sprintf("fleet: replica %q gave cluster %q up: %s", e.self, e.name, e.why)
	case e.owner == "":
		return fmt.Sprintf("fleet: cluster %q is owned by no replica yet (this is %q)", e.name, e.self)
	case e.owner == e.self:
		return fmt.Sprintf("fleet: cluster %q is this replica's (%q) once its previous owner has let it go", e.name, e.self)
	}
	return fmt.Sprintf("fleet: cluster %q is owned by replica %q, not this one (%q)", e.name, e.owner, e.self)
}

func (e *notOwnedError) Unwrap() error { return e.is }
