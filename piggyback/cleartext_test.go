package piggyback

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/client-go/rest"

	"github.com/authvault/authvault/handlers"
	"github.com/authvault/authvault/login"
)

// A kubeconfig server without a scheme, with no CA, is plain http to
// client-go: the login must fail, permanently, naming the entry, instead of
// producing a credential for plain http.
func TestKubeconfigWithoutSchemeIsNotCleartext(t *testing.T) {
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "token")
	writeFile(t, tokenFile, "file-token\n")
	ca := filepath.Join(dir, "ca.crt")
	writeFile(t, ca, string(newCorpus(t).cert))
	clusters := map[string]string{
		"":          "",
		"/CA":       fmt.Sprintf(", certificate-authority: %q", ca),
		"/insecure": ", insecure-skip-tls-verify: true",
	}
	users := map[string]string{
		"token":      "{token: tok-clear-1}",
		"token file": fmt.Sprintf("{tokenFile: %q}", tokenFile),
		"basic":      "{username: u, password: pw-clear-2}",
		"nothing":    "{}",
	}
	for _, server := range []string{"10.0.0.1:6443", "api.example:6443", "api.example", "[::1]:6443", "localhost:8080"} {
		for kind, user := range users {
			for trust, extra := range clusters {
				t.Run(server+"/"+kind+trust, func(t *testing.T) {
					path := filepath.Join(dir, strings.NewReplacer("/", "_", ":", "_", " ", "_").Replace(server+kind+trust)+".yaml")
					writeFile(t, path, fmt.Sprintf(`apiVersion: v1
kind: Config
current-context: ctx-a
clusters: [{name: cluster-a, cluster: {server: %q%s}}]
contexts: [{name: ctx-a, context: {cluster: cluster-a, user: user-a}}]
users: [{name: user-a, user: %s}]
`, server, extra, user))
					info, err := KubeconfigFrom(KubeconfigOptions{Path: path})(context.Background())
					if err == nil {
						t.Fatalf("KubeconfigFrom() = %v, want an error: server %q would be plain http", info, server)
					}
					for _, want := range []string{"piggyback: ", path, `context "ctx-a"`, `cluster "cluster-a"`, "http"} {
						if !strings.Contains(err.Error(), want) {
							t.Errorf("error = %v, want it to contain %q", err, want)
						}
					}
					var pe *login.PermanentError
					if !errors.As(err, &pe) {
						t.Errorf("error %v is not permanent", err)
					}
					if strings.Contains(err.Error(), "tok-clear-1") || strings.Contains(err.Error(), "pw-clear-2") {
						t.Errorf("error = %v, reveals a secret", err)
					}
				})
			}
		}
	}
}

// What stays allowed: https, whatever its spelling, and http when the
// kubeconfig says http:// (clientcmd gives no credential then).
func TestKubeconfigSchemesThatStayAllowed(t *testing.T) {
	dir := t.TempDir()
	for name, cluster := range map[string]string{
		"https":         `{server: "https://api.example:6443"}`,
		"HTTPS":         `{server: "HTTPS://api.example:6443"}`,
		"explicit http": `{server: "http://127.0.0.1:8080"}`,
		"explicit HTTP": `{server: "HTTP://127.0.0.1:8080"}`,
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(name, " ", "_")+".yaml")
			writeFile(t, path, fmt.Sprintf(`apiVersion: v1
kind: Config
current-context: c
clusters: [{name: c, cluster: %s}]
contexts: [{name: c, context: {cluster: c, user: u}}]
users: [{name: u, user: {token: tok}}]
`, cluster))
			info, err := KubeconfigFrom(KubeconfigOptions{Path: path})(context.Background())
			if err != nil {
				t.Fatalf("KubeconfigFrom() error = %v", err)
			}
			if strings.HasPrefix(info.Server, "http://") && info.Token != "" {
				t.Errorf("credential %v sends a token over plain http", info)
			}
		})
	}
}

func TestRESTConfigWithoutSchemeIsNotCleartext(t *testing.T) {
	for _, host := range []string{"10.0.0.1:6443", "api.example"} {
		info, err := handlers.RESTConfig(&rest.Config{Host: host, BearerToken: "tok-clear-3"})(context.Background())
		var pe *login.PermanentError
		if err == nil || !errors.As(err, &pe) || !strings.Contains(err.Error(), "rest.Config: server") {
			t.Errorf("handlers.RESTConfig(Host %q) = %v, %v; want a permanent error naming the server", host, info, err)
		}
	}
	// rest.Config talks TLS to a Host without a scheme when it has a CA
	// or Insecure: allowed.
	info, err := handlers.RESTConfig(&rest.Config{Host: "10.0.0.1:6443", BearerToken: "tok", TLSClientConfig: rest.TLSClientConfig{Insecure: true}})(context.Background())
	if err != nil || info.Server != "https://10.0.0.1:6443" {
		t.Errorf("handlers.RESTConfig(no scheme, insecure) = %v, %v; want an https credential", info, err)
	}
	info, err = handlers.RESTConfig(&rest.Config{Host: "http://10.0.0.1:8080", BearerToken: "tok"})(context.Background())
	if err != nil || info.Server != "http://10.0.0.1:8080" {
		t.Errorf("handlers.RESTConfig(explicit http) = %v, %v; want the credential: http:// says so", info, err)
	}
}
