package main

import (
	"context"
	"encoding/json"
	"html"
	"io"
	"net/http"
	"net/url"
	"path"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"golang.org/x/time/rate"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/authvault/authvault/internal/methodoverride"
)

// apiServicePrefix is where the API server's aggregation layer sends the
// requests for gv: /apis/GROUP/VERSION.
func apiServicePrefix(gv schema.GroupVersion) string {
	return "/apis/" + gv.Group + "/" + gv.Version
}

// apiService serves what the aggregation layer asks of an APIService's
// backend, behind the middleware: its discovery document at the prefix
// (the availability check and discovery both GET it, as
// system:kube-aggregator, and give up after 5 s), and everything under
// the prefix forwarded to next without it, so that an ordinary web app
// serves /apis/GROUP/VERSION/x as its /x. Any other path is not the
// APIService's: 404 (the aggregator asks for /apis first, then falls back
// to the group-version).
func apiService(gv schema.GroupVersion, next http.Handler, log logr.Logger) http.Handler {
	prefix := apiServicePrefix(gv)
	// No resources: the paths are a web app's, not an API's; the API
	// server still authorizes each as a resource request (see the guide).
	discovery, _ := json.Marshal(metav1.APIResourceList{
		TypeMeta:     metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"},
		GroupVersion: gv.String(),
		APIResources: []metav1.APIResource{},
	})
	strip := http.StripPrefix(prefix, next)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == prefix && (r.Method == http.MethodGet || r.Method == http.MethodHead):
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(discovery)
		case strings.HasPrefix(r.URL.Path, prefix+"/") && methodoverride.In(r):
			// The API server authorized the request's own method (a POST
			// as create): an upstream that honours an override would
			// serve another (a DELETE).
			refuseOverride(log, w, r, "header or query", overrideRefusal(r.Method))
		case strings.HasPrefix(r.URL.Path, prefix+"/") && !ambiguous(r.URL):
			g, err := guardForm(r)
			if err != nil {
				refuseOverride(log, w, r, "form body", "addon-proxy: "+err.Error()+" (a Content-Encoding, a charset other than ASCII's, or more than one boundary) is refused under --apiservice: "+
					"the service could read a _method in it that addon-proxy cannot")
				return
			}
			if g != nil {
				defer g.stop()
				r = r.WithContext(context.WithValue(r.Context(), formGuardKey{}, g))
				r.Body = g
			}
			strip.ServeHTTP(w, r)
		default:
			http.NotFound(w, r)
		}
	})
}

// ambiguous tells whether an app may read u's path as another than the
// one the API server authorized: a dot segment (the API server resolves
// none, and reads ".." as a resource's name, where most apps resolve it),
// an encoded slash or backslash, a backslash, or an empty segment.
func ambiguous(u *url.URL) bool {
	if strings.Contains(u.Path, "\\") {
		return true
	}
	if raw := strings.ToLower(u.RawPath); strings.Contains(raw, "%2f") || strings.Contains(raw, "%5c") {
		return true
	}
	if strings.Contains(u.Path, "//") {
		return true // an app that merges slashes shifts RBAC's RESOURCE/NAME/SUBRESOURCE
	}
	for seg := range strings.SplitSeq(u.Path, "/") {
		// Servlet containers (Tomcat, Jetty) drop a segment's ";params"
		// before they resolve dot segments: "..;x" is "..".
		if name, _, _ := strings.Cut(seg, ";"); name == "." || name == ".." {
			return true
		}
	}
	return false
}

// keepUnderPrefix rewrites a redirect of the upstream's to stay under
// prefix: a Location that is a path of the upstream's ("/x", "x",
// "../x", or the upstream's own URL), resolved against the upstream's
// request (whose paths start at "/", so ".." climbs no higher), becomes
// prefix+"/x", the address the browser knows the app by. One to another
// host, or another scheme, is left as it is. It returns the Location
// when it is now a path under prefix.
func keepUnderPrefix(h http.Header, prefix string, upstream, request *url.URL) (string, bool) {
	loc := h.Get("Location")
	if loc == "" {
		return "", false
	}
	u, err := url.Parse(loc)
	if err != nil {
		return "", false
	}
	if u.Host != "" {
		if !sameHost(u, upstream) || (u.Scheme != "" && u.Scheme != upstream.Scheme) {
			return "", false
		}
	} else if u.Scheme != "" || u.Opaque != "" {
		return "", false // another scheme (mailto:)
	}
	u.Scheme, u.Host, u.User = "", "", nil
	if u.Path != prefix && !strings.HasPrefix(u.Path, prefix+"/") {
		u = (&url.URL{Path: request.Path, RawPath: request.RawPath}).ResolveReference(u)
		u.Path = prefix + u.Path
		if u.RawPath != "" {
			u.RawPath = prefix + u.RawPath
		}
	}
	// Where the browser will go: its dot segments resolved, the encoded
	// ones too ("%2e%2e"). Out of the app, or to a path the app may read
	// as another, it is left for the aggregator to refuse.
	if raw := strings.ToLower(u.RawPath); strings.Contains(raw, "%2f") || strings.Contains(raw, "%5c") || strings.Contains(u.Path, "\\") {
		return "", false
	}
	clean := path.Clean(u.Path)
	if (strings.HasSuffix(u.Path, "/") || strings.HasSuffix(u.Path, "/.") || strings.HasSuffix(u.Path, "/..")) && clean != "/" {
		clean += "/" // where a browser goes: "x/.." is "x/../", a directory
	}
	if clean != prefix && !strings.HasPrefix(clean, prefix+"/") {
		return "", false
	}
	u.Path, u.RawPath = clean, ""
	h.Set("Location", u.String())
	return u.String(), true
}

