// Package redact keeps URL user info and known secrets out of errors and
// log lines. It is for authors of login handlers and cloud logins: their
// errors quote what they were given (a proxy URL, a kubeconfig's server, an
// error from url.Parse or an SDK, a token endpoint's answer), and a vault
// logs those errors and hands them to its callers.
//
//	if err != nil {
//		// endpoint's user info and clientSecret, wherever err quotes them, are hidden
//		return nil, redact.Secrets(fmt.Errorf("token endpoint %s: %w", endpoint, err), clientSecret)
//	}
//
// [Error] and [Secrets] wrap an error; [URL], [Value] and [Mask] redact text;
// [Print] writes a redacted form from a type's Format method. What is hidden
// is replaced by [Marker]. The guide docs/vault.md in the repository shows
// where it fits beside login/loginhttp in a handler of your own.
//
// # URL user info
//
// The whole user info is hidden, user name included (a user name may be a
// token, as in https://TOKEN@host); the host stays visible. The scan is
// deliberately generous: it may hide more than the user info of an unusual
// text (the part before an e-mail address's @, a path segment before an @),
// never less for the forms it knows: scheme://user:pass@host,
// //user:pass@host and user:pass@host, whatever follows the host (a bad
// port, a path), and such URLs quoted in a longer text, including Go-quoted
// ones (url.Error's "parse \"…\": …") whose user info holds spaces or quotes.
//
// In unquoted text, a user info with a raw double quote, or a space in one
// without a "//" before it, cannot be told from the text around it: print
// URLs quoted (%q), or redact a single URL with [Value]. Nor can a user info
// holding an @ followed by '/', '?' or '#': it reads as a user info, a host
// and a path.
//
// # Secrets known by value
//
// A server may quote back what it was sent (a token it refuses, a client
// secret in an echoed form). [Secrets] hides such values in an error and
// [Mask] in text, each wherever it occurs, as it is or escaped as a form, a
// URL, JSON or a Go-quoted string would have it (a secret's '/' and '+' are
// %2F and %2B in an echoed form); only non-empty values are hidden, so a
// login may pass every secret it holds, set or not.
//
// # What stays reachable
//
// The errors of [Error] and [Secrets] print their redacted message for every
// fmt verb and in JSON, and unwrap to the original, so errors.Is and
// errors.As see through them. errors.As can reach the original error
// itself: code that prints what it finds there must redact it again.
package redact

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode"
)

// Marker stands where a secret would be printed.
const Marker = "[redacted]"

// URL returns s with the user info of every URL in it replaced by Marker:
// "http://u:p@h:1/x" becomes "http://[redacted]@h:1/x". s may be a URL or
// any text that quotes URLs, such as an error message.
func URL(s string) string {
	if !strings.Contains(s, "@") {
		return s
	}
	toks := tokens(s)
	var hide []span
	last := 0
	for _, t := range toks {
		for _, r := range userinfos(s, t.span, t.quoted, last) {
			hide = append(hide, r)
			last = r.end
		}
	}
	if len(hide) == 0 {
		return s
	}
	// url.Parse quotes a piece of a malformed user info on its own too
	// (`invalid port ":pass" after host` for "http://user:pass/x@host"):
	// hide a quoted string that is part of a hidden user info.
	for _, t := range toks {
		piece := strings.TrimPrefix(s[t.start:t.end], ":")
		if !t.quoted || len(piece) < 2 || overlaps(hide, t.span) {
			continue
		}
		for _, r := range hide {
			if strings.Contains(s[r.start:r.end], piece) {
				hide = append(hide, t.span)
				break
			}
		}
	}
	slices.SortFunc(hide, func(a, b span) int { return a.start - b.start })
	var b strings.Builder
	last = 0 // s[:last] is written to b
	for _, r := range hide {
		b.WriteString(s[last:r.start])
		b.WriteString(Marker)
		last = r.end
	}
	b.WriteString(s[last:])
	return b.String()
}

// overlaps tells whether t overlaps one of spans.
func overlaps(spans []span, t span) bool {
	for _, r := range spans {
		if r.start < t.end && t.start < r.end {
			return true
		}
	}
	return false
}

// Value returns s, taken as one URL (a field that holds a URL), with its
// user info replaced by Marker: everything between the scheme's "//" (or
// the start) and the last @ of the authority, whatever characters it holds,
// quotes and spaces included.
func Value(s string) string {
	if !strings.Contains(s, "@") {
		return s
	}
	// Quoted, s is one run whatever it holds; Marker needs no escaping.
	v, err := strconv.Unquote(URL(strconv.Quote(s)))
	if err != nil {
		return Marker // cannot happen: Quote's output stays valid
	}
	return v
}

// span is s[start:end].
type span struct{ start, end int }

// token is a run of s a URL may span; quoted when it is the content of a
// double-quoted string.
type token struct {
	span
	quoted bool
}

