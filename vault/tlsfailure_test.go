package vault

import (
	"context"
	"crypto/tls"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/authvault/authvault/login"
	"github.com/authvault/authvault/testkit/testpki"
)

// The cluster's CA rotates: the server's new certificate fails
// verification against the credential's CA. The credential is invalidated
// and its handler runs again, spaced by its backoff, never with relaxed
// verification; once the CA file it reads holds the new CA, requests go
// through again, without a restart.
func TestCARotationHealsWithoutARestart(t *testing.T) {
	oldCA, newCA := testpki.NewCA(t), testpki.NewCA(t)
	oldTLS, newTLS := oldCA.ServerTLS(t, "api", nil), newCA.ServerTLS(t, "api", nil)
	var serving atomic.Pointer[tls.Certificate]
	serving.Store(&oldTLS.Certificates[0])
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer t" {
			w.WriteHeader(http.StatusUnauthorized)
		}
	}))
	srv.EnableHTTP2 = true
	srv.TLS = &tls.Config{GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
		return &tls.Config{Certificates: []tls.Certificate{*serving.Load()}, NextProtos: []string{"h2", "http/1.1"}}, nil
	}}
	srv.StartTLS()
	defer srv.Close()

	caFile := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(caFile, oldCA.PEM, 0o600); err != nil {
		t.Fatal(err)
	}
	var reasons reasons
	var calls atomic.Int32
	v := New(Options{NoFallback: true})
	defer v.Close()
	const backoff = 100 * time.Millisecond
	v.OnLogin(reasons.wrap(func(context.Context) (*login.ConnectionInfo, error) {
		calls.Add(1)
		return &login.ConnectionInfo{Server: srv.URL, CAPath: caFile, Token: "t"}, nil
	}), login.ID("rotating-ca"), login.Backoff(backoff, 4*backoff))
	client := &http.Client{Transport: v.Transport(), Timeout: 5 * time.Second}
	getStatus := func() (int, error) {
		resp, err := client.Get(srv.URL + "/api")
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	if status, err := getStatus(); status != 200 {
		t.Fatalf("GET before the rotation = %d %v", status, err)
	}

	// The CA rotates, and the server restarts with it: new session ticket
	// keys, so no TLS session of before resumes (a resumed session skips
	// the certificate, and would go on being trusted until the old
	// certificate expires, as it may with a server that reloads its
	// certificate in place).
	serving.Store(&newTLS.Certificates[0])
	srv.TLS.SetSessionTicketKeys([][32]byte{{1}})
	srv.CloseClientConnections()
	// The first request may still meet the connection being closed.
	eventually(t, "a TLS verification failure", func() bool {
		_, err := getStatus()
		return isTLSFailure(err)
	})
	// While the CA file still holds the old CA: nothing gets through, and
	// the handler runs at most once per backoff, not once per request.
	before := calls.Load()
	start := time.Now()
	for time.Since(start) < 5*backoff {
		if status, _ := getStatus(); status == 200 {
			t.Fatal("a request went through against a CA that did not sign the server's certificate")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if n := calls.Load() - before; n > 5 {
		t.Errorf("handler ran %d times in %v of TLS failures, want at most one per backoff", n, 5*backoff)
	}
	if got := reasons.last(); got.Kind != login.TLSFailure {
		t.Errorf("handler's reason = %v, want %v", got, login.TLSFailure)
	}

	if err := os.WriteFile(caFile, newCA.PEM, 0o600); err != nil { // the new CA arrives
		t.Fatal(err)
	}
	rotated := time.Now()
	eventually(t, "requests to go through with the new CA", func() bool {
		status, _ := getStatus()
		return status == 200
	})
	t.Logf("recovered %v after the new CA file was written (backoff %v to %v)", time.Since(rotated).Round(time.Millisecond), backoff, 4*backoff)
}

// Network errors are not TLS failures: a closed port invalidates nothing.
func TestOnlyVerificationFailuresAreTLSFailures(t *testing.T) {
	for _, err := range []error{
		errors.New("connection refused"),
		context.DeadlineExceeded,
		&tls.RecordHeaderError{Msg: "first record does not look like a TLS handshake"},
	} {
		if isTLSFailure(err) {
			t.Errorf("isTLSFailure(%v) = true", err)
		}
	}
}
