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
// to variables read it), or a _method query parameter in any spelling PHP
// reads as one (Laravel and Symfony take it there). A _method in a form
// body is not seen here: that needs the body (see Form).
func In(r *http.Request) bool {
	for name := range r.Header {
		if IsHeader(name) {
			return true
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
// reads names, which Laravel and Symfony take it from: decoded leniently
// (a bad escape left as it is, the rest decoded), ended at a NUL or at
// "[" (_method[0] is an array named _method; PHP reads an unclosed "[" as
// "_", refused all the same), leading spaces dropped, "." and " " read as
// "_": ?.method=DELETE is a DELETE there.
func IsParam(k string) bool {
	var b strings.Builder
	for i := 0; i < len(k); i++ {
		c := k[i]
		if c == '%' && i+2 < len(k) {
			if v, err := strconv.ParseUint(k[i+1:i+3], 16, 8); err == nil {
				c = byte(v)
				i += 2
			}
		} else if c == '+' {
			c = ' '
		}
		if c == 0 || c == '[' {
			break
		}
		switch {
		case c == ' ' && b.Len() == 0:
			continue
		case c == ' ' || c == '.':
			c = '_'
		}
		b.WriteByte(c)
		if b.Len() > len("_method") {
			return false // longer than the name: no need to read on
		}
	}
	return strings.EqualFold(b.String(), "_method")
}
