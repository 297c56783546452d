package main

import (
	"flag"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	authzv1 "k8s.io/api/authorization/v1"
)

func parse(args ...string) (config, error) {
	fs := flag.NewFlagSet("addon-proxy", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return parseFlags(fs, append([]string{"--upstream", "http://127.0.0.1:8080"}, args...))
}

// What a user of kube-rbac-proxy looks for: several audiences, path
// lists, resource attributes with group and name, the API client's rate.
func TestFlags(t *testing.T) {
	c, err := parse("--audience", "greeter.addons.svc,greeter", "--audience", "greeter.addons",
		"--allow-paths", "/hello,/api/*", "--allow-paths", "/metrics", "--ignore-paths", "/healthz",
		"--kube-api-qps", "20", "--kube-api-burst", "40", "--verify-timeout", "15s", "--stale-wait", "750ms",
		"--authorize-resource", "namespace=prod,group=apps,version=v1,resource=deployments,subresource=scale,name=web")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := c.auth.Audiences, []string{"greeter.addons.svc", "greeter", "greeter.addons"}; !slices.Equal(got, want) {
		t.Errorf("audiences = %q, want %q", got, want)
	}
	if got, want := c.auth.AllowPaths, []string{"/hello", "/api/*", "/metrics"}; !slices.Equal(got, want) {
		t.Errorf("allow paths = %q, want %q", got, want)
	}
	if got, want := c.auth.IgnorePaths, []string{"/healthz"}; !slices.Equal(got, want) {
		t.Errorf("ignore paths = %q, want %q", got, want)
	}
	if c.apiQPS != 20 || c.apiBurst != 40 || c.verifyTimeout != 15*time.Second {
		t.Errorf("qps %v, burst %d, verify timeout %v; want 20, 40, 15s", c.apiQPS, c.apiBurst, c.verifyTimeout)
	}
	if c.auth.StaleWait != 750*time.Millisecond {
		t.Errorf("stale wait = %v, want 750ms", c.auth.StaleWait)
	}
	want := authzv1.ResourceAttributes{Namespace: "prod", Group: "apps", Version: "v1", Resource: "deployments", Subresource: "scale", Name: "web"}
	if c.auth.Authorization == nil || c.auth.Authorization.Resource == nil || *c.auth.Authorization.Resource != want {
		t.Errorf("authorization = %+v, want the resource %+v", c.auth.Authorization, want)
	}

	c, err = parse("--audience", "a")
	if err != nil {
		t.Fatal(err)
	}
	if c.apiQPS != 100 || c.apiBurst != 200 || c.verifyTimeout != 30*time.Second {
		t.Errorf("defaults: qps %v, burst %d, verify timeout %v; want 100, 200, 30s", c.apiQPS, c.apiBurst, c.verifyTimeout)
	}
}

func TestAuthorizeResource(t *testing.T) {
	for in, want := range map[string]authzv1.ResourceAttributes{
		"monitoring/services/proxy":               {Namespace: "monitoring", Resource: "services", Subresource: "proxy"},
		"monitoring/services":                     {Namespace: "monitoring", Resource: "services"},
		"/nodes/metrics":                          {Resource: "nodes", Subresource: "metrics"},
		"resource=nodes,subresource=metrics":      {Resource: "nodes", Subresource: "metrics"},
		"apiGroup=apps,resource=deployments":      {Group: "apps", Resource: "deployments"},
		"resource=pods, namespace=a, verb=list":   {Namespace: "a", Resource: "pods", Verb: "list"},
		"group=,resource=configmaps,name=my-conf": {Resource: "configmaps", Name: "my-conf"},
	} {
		c, err := parse("--audience", "a", "--authorize-resource", in)
		if err != nil {
			t.Errorf("%q: %v", in, err)
			continue
		}
		if got := *c.auth.Authorization.Resource; got != want {
			t.Errorf("%q = %+v, want %+v", in, got, want)
		}
	}
	for _, in := range []string{"services", "a/", "a/b/c/d", "namespace=a", "resource=pods,colour=blue", "resource=pods,resource=svc", "resource"} {
		if _, err := parse("--audience", "a", "--authorize-resource", in); err == nil || !strings.Contains(err.Error(), "--authorize-resource") {
			t.Errorf("%q: %v, want an error naming --authorize-resource", in, err)
		}
	}
}

func TestFlagErrors(t *testing.T) {
	for name, args := range map[string][]string{
		"no audience":          {},
		"empty audience":       {"--audience", ","},
		"burst without room":   {"--audience", "a", "--kube-api-qps", "10", "--kube-api-burst", "0"},
		"qps zero":             {"--audience", "a", "--kube-api-qps", "0"}, // client-go's 5 per second, not no limit
		"no verify bound":      {"--audience", "a", "--verify-timeout", "0"},
		"ca for http":          {"--audience", "a", "--upstream-ca-file", "/dev/null"},
		"h2c for https":        {"--audience", "a", "--upstream-force-h2c", "--upstream", "https://127.0.0.1:8443"},
		"upstream not a URL":   {"--audience", "a", "--upstream", "127.0.0.1:8080"},
		"cert without the key": {"--audience", "a", "--tls-cert-file", "x"},
	} {
		if _, err := parse(args...); err == nil {
			t.Errorf("%s: %q accepted", name, args)
		}
	}
}
