// Package weborigin reads an origin (scheme://host[:port]) as a browser
// spells it in its Origin header, so that one given in a setting matches
// what browsers send. It is shared by addonauth and addon-proxy.
package weborigin

import (
	"errors"
	"net/netip"
	"net/url"
	"strconv"
	"strings"

	"golang.org/x/net/idna"
)

// ErrNotAnOrigin is why a string is not an origin a browser sends.
var ErrNotAnOrigin = errors.New("not scheme://host[:port] with scheme http or https")

// Normalize is origin as a browser sends it in Origin: scheme and host in
// lower case, the port without leading zeros or the scheme's default, an
// IPv6 address in its shortest form. Anything but scheme://host[:port] is
// refused: no browser sends it, so it would never match.
func Normalize(origin string) (string, error) {
	u, err := url.Parse(origin)
	if err != nil {
		return "", ErrNotAnOrigin
	}
	scheme := strings.ToLower(u.Scheme)
	if (scheme != "http" && scheme != "https") || u.Host == "" {
		return "", ErrNotAnOrigin
	}
	// Only the host after "://": no userinfo, path, query, fragment, or
	// escape (Parse decodes those into u.Host).
	if origin[len(u.Scheme)+len("://"):] != u.Host {
		return "", ErrNotAnOrigin
	}
	host, port := strings.ToLower(u.Hostname()), u.Port()
	if a, err := netip.ParseAddr(host); err == nil && a.Is6() {
		host = "[" + a.String() + "]"
	} else if host, err = browserHost(host); err != nil {
		return "", err
	}
	if port != "" {
		n, err := strconv.ParseUint(port, 10, 16)
		if err != nil {
			return "", ErrNotAnOrigin
		}
		if (scheme != "http" || n != 80) && (scheme != "https" || n != 443) {
			host += ":" + strconv.FormatUint(n, 10)
		}
	}
	return scheme + "://" + host, nil
}

// browserHost is a host name as a browser sends it: a name of Unicode
// letters in its ASCII (punycode) form. A host whose last label is a
// number is an IPv4 address to a browser, which it writes in dotted
// decimal: another spelling of one (0x7f.1, 2130706433, 127.0.0.01) is
// refused rather than read as browsers read it.
func browserHost(host string) (string, error) {
	ascii, err := idna.Lookup.ToASCII(host)
	if err != nil {
		return "", ErrNotAnOrigin
	}
	last := ascii[strings.LastIndexByte(ascii, '.')+1:]
	if last != "" && (strings.Trim(last, "0123456789") == "" || strings.HasPrefix(last, "0x")) {
		if a, err := netip.ParseAddr(ascii); err != nil || !a.Is4() || a.String() != ascii {
			return "", ErrNotAnOrigin
		}
	}
	return ascii, nil
}
