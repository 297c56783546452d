package side

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestClassify(t *testing.T) {
	gr := schema.GroupResource{Resource: "configmaps"}
	for _, c := range []struct {
		name string
		err  error
		want string
	}{
		{"401", apierrors.NewUnauthorized("no"), kindUnauthorized},
		{"401, wrapped", fmt.Errorf("soak: %w", apierrors.NewUnauthorized("no")), kindUnauthorized},
		{"403", apierrors.NewForbidden(gr, "x", errors.New("no")), kindForbidden},
		{"500", apierrors.NewInternalError(errors.New("boom")), kindServer},
		{"503", apierrors.NewServiceUnavailable("later"), kindServer},
		{"504 Timeout", apierrors.NewTimeoutError("slow", 1), kindTimeout},
		{"deadline", fmt.Errorf("get: %w", context.DeadlineExceeded), kindTimeout},
		{"EOF", fmt.Errorf("read: %w", io.EOF), kindRefused},
		{"no cluster", fmt.Errorf("read: %w", errNoCluster), kindNoCluster},
		{"addon 401", statusError{code: http.StatusUnauthorized}, kindUnauthorized},
		{"addon 502", statusError{code: http.StatusBadGateway}, kindServer},
		{"addon 429", statusError{code: http.StatusTooManyRequests}, kindOther},
		{"404", apierrors.NewNotFound(gr, "x"), kindOther},
		{"anything else", errors.New("soak: something"), kindOther},
	} {
		if got := classify(c.err); got != c.want {
			t.Errorf("%s: classify(%v) = %q, want %q", c.name, c.err, got, c.want)
		}
	}
}

// TestClassifyConnections classifies what real connections fail with: a
// port nobody listens on, a server whose CA the client does not trust,
// and a client whose deadline passes.
func TestClassifyConnections(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + l.Addr().String()
	l.Close()
	_, err = http.Get(closed)
	if got := classify(err); got != kindRefused {
		t.Errorf("a closed port: %q, want %q (%v)", got, kindRefused, err)
	}

	tlsSrv := httptest.NewTLSServer(http.NotFoundHandler())
	defer tlsSrv.Close()
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	_, err = client.Get(tlsSrv.URL)
	if got := classify(err); got != kindTLS {
		t.Errorf("an untrusted CA: %q, want %q (%v)", got, kindTLS, err)
	}

	block := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { <-block }))
	defer slow.Close()
	defer close(block)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, slow.URL, nil)
	_, err = slow.Client().Do(req)
	if got := classify(err); got != kindTimeout {
		t.Errorf("a deadline: %q, want %q (%v)", got, kindTimeout, err)
	}
}

func TestMessageIsBounded(t *testing.T) {
	long := errors.New(strings.Repeat("é", 400)) // two bytes each: a cut may fall inside one
	got := message(long)
	if len(got) > maxMessage+len("…") {
		t.Errorf("message of %d bytes: %d bytes, want at most %d", len(long.Error()), len(got), maxMessage+len("…"))
	}
	if !utf8.ValidString(got) {
		t.Errorf("message cut inside a rune: %q", got[len(got)-8:])
	}
	if short := errors.New("short"); message(short) != "short" {
		t.Errorf("message(%q) = %q", short, message(short))
	}
}
