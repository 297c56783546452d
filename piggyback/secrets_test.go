package piggyback

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/client-go/rest"

	"github.com/authvault/authvault/handlers"
	"github.com/authvault/authvault/login"
)

const (
	urlUser = "usr-4k2"
	urlPass = "pw-8j7h6g"
)

// userinfoURLs are URLs with user info in every form: with and without a
// scheme, scheme-relative, with a bad port or scheme, malformed.
func userinfoURLs(host string) []string {
	ui := urlUser + ":" + urlPass
	return []string{
		"https://" + ui + "@" + host + ":6443",
		"http://" + ui + "@" + host + ":8080",
		ui + "@" + host + ":6443",
		"//" + ui + "@" + host,
		"https://" + ui + "@" + host + ":bad",
		"//" + ui + "@" + host + ":bad",
		"ht!tp://" + ui + "@" + host,
		"ftp://" + ui + "@" + host,
		"https://" + ui + "@" + host + ":%zz",
		"https://" + urlUser + ":" + urlPass + "/x@" + host,
		"https://" + urlPass + "@" + host,
	}
}

// assertNoUserinfo checks every printed form of err and info.
func assertNoUserinfo(t *testing.T, what string, info *login.ConnectionInfo, err error) {
	t.Helper()
	var outs []string
	if err != nil {
		outs = append(outs, err.Error(), fmt.Sprintf("%+v", err), fmt.Sprintf("%#v", err), fmt.Errorf("vault: %w", err).Error())
	}
	if info != nil {
		outs = append(outs, fmt.Sprintf("%+v", info), fmt.Sprintf("%#v", *info))
		if verr := info.Validate(); verr != nil {
			outs = append(outs, verr.Error())
		}
	}
	for _, out := range outs {
		for _, secret := range []string{urlPass, urlUser} {
			if strings.Contains(out, secret) {
				t.Errorf("%s: %s reveals %q", what, out, secret)
			}
		}
	}
}

// A kubeconfig server or proxy-url with user info: clientcmd's and
// url.Parse's errors quote the URL verbatim; ours must not.
func TestKubeconfigErrorsRedactURLUserinfo(t *testing.T) {
	dir := t.TempDir()
	for i, raw := range userinfoURLs("h.example") {
		for _, field := range []string{"server", "proxy-url"} {
			server, proxy := raw, ""
			if field == "proxy-url" {
				server, proxy = "https://api.example", fmt.Sprintf(", proxy-url: %q", raw)
			}
			path := filepath.Join(dir, fmt.Sprintf("%s-%d.yaml", field, i))
			writeFile(t, path, fmt.Sprintf(`apiVersion: v1
kind: Config
current-context: c
clusters: [{name: c, cluster: {server: %q, insecure-skip-tls-verify: true%s}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
users: [{name: u, user: {token: tok}}]
`, server, proxy))
			info, err := KubeconfigFrom(KubeconfigOptions{Path: path})(context.Background())
			assertNoUserinfo(t, field+" "+raw, info, err)
		}
	}
}

func TestRESTConfigErrorsRedactURLUserinfo(t *testing.T) {
	for _, raw := range userinfoURLs("h.example") {
		info, err := handlers.RESTConfig(&rest.Config{Host: raw, BearerToken: "tok", TLSClientConfig: rest.TLSClientConfig{Insecure: true}})(context.Background())
		assertNoUserinfo(t, "Host "+raw, info, err)
	}
}
