package vault

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/authvault/authvault/login"
	"github.com/authvault/authvault/testkit/testpki"
	"github.com/authvault/authvault/testkit/testwait"
)

// Two handlers, as with the fallback defaults: a higher priority for
// cluster A, a lower one for cluster B. A's CA rotates: A's credential is
// invalidated and, while B's serves, A's handler still runs again after its
// backoff (no Select reaches the empty-vault path that starts logins), so
// the vault goes back to cluster A once A gives the new CA.
func TestTLSFailureOfTheTopPriorityIsRetriedWhileALowerServes(t *testing.T) {
	oldCA, newCA := testpki.NewCA(t), testpki.NewCA(t)
	srvA := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Cluster", "a")
	}))
	srvA.TLS = newCA.ServerTLS(t, "api", nil) // A already serves with the new CA
	srvA.StartTLS()
	defer srvA.Close()
	var bHits atomic.Int32
	srvB := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		bHits.Add(1)
		w.Header().Set("X-Cluster", "b")
	}))
	defer srvB.Close()

	var aCalls atomic.Int32
	v := New(Options{NoFallback: true})
	defer v.Close()
	const backoff = 50 * time.Millisecond
	v.OnLogin(func(context.Context) (*login.ConnectionInfo, error) {
		ca := oldCA.PEM // the first login still has the old CA; every later one the new
		if aCalls.Add(1) > 1 {
			ca = newCA.PEM
		}
		return &login.ConnectionInfo{Server: srvA.URL, CAData: ca, Token: "a", Priority: 30}, nil
	}, login.ID("a"), login.Backoff(backoff, 2*backoff))
	v.OnLogin(func(context.Context) (*login.ConnectionInfo, error) {
		return &login.ConnectionInfo{Server: srvB.URL, Token: "b", Priority: 20}, nil
	}, login.ID("b"), login.Backoff(backoff, 2*backoff))

	client := &http.Client{Transport: v.Transport(), Timeout: 5 * time.Second}
	get := func() (string, error) {
		resp, err := client.Get(srvA.URL + "/api")
		if err != nil {
			return "", err
		}
		resp.Body.Close()
		return resp.Header.Get("X-Cluster"), nil
	}
	if _, err := get(); !isTLSFailure(err) {
		t.Fatalf("first GET: %v, want a TLS verification failure (A's credential has the old CA)", err)
	}
	// A's handler, which now gives the new CA, runs again after its
	// backoff (100 ms at most) and A serves again; left alone while B
	// serves, it would not run again at all. The bound is a hang's.
	var cluster string
	var err error
	for deadline := time.Now().Add(testwait.Hang); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if cluster, err = get(); aCalls.Load() >= 2 && cluster == "a" {
			break
		}
	}
	if n := aCalls.Load(); n < 2 || cluster != "a" {
		t.Errorf("%v after A's TLS failure: A's handler ran %d time(s); GET %s/api went to cluster %q (err %v), B served %d requests meant for A; want A logged in again after its backoff",
			testwait.Hang, n, srvA.URL, cluster, err, bHits.Load())
	}
}