// tokens splits s into the runs a URL may span: the content of every
// double-quoted string (with backslash escapes, as %q and JSON write them),
// and outside quotes the runs between white space and control characters.
func tokens(s string) []token {
	var out []token
	i := 0
	for i < len(s) {
		c := s[i]
		switch {
		case c == '"':
			j := i + 1
			for j < len(s) && s[j] != '"' {
				if s[j] == '\\' {
					j++
				}
				j++
			}
			end := min(j, len(s))
			out = append(out, token{span{i + 1, end}, true})
			i = end + 1
		case separator(c):
			i++
		default:
			j := i
			for j < len(s) && s[j] != '"' && !separator(s[j]) {
				j++
			}
			out = append(out, token{span{i, j}, false})
			i = j
		}
	}
	return out
}

// separator tells whether c ends a run outside quotes: ASCII white space and
// control characters. Bytes of multi-byte runes never are.
func separator(c byte) bool {
	return c < 0x80 && (unicode.IsSpace(rune(c)) || unicode.IsControl(rune(c)))
}

// userinfos finds the user info of every URL in the run s[t.start:t.end],
// in order. A user info starts after the last "//" before its @, else at the
// start of the run (less opening brackets and quotes; not "[", which starts Marker), and ends at the last @
// of the authority: the @s up to the first '/', '?' or '#' after the first
// one. After a URL, only a new "//" starts another user info: a later @ is
// in that URL's path. A run outside quotes whose user info has no "//" may
// continue one started before white space (a password with a space in an
// unquoted text): the user info then starts after that "//", never before
// floor.
func userinfos(s string, t span, quoted bool, floor int) []span {
	var out []span
	seen := false // an @ of this run was looked at: later ones need a "//"
	pos := t.start
	for pos < t.end {
		at := strings.IndexByte(s[pos:t.end], '@')
		if at < 0 {
			break
		}
		at += pos
		from := pos
		if seen {
			// Only a new "//" starts another URL; an @ before it is in
			// the path of the URL before.
			slashes := strings.Index(s[pos:at], "//")
			if slashes < 0 {
				pos = at + 1
				continue
			}
			from = pos + slashes + 2
		} else {
			if !quoted && !strings.ContainsAny(s[pos:at], "/?#") {
				if j := schemeBefore(s, floor, pos); j >= 0 {
					from = j
				}
			}
			for from < at && strings.IndexByte("(<{'`", s[from]) >= 0 {
				from++
			}
			// The first "//" ends the scheme when all before it is one;
			// a "//" elsewhere may be part of the password.
			if slashes := strings.Index(s[from:at], "//"); slashes >= 0 && isScheme(s[from:from+slashes]) {
				from += slashes + 2
			}
		}
		authEnd := t.end
		if k := strings.IndexAny(s[at:t.end], "/?#"); k >= 0 {
			authEnd = at + k
		}
		lastAt := at + strings.LastIndexByte(s[at:authEnd], '@')
		seen = true
		if lastAt > from {
			out = append(out, span{from, lastAt})
		}
		pos = lastAt + 1
	}
	return out
}

// isScheme tells whether p is empty or a URL scheme and its colon.
func isScheme(p string) bool {
	if p == "" {
		return true
	}
	name, ok := strings.CutSuffix(p, ":")
	if !ok || name == "" {
		return false
	}
	for i, c := range name {
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z':
		case i > 0 && ('0' <= c && c <= '9' || c == '+' || c == '-' || c == '.'):
		default:
			return false
		}
	}
	return true
}

// schemeBefore returns the index just after a "//" in s[floor:end] that
// only white space, control characters and user info characters separate
// from end, or -1.
func schemeBefore(s string, floor, end int) int {
	for j := end - 1; j > floor; j-- {
		switch s[j] {
		case '/':
			if s[j-1] == '/' {
				return j + 1
			}
			return -1
		case '"', '?', '#', '@':
			return -1
		}
	}
	return -1
}

// Error returns nil for nil, and otherwise an error whose message is err's
// with every URL's user info redacted, and which unwraps to err, so that
// errors.Is and errors.As see through it. Every fmt verb prints the redacted
// message, so %+v and %#v cannot reach err's own formatting.
//
// errors.As can still reach err itself; code that prints what it finds there
// must redact it again.
func Error(err error) error {
	if err == nil {
		return nil
	}
	if r, ok := err.(*redacted); ok {
		return r
	}
	return &redacted{msg: URL(err.Error()), err: err}
}

// redacted is an error printed with its URLs' user info hidden.
type redacted struct {
	msg string // the redacted message
	err error  // the original, never printed
}

func (e *redacted) Error() string { return e.msg }
func (e *redacted) Unwrap() error { return e.err }

// Format prints the redacted message for every verb; %q quotes it.
func (e *redacted) Format(f fmt.State, verb rune) { Print(f, verb, e.msg) }

// Print writes shown, a value's redacted form, for any fmt verb: quoted
// for %q, as it is for every other. A type whose Format calls it prints no
// raw field, whatever the verb or flags.
func Print(f fmt.State, verb rune, shown string) {
	if verb == 'q' {
		shown = strconv.Quote(shown)
	}
	_, _ = f.Write([]byte(shown))
}

// GoString keeps %#v to the redacted message, also for callers that ask
// for a GoStringer.
func (e *redacted) GoString() string { return e.msg }

// MarshalJSON encodes the redacted message as a JSON string.
func (e *redacted) MarshalJSON() ([]byte, error) { return json.Marshal(e.msg) }
