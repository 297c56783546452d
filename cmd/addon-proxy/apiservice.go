package main

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
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
func apiService(gv schema.GroupVersion, next http.Handler) http.Handler {
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
		case strings.HasPrefix(r.URL.Path, prefix+"/"):
			strip.ServeHTTP(w, r)
		default:
			http.NotFound(w, r)
		}
	})
}

// keepUnderPrefix rewrites a redirect of the upstream's to stay under
// prefix: a Location that is a path of the upstream's ("/x", or the
// upstream's own URL) becomes prefix+"/x", the address the browser knows
// the app by. Relative ones ("x", "../x") resolve under it already; one
// to another host is left as it is.
func keepUnderPrefix(h http.Header, prefix string, upstream *url.URL) {
	loc := h.Get("Location")
	if loc == "" {
		return
	}
	u, err := url.Parse(loc)
	if err != nil {
		return
	}
	if u.Host != "" {
		if !strings.EqualFold(u.Host, upstream.Host) || (u.Scheme != "" && u.Scheme != upstream.Scheme) {
			return
		}
		u.Scheme, u.Host, u.User = "", "", nil
	} else if u.Scheme != "" || !strings.HasPrefix(u.Path, "/") {
		return // relative, or another scheme (mailto:)
	}
	if u.Path == prefix || strings.HasPrefix(u.Path, prefix+"/") {
		return // the upstream knows its prefix
	}
	u.Path = prefix + u.Path
	if u.RawPath != "" {
		u.RawPath = prefix + u.RawPath
	}
	h.Set("Location", u.String())
}
