package addonauth

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"golang.org/x/net/http/httpguts"

	"github.com/authvault/authvault/internal/weborigin"
)

// originCheck refuses what a page of another site makes a browser send
// with the person's identity (a cookie, or kubectl proxy's credential added
// on the way, whatever the browser's credentials mode): an unsafe request
// (any method but GET, HEAD and OPTIONS), whose effect no policy undoes;
// the handshake of a WebSocket or any other upgrade, whatever its method,
// whose messages no same-origin policy keeps from the page; and, from
// browsers that say what a request is for (Sec-Fetch-Mode and -Dest), a
// safe request that is not a top-level navigation: a fetch whose answer
// permissive CORS headers would hand to the page, an image, a script, a
// frame that another site could draw over (the fetch-metadata resource
// isolation policy). A link from another site, followed, is a top-level
// navigation and is served. net/http's CrossOriginProtection decides what
// is cross-origin (Sec-Fetch-Site, else Origin against the Host) and which
// origins are trusted; programs send neither header and pass.
type originCheck struct {
	protection *http.CrossOriginProtection
	setting    string // how the trusted origins are set, for the refusal page
}

func newOriginCheck(trusted []string, setting string) (*originCheck, error) {
	c := &originCheck{protection: http.NewCrossOriginProtection(), setting: setting}
	for _, o := range trusted {
		if err := c.protection.AddTrustedOrigin(o); err != nil {
			return nil, fmt.Errorf("addonauth: Options.TrustedOrigins %q: %w", o, err)
		}
	}
	return c, nil
}

// errCrossOrigin: a page of another site sent the request.
var errCrossOrigin = errors.New("addonauth: a cross-origin request from a browser")

// check returns errCrossOrigin when r is a browser's cross-origin request
// that must not reach the service.
func (c *originCheck) check(r *http.Request) error {
	if isSafe(r.Method) {
		switch site := r.Header.Get("Sec-Fetch-Site"); {
		case isUpgrade(r):
		case site == "" && r.Header.Get("Origin") != "":
			// A browser without fetch metadata sends Origin on a safe
			// request only when it is cross-origin (CORS): checked by
			// Origin against the Host, and the trusted origins.
		case site != "cross-site" && site != "same-site":
			return nil // the same origin, typed by the person, or a browser that does not say
		case isNavigation(r):
			return nil
		}
		// CrossOriginProtection lets every safe method through: it is
		// asked about this one as about an unsafe request, for the
		// same-origin and trusted-origin answers.
		unsafe := *r
		unsafe.Method = http.MethodPost
		r = &unsafe
	}
	if c.protection.Check(r) != nil {
		return errCrossOrigin
	}
	return nil
}

func isSafe(method string) bool {
	return method == http.MethodGet || method == http.MethodHead || method == http.MethodOptions
}

// isNavigation tells whether r is a top-level navigation (a link
// followed, a form's GET): its answer goes to the person, not to the page
// that started it. A frame is not one: the page around it may draw over
// it.
func isNavigation(r *http.Request) bool {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		return false
	}
	h := r.Header
	if !strings.EqualFold(h.Get("Sec-Fetch-Mode"), "navigate") {
		return false
	}
	switch strings.ToLower(h.Get("Sec-Fetch-Dest")) {
	case "", "document":
		return true
	}
	return false
}

// isUpgrade tells whether r asks to switch protocols (a WebSocket's
// handshake, or any other upgrade): by Upgrade, by Connection naming it,
// or by what only a WebSocket handshake carries.
func isUpgrade(r *http.Request) bool {
	h := r.Header
	return len(h["Upgrade"]) > 0 || httpguts.HeaderValuesContainsToken(h["Connection"], "upgrade") ||
		len(h["Sec-Websocket-Key"]) > 0 || strings.EqualFold(h.Get("Sec-Fetch-Mode"), "websocket")
}

// refuseCrossOrigin answers a cross-origin request with a page that says
// what happened and how the page's origin may be trusted, and logs it as
// the other refusals are logged (its origin, never a cookie or token).
func (a *Authenticator) refuseCrossOrigin(w http.ResponseWriter, r *http.Request) {
	closeUnread(w, r)
	a.metrics.requests.WithLabelValues("cross_origin").Inc()
	origin, site := printable(r.Header.Get("Origin")), printable(r.Header.Get("Sec-Fetch-Site"))
	what := "send this service a " + printable(r.Method)
	switch {
	case isUpgrade(r):
		what = "open a WebSocket (or any upgraded connection) to this service"
	case isSafe(r.Method):
		what = "read what this service answers, or show its pages in a frame,"
	}
	a.opts.Logger.V(1).Info("cross-origin request refused", "origin", origin, "secFetchSite", site, "method", printable(r.Method),
		"upgrade", isUpgrade(r), "path", r.URL.Path, "remote", r.RemoteAddr)
	a.crossOrigins.note(a.opts.Logger, a.opts.now(), "crossOrigin", fmt.Sprintf("a page of origin %q may not %s", origin, what))
	h := w.Header()
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusForbidden)
	from := "a page of another site"
	if origin != "" {
		from = fmt.Sprintf("a page of %s", origin)
	}
	if site != "" {
		from += fmt.Sprintf(" (Sec-Fetch-Site: %s)", site)
	}
	advice := fmt.Sprintf("If that page is one you run and trust, add its origin to %s.", a.origins.setting)
	if origin == "" {
		// Frames, images and scripts carry no Origin: no trusted origin
		// lets them in.
		advice = "Pages of other sites may not show this service in a frame, nor load from it: open it directly, by following a link to it or typing its address."
	}
	fmt.Fprintf(w, "403 Forbidden: cross-origin request refused.\n\n"+
		"This request came from %s. A page of another site may not %s in your name: "+
		"your browser would have sent it with your identity, whatever the page meant.\n\n%s\n", from, what, advice)
}

// printable is a header value fit for a log line or a page: at most 200
// bytes, and nothing but printable ASCII (the rest as "?").
func printable(v string) string {
	const most = 200
	if len(v) > most {
		v = v[:most] + "..."
	}
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r > 0x7e {
			return '?'
		}
		return r
	}, v)
}

// normalizeOrigins spells each trusted origin as browsers send it.
func normalizeOrigins(origins []string) ([]string, error) {
	out := make([]string, 0, len(origins))
	for _, o := range origins {
		n, err := weborigin.Normalize(o)
		if err != nil {
			return nil, fmt.Errorf("addonauth: Options.TrustedOrigins %q: %w", o, err)
		}
		out = append(out, n)
	}
	return out, nil
}
