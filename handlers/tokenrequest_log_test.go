package handlers_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/authvault/authvault/handlers"
	"github.com/authvault/authvault/login"
	"github.com/authvault/authvault/testkit/testlog"
	"github.com/authvault/authvault/vault"
)

// client-go logs a response's body at V(8) through the logger of the
// request's context: a TokenRequest's is the token. A vault whose logger
// is at V(10) shows none of it: a handler's logger stops below the bodies.
func TestTokenRequestLogsNoTokenAtAnyVerbosity(t *testing.T) {
	const minted = "eyJhbGciOiJSUzI1NiJ9.minted-token-body.signature"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req authenticationv1.TokenRequest
		_ = json.NewDecoder(r.Body).Decode(&req)
		req.Status.Token = minted
		req.Kind, req.APIVersion = "TokenRequest", "authentication.k8s.io/v1"
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(&req)
	}))
	defer srv.Close()
	cs, err := kubernetes.NewForConfig(&rest.Config{Host: srv.URL, ContentConfig: rest.ContentConfig{ContentType: "application/json"}})
	if err != nil {
		t.Fatal(err)
	}
	var logs testlog.Buffer
	v := vault.New(vault.Options{NoFallback: true, Logger: logs.Logger(10)})
	defer v.Close()
	v.OnLogin(handlers.TokenRequest(handlers.TokenRequestConfig{Client: cs.CoreV1(), Namespace: "fleet", Name: "op",
		Cluster: login.ConnectionInfo{Server: "https://member.example"}}))
	if _, err := v.RESTConfig(context.Background()); err != nil {
		t.Fatal(err)
	}
	out := logs.String()
	if strings.Contains(out, "minted-token-body") {
		t.Errorf("the vault's log shows the token:\n%s", out)
	}
	if !strings.Contains(out, "logging in") {
		t.Errorf("the vault's log is empty: the test shows nothing")
	}
}
