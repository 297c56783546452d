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
// whose messages no same-origin policy keeps from the page; and a safe
// request whose answer would become part of the page (a frame another site
// may draw over, a script or style it runs, a worker), by the browser's
// Sec-Fetch-Dest. Any other safe request from another site (a link
// followed, a fetch, an image) is served, and its answer kept from the
// page: the upstream's CORS headers are removed from it, so that the
// same-origin policy holds whatever the upstream allows. net/http's
// CrossOriginProtection decides what is cross-origin (Sec-Fetch-Site, else
// Origin against the Host) and which origins are trusted; programs send
// neither header and pass.
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
// that must not reach the service; keep, when r is one that may, but whose
// answer must be kept from the page that asked.
func (c *originCheck) check(r *http.Request) (keep bool, err error) {
	if isSafe(r.Method) && !isUpgrade(r) {
		site := r.Header.Get("Sec-Fetch-Site")
		// A browser without fetch metadata sends Origin on a safe request
		// only when it is cross-origin (CORS).
		cross := site == "cross-site" || site == "same-site" || (site == "" && r.Header.Get("Origin") != "")
		if !cross || c.trusted(r) {
			return false, nil
		}
		if intoThePage(r) {
			return false, errCrossOrigin
		}
		return true, nil
	}
	if isUpgrade(r) && isSafe(r.Method) {
		// CrossOriginProtection lets every safe method through: a
		// handshake is asked about as the unsafe request it is.
		unsafe := *r
		unsafe.Method = http.MethodPost
		r = &unsafe
	}
	if c.protection.Check(r) != nil {
		return false, errCrossOrigin
	}
	return false, nil
}

// trusted tells whether r, a safe request, comes from the same origin or
// a trusted one, as CrossOriginProtection would say of an unsafe request.
func (c *originCheck) trusted(r *http.Request) bool {
	unsafe := *r
	unsafe.Method = http.MethodPost
	return c.protection.Check(&unsafe) == nil
}

// intoThePage tells whether r's answer becomes part of the page that asked
// for it, by what the browser says it is for: a frame (another site may
// draw over it and have the person click), or what the page runs or
// parses (a script, a style, a worker, a JSON module).
func intoThePage(r *http.Request) bool {
	switch strings.ToLower(r.Header.Get("Sec-Fetch-Dest")) {
	case "iframe", "frame", "fencedframe", "embed", "object",
		"script", "style", "xslt", "json", "worker", "sharedworker", "serviceworker", "audioworklet", "paintworklet":
		return true
	}
	return false
}

// corsHeaders are the answer's headers that let a page of another origin
// read it.
var corsHeaders = []string{"Access-Control-Allow-Origin", "Access-Control-Allow-Credentials", "Access-Control-Expose-Headers",
	"Access-Control-Allow-Headers", "Access-Control-Allow-Methods", "Access-Control-Allow-Private-Network", "Access-Control-Max-Age"}

// keptFromPage is the writer of an answer to a page of another site: the
// upstream's CORS headers are removed before they are written, so that
// the browser keeps the answer from the page.
type keptFromPage struct {
	http.ResponseWriter
}

func (w keptFromPage) strip() {
	h := w.Header()
	for _, name := range corsHeaders {
		h.Del(name)
	}
}

func (w keptFromPage) WriteHeader(code int) {
	w.strip()
	w.ResponseWriter.WriteHeader(code)
}

func (w keptFromPage) Write(p []byte) (int, error) {
	w.strip()
	return w.ResponseWriter.Write(p)
}

// FlushError writes the headers too: stripped first.
func (w keptFromPage) FlushError() error {
	w.strip()
	return http.NewResponseController(w.ResponseWriter).Flush()
}

func (w keptFromPage) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func isSafe(method string) bool {
	return method == http.MethodGet || method == http.MethodHead || method == http.MethodOptions
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
		what = "show this service's pages in a frame, nor run or read what it answers,"
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
