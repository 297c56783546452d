package aks_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/cloud"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"

	"github.com/authvault/authvault/cloud/aks"
)

const (
	tenant    = "72f988bf-86f1-41af-91ab-2d7cd011db47"
	client    = "0b1f6d3e-2c4a-4b7e-9f00-7a3c5e1d2b4f"
	secret    = "client-secret-value-never-shown"
	assertion = "eyJ.federated-assertion-never-shown.sig"
	wantScope = aks.DefaultServerID + "/.default"
)

// entra is a loopback stand-in for Microsoft Entra ID's token endpoint:
// the client-credentials grant with a client secret or a client assertion,
// for the AKS server application's scope. It answers a new token, valid
// for expiresIn.
type entra struct {
	t   testing.TB
	srv *httptest.Server

	expiresIn atomic.Int64 // seconds
	echo      atomic.Bool  // answer 401 with a body that quotes the request
	hang      atomic.Bool  // answer only when the request's context ends
	release   chan struct{}
	issued    atomic.Int64

	revokeNth atomic.Int64 // the token, counted from 1, revoked as it is issued; 0: none

	fed federatedEntra // the application's federated identity credential (Federated)

	mu       sync.Mutex // guards scope, requests and tokens
	scope    string     // the scope a request must ask for: wantScope unless a test says
	requests []tokenRequest
	tokens   map[string]issuedToken
}

// issuedToken is a token the stand-in issued.
type issuedToken struct {
	expires time.Time
	revoked bool
}

// issue makes the n-th token, valid for the stand-in's lifetime.
func (e *entra) issue(n int64) (string, time.Time) {
	tok := fmt.Sprintf("eyJ.aks-%d", n)
	exp := time.Now().Add(time.Duration(e.expiresIn.Load()) * time.Second)
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.tokens == nil {
		e.tokens = map[string]issuedToken{}
	}
	e.tokens[tok] = issuedToken{expires: exp, revoked: n == e.revokeNth.Load()}
	return tok, exp
}

// check says why tok is not good, as Entra ID's keys and revocation list
// would: "" when it is.
func (e *entra) check(tok string) string {
	e.mu.Lock()
	t, ok := e.tokens[tok]
	e.mu.Unlock()
	switch {
	case !ok:
		return "not issued by the stand-in"
	case t.revoked:
		return "revoked"
	case !time.Now().Before(t.expires):
		return "expired"
	}
	return ""
}

// tokenRequest is what the stand-in was asked for, no secret in it.
type tokenRequest struct {
	host   string // the host the client meant (see redirect)
	client string
	scope  string // the resource, for managed identity
	grant  string // "secret", "assertion", "certificate", "msi", "federated <subject>"
}

// msiHeader is App Service's managed identity secret, IDENTITY_HEADER.
const msiHeader = "msi-header-never-shown"

// setScope sets the scope the stand-in wants.
func (e *entra) setScope(scope string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.scope = scope
}

// asked returns the requests answered so far.
func (e *entra) asked() []tokenRequest {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.requests)
}

func (e *entra) record(r *http.Request, req tokenRequest) {
	req.host = cmpOr(r.Header.Get(meantHost), r.Host)
	e.mu.Lock()
	defer e.mu.Unlock()
	e.requests = append(e.requests, req)
}

func (e *entra) wantScope() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return cmpOr(e.scope, wantScope)
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func newEntra(t testing.TB) *entra {
	e := &entra{t: t, release: make(chan struct{})}
	e.expiresIn.Store(3600)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /"+tenant+"/v2.0/.well-known/openid-configuration", e.metadata)
	mux.HandleFunc("POST /"+tenant+"/oauth2/v2.0/token", e.token)
	mux.HandleFunc("GET /common/discovery/instance", e.discovery)
	mux.HandleFunc("GET /msi/token", e.msi)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("entra stand-in: unexpected %s %s", r.Method, r.URL)
		http.NotFound(w, r)
	})
	e.srv = httptest.NewTLSServer(mux)
	t.Cleanup(e.srv.Close)
	t.Cleanup(func() { close(e.release) })
	return e
}

func (e *entra) metadata(w http.ResponseWriter, r *http.Request) {
	base := "https://" + cmpOr(r.Header.Get(meantHost), r.Host) + "/" + tenant
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{
		"token_endpoint":         base + "/oauth2/v2.0/token",
		"authorization_endpoint": base + "/oauth2/v2.0/authorize",
		"issuer":                 base + "/v2.0",
	})
}

