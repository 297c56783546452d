package vault

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/authvault/authvault/login"
	"github.com/authvault/authvault/testkit/testwait"
)

func TestCallHandlerReturnsTheHandlersResult(t *testing.T) {
	want := &login.ConnectionInfo{Server: "https://a", Token: "t"}
	got, err := callHandler(context.Background(), configure(nil), func(context.Context) (*login.ConnectionInfo, error) { return want, nil })
	if err != nil || got != want {
		t.Errorf("Attempt() = %v, %v; want the handler's credential", got, err)
	}
	got, err = callHandler(context.Background(), configure(nil), func(context.Context) (*login.ConnectionInfo, error) { return nil, nil })
	if err != nil || got != nil {
		t.Errorf("Attempt() of an empty handler = %v, %v; want nil, nil", got, err)
	}
	boom := errors.New("boom")
	_, err = callHandler(context.Background(), configure(nil), func(context.Context) (*login.ConnectionInfo, error) { return nil, boom })
	if !errors.Is(err, boom) {
		t.Errorf("Attempt() error = %v, want %v", err, boom)
	}
}

func TestCallHandlerValidates(t *testing.T) {
	_, err := callHandler(context.Background(), configure(nil), func(context.Context) (*login.ConnectionInfo, error) {
		return &login.ConnectionInfo{Server: "not a url", Token: "secret-token"}, nil
	})
	if err == nil || !strings.Contains(err.Error(), "returned an invalid ConnectionInfo") || !strings.Contains(err.Error(), "Server") {
		t.Errorf("Attempt() error = %v, want a validation error naming Server", err)
	}
	if err != nil && strings.Contains(err.Error(), "secret-token") {
		t.Errorf("error %q reveals the token", err)
	}
}

func TestCallHandlerRecoversPanics(t *testing.T) {
	s := configure(nil, login.ID("panicky"))
	_, err := callHandler(context.Background(), s, func(context.Context) (*login.ConnectionInfo, error) { panic("oops") })
	var pe *login.PanicError
	if !errors.As(err, &pe) {
		t.Fatalf("Attempt() error = %v, want a *login.PanicError", err)
	}
	if pe.Handler != "panicky" || pe.Value != "oops" {
		t.Errorf("PanicError = %+v, want handler panicky and value oops", pe)
	}
	if !strings.Contains(err.Error(), `"panicky" panicked with a value of type string`) || strings.Contains(err.Error(), "oops") || strings.Contains(err.Error(), "goroutine") {
		t.Errorf("error = %q, want the handler and the value's type, no value and no stack", err)
	}
	sentinel := errors.New("wrapped")
	_, err = callHandler(context.Background(), s, func(context.Context) (*login.ConnectionInfo, error) { panic(sentinel) })
	if !errors.Is(err, sentinel) {
		t.Errorf("Attempt() error = %v, want it to wrap the panic's error", err)
	}
}

func TestCallHandlerAbandonsAHandlerPastItsTimeout(t *testing.T) {
	release := make(chan struct{})
	returned := make(chan struct{})
	s := configure(nil, login.Timeout(20*time.Millisecond))
	start := time.Now()
	_, err := callHandler(context.Background(), s, func(context.Context) (*login.ConnectionInfo, error) {
		defer close(returned)
		<-release // ignores its context
		return &login.ConnectionInfo{Server: "https://a"}, nil
	})
	// The handler returns only once release closes, below: a callHandler
	// that waited for it would not return at all. The bound is a hang's.
	if elapsed := time.Since(start); elapsed > testwait.Hang {
		t.Errorf("Attempt() took %v, want it to return at its timeout", elapsed)
	}
	if !errors.Is(err, login.ErrAbandoned) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Attempt() error = %v, want login.ErrAbandoned and DeadlineExceeded", err)
	}
	close(release)
	<-returned
}

func TestCallHandlerGivesTheHandlerItsDeadline(t *testing.T) {
	s := configure(nil, login.Timeout(time.Minute))
	_, err := callHandler(context.Background(), s, func(ctx context.Context) (*login.ConnectionInfo, error) {
		deadline, ok := ctx.Deadline()
		if !ok || time.Until(deadline) > time.Minute {
			return nil, errors.New("no deadline within the timeout")
		}
		return nil, nil
	})
	if err != nil {
		t.Error(err)
	}
}

func TestCallHandlerStopsWithItsContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	started := make(chan struct{})
	done := make(chan error)
	go func() {
		_, err := callHandler(ctx, configure(nil), func(ctx context.Context) (*login.ConnectionInfo, error) {
			close(started)
			<-ctx.Done()
			return nil, ctx.Err()
		})
		done <- err
	}()
	<-started
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("Attempt() error = %v, want context.Canceled", err)
	}
}

// A credential that fails Validate becomes an error that names the field
// and reveals no URL user info.
func TestCallHandlerRedactsAnInvalidCredentialsURL(t *testing.T) {
	for _, server := range []string{"http://usr-7q:pw-9x8y7z@proxy.example:bad", "usr-7q:pw-9x8y7z@proxy.example"} {
		_, err := callHandler(context.Background(), configure(nil), func(context.Context) (*login.ConnectionInfo, error) {
			return &login.ConnectionInfo{Server: server, Token: "t"}, nil
		})
		if err == nil || !strings.Contains(err.Error(), "Server") {
			t.Errorf("callHandler() error = %v, want one naming Server", err)
			continue
		}
		if strings.Contains(fmt.Sprintf("%+v", err), "pw-9x8y7z") || strings.Contains(err.Error(), "usr-7q") {
			t.Errorf("callHandler() error %q reveals the URL's user info", err)
		}
	}
}
