// Package methodoverride tells whether a request asks to be taken as
// another method than its own, as many web frameworks let it (Rack,
// Laravel, Symfony, ASP.NET, Express's method-override): a request that
// was authorized for its method must not carry one. It is shared by
// addonauth and addon-proxy.
package methodoverride

import (
	"net/http"
	"strconv"
	"strings"
)

// Headers are the headers frameworks read as the request's method.
var Headers = []string{"X-HTTP-Method-Override", "X-HTTP-Method", "X-Method-Override"}

// In tells whether r carries a method override: one of Headers in any
// spelling (an underscore counts as a hyphen, as servers that map headers
// to variables read it), also as a trailer it announces (servers that
// merge trailers into headers read those too), or a _method query
// parameter in any spelling PHP reads as one (Laravel and Symfony take it
// there). A _method in a form body is not seen here: that needs the body,
// which Name reads as it streams.
func In(r *http.Request) bool {
	for _, h := range []http.Header{r.Header, r.Trailer} {
		for name := range h {
			if IsHeader(name) {
				return true
			}
		}
	}
	return InQuery(r.URL.RawQuery)
}

// IsHeader tells whether a header named name is a method override.
func IsHeader(name string) bool {
	name = strings.ReplaceAll(name, "_", "-")
	for _, h := range Headers {
		if strings.EqualFold(name, h) {
			return true
		}
	}
	return false
}

// InQuery tells whether a query string, or a form body in the same
// encoding (application/x-www-form-urlencoded), holds a _method
// parameter.
func InQuery(raw string) bool {
	for kv := range strings.FieldsFuncSeq(raw, func(c rune) bool { return c == '&' || c == ';' }) {
		k, _, _ := strings.Cut(kv, "=")
		if IsParam(k) {
			return true
		}
	}
	return false
}

// IsParam tells whether a parameter named k (as sent) is _method as PHP
// reads names, which Laravel and Symfony take it from (see Name).
func IsParam(k string) bool {
	var n Name
	for i := 0; i < len(k); i++ {
		n.Feed(k[i])
	}
	return n.Is()
}

// Name reads a parameter's name a byte at a time, as sent, and tells
// whether PHP reads it as _method: decoded leniently (a bad escape left
// as it is, the rest decoded, "+" as a space), ended at a NUL or at "["
// (_method[0] is an array named _method; PHP reads an unclosed "[" as
// "_", refused all the same), leading spaces dropped, "." and " " read as
// "_": ?.method=DELETE is a DELETE there. It holds a few bytes whatever
// the name's length, so a body can be read as it streams. The zero Name
// has read nothing.
type Name struct {
	escape  [2]byte // an escape's digits read so far
	pending int     // how many: after a "%", up to 2
	inEsc   bool    // a "%" was read
	matched int     // bytes of "_method" matched so far
	dead    bool    // cannot be _method any more
	ended   bool    // a NUL or "[" ended it
}

const target = "_method"

// Feed reads the name's next byte as sent.
func (n *Name) Feed(c byte) {
	if n.ended || n.dead {
		return
	}
	if n.inEsc {
		n.escape[n.pending] = c
		n.pending++
		if n.pending < 2 {
			return
		}
		n.inEsc, n.pending = false, 0
		if v, err := strconv.ParseUint(string(n.escape[:]), 16, 8); err == nil {
			n.decoded(byte(v))
			return
		}
		// Not an escape: the "%" and what followed it, as they are.
		n.decoded('%')
		n.Feed(n.escape[0])
		n.Feed(n.escape[1])
		return
	}
	switch c {
	case '%':
		n.inEsc = true
	case '+':
		n.decoded(' ')
	default:
		n.decoded(c)
	}
}

// decoded reads the name's next decoded byte.
func (n *Name) decoded(c byte) {
	if n.ended || n.dead {
		return
	}
	switch {
	case c == 0 || c == '[':
		n.ended = true
		return
	case c == ' ' && n.matched == 0:
		return // a leading space is dropped
	case c == ' ' || c == '.':
		c = '_'
	}
	if n.matched == len(target) || lower(c) != target[n.matched] {
		n.dead = true
		return
	}
	n.matched++
}

// Is tells whether the name read so far, if it ends here, is _method.
func (n *Name) Is() bool {
	if n.inEsc && !n.ended && !n.dead {
		// A "%" with fewer than two bytes after it is itself.
		m := *n
		m.inEsc, m.pending = false, 0
		m.decoded('%')
		for _, c := range m.escape[:n.pending] {
			m.Feed(c)
		}
		return !m.dead && m.matched == len(target)
	}
	return !n.dead && n.matched == len(target)
}

func lower(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}
