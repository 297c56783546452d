package aks_test

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/authvault/authvault/cloud/aks"
	"github.com/authvault/authvault/handlers"
)

// meantHost is the header in which redirect tells the stand-in which host
// a request was for.
const meantHost = "X-Meant-Host"

// redirect sends every request of Native's credentials to the stand-in,
// whatever host it was for (Entra ID's public cloud, its instance
// discovery, a managed identity endpoint), and says which host that was.
type redirect struct{ e *entra }

func (r redirect) Do(req *http.Request) (*http.Response, error) {
	to, err := url.Parse(r.e.srv.URL)
	if err != nil {
		return nil, err
	}
	req = req.Clone(req.Context())
	req.Header.Set(meantHost, req.URL.Host)
	req.URL.Scheme, req.URL.Host, req.Host = to.Scheme, to.Host, ""
	return r.e.srv.Client().Do(req)
}

// discovery answers MSAL's instance discovery, which it asks of
// login.microsoftonline.com for an authority host it does not know.
func (e *entra) discovery(w http.ResponseWriter, r *http.Request) {
	u, err := url.Parse(r.URL.Query().Get("authorization_endpoint"))
	if err != nil || u.Host == "" {
		http.Error(w, "no authorization endpoint", http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{
		"tenant_discovery_endpoint": "https://" + u.Host + "/" + tenant + "/v2.0/.well-known/openid-configuration",
		"metadata":                  []map[string]any{{"preferred_network": u.Host, "preferred_cache": u.Host, "aliases": []string{u.Host}}},
	})
}

// msi is App Service's managed identity endpoint (IDENTITY_ENDPOINT).
func (e *entra) msi(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	want := strings.TrimSuffix(e.wantScope(), "/.default")
	if r.Header.Get("X-IDENTITY-HEADER") != msiHeader || q.Get("api-version") != "2019-08-01" || q.Get("resource") != want {
		e.t.Errorf("managed identity stand-in: header set %t, api-version %q, resource %q (want %q)",
			r.Header.Get("X-IDENTITY-HEADER") == msiHeader, q.Get("api-version"), q.Get("resource"), want)
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	e.record(r, tokenRequest{client: cmpOr(q.Get("client_id"), q.Get("mi_res_id")), scope: want, grant: "msi"})
	tok, exp := e.issue(e.issued.Add(1))
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{
		"access_token": tok,
		"expires_on":   fmt.Sprint(exp.Unix()),
		"resource":     want,
		"token_type":   "Bearer",
	})
}

// spnCert is a service principal's certificate and RSA key, in PEM.
var spnCert = sync.OnceValues(func() (*x509.Certificate, []byte) {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		panic(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "aks-operator"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		panic(err)
	}
	cert, _ := x509.ParseCertificate(der)
	pemData := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	return cert, append(pemData, pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(k)})...)
})

// verifyCertAssertion checks a client assertion signed with spnCert's key.
func verifyCertAssertion(assertion string) error {
	cert, _ := spnCert()
	tok, err := jwt.Parse(assertion, func(*jwt.Token) (any, error) { return cert.PublicKey, nil },
		jwt.WithValidMethods([]string{"RS256", "PS256"}), jwt.WithSubject(client), jwt.WithIssuer(client))
	if err != nil {
		return err
	}
	if !tok.Valid {
		return errors.New("not valid")
	}
	return nil
}

// envNames are every variable kubelogin or azidentity would read.
var envNames = []string{
	"AAD_LOGIN_METHOD", "AAD_SERVICE_PRINCIPAL_CLIENT_ID", "AAD_SERVICE_PRINCIPAL_CLIENT_SECRET",
	"AAD_SERVICE_PRINCIPAL_CLIENT_CERTIFICATE", "AAD_SERVICE_PRINCIPAL_CLIENT_CERTIFICATE_PASSWORD",
	"AAD_USER_PRINCIPAL_NAME", "AAD_USER_PRINCIPAL_PASSWORD",
	"AZURE_CLIENT_ID", "AZURE_TENANT_ID", "AZURE_CLIENT_SECRET", "AZURE_CLIENT_CERTIFICATE_PATH",
	"AZURE_CLIENT_CERTIFICATE_PASSWORD", "AZURE_FEDERATED_TOKEN_FILE", "AZURE_AUTHORITY_HOST",
	"AZURE_USERNAME", "AZURE_PASSWORD", "AZURE_REGIONAL_AUTHORITY_NAME",
	"ARM_CLIENT_ID", "ARM_TENANT_ID", "ARM_CLIENT_SECRET", "ARM_CLIENT_CERTIFICATE_PATH", "ARM_CLIENT_CERTIFICATE_PASSWORD",
	"IDENTITY_ENDPOINT", "IDENTITY_HEADER", "IDENTITY_SERVER_THUMBPRINT", "MSI_ENDPOINT", "MSI_SECRET", "IMDS_ENDPOINT",
	"ACTIONS_ID_TOKEN_REQUEST_TOKEN", "ACTIONS_ID_TOKEN_REQUEST_URL", "KUBECACHEDIR", "AZURE_CLI_TIMEOUT",
}

// cleanEnv unsets, for one test, every variable kubelogin or azidentity
// reads, then sets env.
func cleanEnv(t *testing.T, env map[string]string) {
	t.Helper()
	for _, n := range envNames {
		t.Setenv(n, "") // restored after the test
		if err := os.Unsetenv(n); err != nil {
			t.Fatal(err)
		}
	}
	for k, v := range env {
		t.Setenv(k, v)
	}
}

// useNative makes Native serve for one test, its credentials talking to
// e.
func useNative(t *testing.T, e *entra) {
	restore := aks.UseTransport(redirect{e})
	handlers.UseNative(aks.Native())
	t.Cleanup(func() {
		handlers.UseNative(handlers.Native{Name: "aks"}) // serves nothing
		restore()
	})
}

// writeFile writes data to a new file of the test's, and returns its path.
func writeFile(t *testing.T, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// kubelogin is an exec user running `kubelogin get-token` with args.
func kubelogin(args ...string) clientcmdapi.ExecConfig {
	return clientcmdapi.ExecConfig{Command: "kubelogin", Args: append([]string{"get-token"}, args...),
		APIVersion: "client.authentication.k8s.io/v1beta1", InteractiveMode: clientcmdapi.NeverExecInteractiveMode}
}

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }
