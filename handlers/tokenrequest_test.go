package handlers

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/authvault/authvault/login"
)

// tokenServer answers TokenRequests for serviceaccount ops/op and forbids
// every other.
func tokenServer(t *testing.T, expires time.Time) (*httptest.Server, *authenticationv1.TokenRequest) {
	t.Helper()
	got := &authenticationv1.TokenRequest{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.Method != http.MethodPost || r.URL.Path != "/api/v1/namespaces/ops/serviceaccounts/op/token" {
			w.WriteHeader(http.StatusForbidden)
			_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Forbidden","code":403,` +
				`"message":"serviceaccounts \"x\" is forbidden: cannot create resource \"serviceaccounts/token\""}`))
			return
		}
		if err := json.NewDecoder(r.Body).Decode(got); err != nil {
			t.Errorf("decoding the TokenRequest: %v", err)
		}
		got.Status = authenticationv1.TokenRequestStatus{Token: "minted-token", ExpirationTimestamp: metav1.NewTime(expires)}
		_ = json.NewEncoder(w).Encode(got)
	}))
	t.Cleanup(srv.Close)
	return srv, got
}

func TestTokenRequest(t *testing.T) {
	expires := time.Now().Add(10 * time.Minute).Truncate(time.Second)
	srv, got := tokenServer(t, expires)
	cs, err := kubernetes.NewForConfig(&rest.Config{Host: srv.URL, ContentConfig: rest.ContentConfig{ContentType: "application/json"}})
	if err != nil {
		t.Fatal(err)
	}
	h := TokenRequest(TokenRequestConfig{
		Client: cs.CoreV1(), Namespace: "ops", Name: "op",
		Audiences: []string{"https://kubernetes.default.svc"}, ExpirationSeconds: 600,
		BoundObject: &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: "op-0"},
		Cluster:     login.ConnectionInfo{Server: "https://tenant.example:6443", CAPath: "/ca.crt", Token: "not-copied"},
	})
	info, err := h(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if info.Token != "minted-token" || !info.Expiration.Equal(expires) || info.Server != "https://tenant.example:6443" || info.CAPath != "/ca.crt" {
		t.Errorf("credential = %v expiring %v, want the minted token on the cluster, expiring %v", info, info.Expiration, expires)
	}
	spec := got.Spec
	if len(spec.Audiences) != 1 || spec.ExpirationSeconds == nil || *spec.ExpirationSeconds != 600 || spec.BoundObjectRef == nil || spec.BoundObjectRef.Name != "op-0" {
		t.Errorf("the server got spec %+v, want the audiences, lifetime and bound object", spec)
	}
}

func TestTokenRequestErrorsNameTheServiceAccount(t *testing.T) {
	srv, _ := tokenServer(t, time.Now())
	cs, _ := kubernetes.NewForConfig(&rest.Config{Host: srv.URL, ContentConfig: rest.ContentConfig{ContentType: "application/json"}})
	_, err := TokenRequest(TokenRequestConfig{Client: cs.CoreV1(), Namespace: "ops", Name: "other"})(context.Background())
	if err == nil || !strings.Contains(err.Error(), "serviceaccount ops/other") || !strings.Contains(err.Error(), "forbidden") {
		t.Errorf("error = %v, want the ServiceAccount and the server's refusal", err)
	}
	_, err = TokenRequest(TokenRequestConfig{})(context.Background())
	var pe *login.PermanentError
	if err == nil || !strings.Contains(err.Error(), "needs a Client") || !errors.As(err, &pe) {
		t.Errorf("error = %v, want a permanent configuration error", err)
	}
}
