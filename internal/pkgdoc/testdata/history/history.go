// Package history is a package whose docs carry what changed: the check
// of exported docs must find each note.
package history

// Options configure nothing.
type Options struct {
	// OnAdd is called with the cluster.
	//
	// Mind when upgrading: OnAdd took the cluster's name.
	OnAdd func(name string)
}

// Do does nothing. It used to return an error.
func Do() {}
