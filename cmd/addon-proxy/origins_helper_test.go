package main

import (
	"net/http"
	"testing"

	"k8s.io/client-go/rest"

	"github.com/authvault/authvault/addonauth"
)

// originGuarded is h behind the middleware made from c's options with
// every path ignored, so that what refuses a request is the cross-origin
// check alone (it comes before the paths): no API server is reached.
func originGuarded(t *testing.T, c config, h http.Handler) http.Handler {
	t.Helper()
	opts := c.auth
	opts.Config = &rest.Config{Host: "https://127.0.0.1:1"}
	opts.IgnorePaths = []string{"/*"}
	opts.FrontProxy = nil
	a, err := addonauth.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return a.Middleware(h)
}
