package gke

import (
	"time"

	"github.com/authvault/authvault/login"
)

// LoginAt is Login on a clock of the test's.
func LoginAt(opts Options, now func() time.Time) login.Handler {
	return newSource(opts, now).login
}