// sendOn replaces a redirect that stays under the prefix with a page that
// sends the browser on (a Refresh header, and a meta refresh and a link
// for what ignores it): the aggregation layer answers every 3xx with a
// Location with 502 (kube-apiserver's --aggregator-reject-forwarding-redirect,
// on by default), so that no client follows an aggregated server's
// redirect with its credentials. A browser behind kubectl proxy holds
// none, and the page sends it to a path of the same app. A redirect
// elsewhere is left for the aggregator to refuse.
func sendOn(resp *http.Response, prefix string, upstream *url.URL) {
	loc, ok := keepUnderPrefix(resp.Header, prefix, upstream, resp.Request.URL)
	if !ok || resp.StatusCode < 300 || resp.StatusCode > 399 {
		return
	}
	_ = resp.Body.Close()
	// Relative to the page the browser asked for: right behind kubectl
	// proxy or any other proxy, whatever address the browser knows.
	loc = relativeTo(prefix+resp.Request.URL.Path, loc)
	escaped := html.EscapeString(loc)
	body := `<!doctype html><meta http-equiv="refresh" content="0; url=` + escaped + `"><title>Moved</title><a href="` + escaped + `">` + escaped + "</a>\n"
	for _, h := range []string{"Location", "Content-Length", "Content-Encoding", "Content-Range", "Etag"} {
		resp.Header.Del(h) // the redirect's body is gone: nothing of it stays
	}
	resp.Header.Set("Refresh", "0; url="+loc)
	resp.Header.Set("Content-Type", "text/html; charset=utf-8")
	resp.Header.Set("Cache-Control", "no-store")
	resp.StatusCode, resp.Status = http.StatusOK, "200 OK"
	resp.Body, resp.ContentLength = io.NopCloser(strings.NewReader(body)), int64(len(body))
}

// sameHost tells whether u names upstream's host and port, a port left
// out being its scheme's default.
func sameHost(u, upstream *url.URL) bool {
	port := func(v *url.URL, scheme string) string {
		if p := v.Port(); p != "" {
			return p
		}
		if scheme == "https" {
			return "443"
		}
		return "80"
	}
	scheme := u.Scheme
	if scheme == "" {
		scheme = upstream.Scheme
	}
	return strings.EqualFold(u.Hostname(), upstream.Hostname()) && port(u, scheme) == port(upstream, upstream.Scheme)
}

// relativeTo is the reference from the page at path from to target, an
// absolute path with an optional query: "notes" from /p/notes to
// /p/notes, "../c?x" from /p/a/b to /p/c?x. It never starts with a scheme
// or "//" a browser would read as an address of its own.
func relativeTo(from, target string) string {
	targetPath, query, hasQuery := strings.Cut(target, "?")
	dir := strings.Split(from[:strings.LastIndex(from, "/")+1], "/") // ends with ""
	to := strings.Split(targetPath, "/")
	common := 0
	for common < len(dir)-1 && common < len(to)-1 && dir[common] == to[common] {
		common++
	}
	var b strings.Builder
	for range len(dir) - 1 - common {
		b.WriteString("../")
	}
	b.WriteString(strings.Join(to[common:], "/"))
	rel := b.String()
	if rel == "" || strings.HasPrefix(rel, "/") || strings.Contains(strings.SplitN(rel, "/", 2)[0], ":") {
		rel = "./" + rel
	}
	if hasQuery {
		rel += "?" + query
	}
	return rel
}

// overrideRefusal is the answer to a request with a method override.
func overrideRefusal(method string) string {
	return "addon-proxy: a method override (X-HTTP-Method-Override, X-HTTP-Method, X-Method-Override, or _method in the query or a form body) is refused: " +
		"the API server authorized this request as a " + method + ", and the service must not serve it as another method"
}

// overrideLog bounds the INFO line of refused overrides: each is at V(1).
var overrideLog = rate.Sometimes{Interval: time.Minute}

// refuseOverride answers 403 with text, and logs the refusal: at V(1)
// each, at INFO once a minute at most.
func refuseOverride(log logr.Logger, w http.ResponseWriter, r *http.Request, where, text string) {
	log.V(1).Info("method override refused", "where", where, "method", r.Method, "path", r.URL.Path, "remote", r.RemoteAddr)
	overrideLog.Do(func() {
		log.Info("method overrides refused under --apiservice (each one logged at V(1); this line at most once a minute)", "where", where, "path", r.URL.Path)
	})
	http.Error(w, text, http.StatusForbidden)
}
