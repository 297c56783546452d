package redact

import (
	"cmp"
	"slices"
	"strings"
)

// Secrets returns nil for nil, and otherwise an error as Error's whose
// message also has each of secrets replaced by Marker wherever it occurs:
// for an error that may quote back a secret its sender was given, such as
// a server's refusal that echoes the token it refused. It unwraps to err.
func Secrets(err error, secrets ...string) error {
	if err == nil {
		return nil
	}
	return &redacted{msg: URL(Mask(err.Error(), secrets...)), err: err}
}

// Mask returns s with each non-empty one of secrets replaced by Marker
// wherever it occurs, the longest first, so that a secret holding another
// is hidden whole.
func Mask(s string, secrets ...string) string {
	longestFirst := slices.SortedFunc(slices.Values(secrets), func(a, b string) int { return cmp.Compare(len(b), len(a)) })
	for _, secret := range longestFirst {
		if secret != "" {
			s = strings.ReplaceAll(s, secret, Marker)
		}
	}
	return s
}