func (e *entra) token(w http.ResponseWriter, r *http.Request) {
	_ = r.ParseForm() // the server sees a client leave only once the body is read
	switch {
	case e.hang.Load():
		select {
		case <-r.Context().Done():
		case <-e.release:
		}
		return
	case e.echo.Load():
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		_ = json.NewEncoder(w).Encode(map[string]any{
			"error":             "invalid_client",
			"error_description": "AADSTS7000215: you sent " + r.PostForm.Encode(),
			"error_codes":       []int{7000215},
		})
		return
	}
	if trust := e.fed.trust.Load(); trust != nil && r.PostForm.Has("client_assertion") {
		e.federated(w, r, *trust)
		return
	}
	f := r.PostForm
	check := func(k, want string) bool {
		if got := f.Get(k); got != want {
			e.t.Errorf("entra stand-in: %s: got %q, want %q", k, got, want)
			w.WriteHeader(http.StatusBadRequest)
			return false
		}
		return true
	}
	if !check("grant_type", "client_credentials") || !check("client_id", client) {
		return
	}
	// MSAL adds OpenID Connect's scopes to the one asked for.
	want := e.wantScope()
	if scopes := strings.Fields(f.Get("scope")); !slices.Contains(scopes, want) {
		e.t.Errorf("entra stand-in: scope: got %q, want %q among them", scopes, want)
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	grant := "secret"
	switch {
	case f.Has("client_assertion") && f.Get("client_assertion") != assertion:
		grant = "certificate"
		if !check("client_assertion_type", "urn:ietf:params:oauth:client-assertion-type:jwt-bearer") {
			return
		}
		if err := verifyCertAssertion(f.Get("client_assertion")); err != nil {
			e.t.Errorf("entra stand-in: the client assertion: %v", err)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
	case f.Has("client_assertion"):
		grant = "assertion"
		if !check("client_assertion_type", "urn:ietf:params:oauth:client-assertion-type:jwt-bearer") {
			return
		}
	default:
		if !check("client_secret", secret) {
			return
		}
	}
	e.record(r, tokenRequest{client: f.Get("client_id"), scope: want, grant: grant})
	e.grant(w)
}

// grant answers a new token.
func (e *entra) grant(w http.ResponseWriter) {
	tok, _ := e.issue(e.issued.Add(1))
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{
		"token_type":     "Bearer",
		"expires_in":     e.expiresIn.Load(),
		"ext_expires_in": e.expiresIn.Load(),
		"access_token":   tok,
	})
}

// clientOptions point azidentity at the stand-in.
func (e *entra) clientOptions() azcore.ClientOptions {
	return azcore.ClientOptions{Cloud: cloud.Configuration{ActiveDirectoryAuthorityHost: e.srv.URL + "/"}, Transport: e.srv.Client()}
}

func (e *entra) secretCredential() azcore.TokenCredential {
	c, err := azidentity.NewClientSecretCredential(tenant, client, secret,
		&azidentity.ClientSecretCredentialOptions{ClientOptions: e.clientOptions(), DisableInstanceDiscovery: true})
	if err != nil {
		e.t.Fatal(err)
	}
	return c
}

func (e *entra) assertionCredential() azcore.TokenCredential {
	c, err := azidentity.NewClientAssertionCredential(tenant, client, func(ctx context.Context) (string, error) { return assertion, nil },
		&azidentity.ClientAssertionCredentialOptions{ClientOptions: e.clientOptions(), DisableInstanceDiscovery: true})
	if err != nil {
		e.t.Fatal(err)
	}
	return c
}

// newDefault is DefaultAzureCredential pointed at the stand-in, with the
// service principal from the environment.
func (e *entra) newDefault() (azcore.TokenCredential, error) {
	return azidentity.NewDefaultAzureCredential(&azidentity.DefaultAzureCredentialOptions{
		ClientOptions: e.clientOptions(), DisableInstanceDiscovery: true, TenantID: tenant,
	})
}

// setEnv is the environment of a service principal with a client secret.
func setEnv(t *testing.T) {
	t.Setenv("AZURE_TENANT_ID", tenant)
	t.Setenv("AZURE_CLIENT_ID", client)
	t.Setenv("AZURE_CLIENT_SECRET", secret)
}

// setWorkloadEnv is the environment AKS's workload identity webhook gives
// a pod: a federated token in a file.
func setWorkloadEnv(t testing.TB) {
	path := filepath.Join(t.TempDir(), "azure-identity-token")
	if err := os.WriteFile(path, []byte(assertion), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("AZURE_TENANT_ID", tenant)
	t.Setenv("AZURE_CLIENT_ID", client)
	t.Setenv("AZURE_CLIENT_SECRET", "")
	t.Setenv("AZURE_FEDERATED_TOKEN_FILE", path)
}

func (e *entra) expiry() time.Time {
	return time.Now().Add(time.Duration(e.expiresIn.Load()) * time.Second)
}

// testCA is a CA certificate for the cluster, in PEM.
var testCA = sync.OnceValue(func() []byte {
	k, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "aks-test-ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		panic(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
})
