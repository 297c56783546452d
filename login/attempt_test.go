package login

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestAttemptReturnsTheHandlersResult(t *testing.T) {
	want := &ConnectionInfo{Server: "https://a", Token: "t"}
	got, err := Configure(nil).Attempt(context.Background(), func(context.Context) (*ConnectionInfo, error) { return want, nil })
	if err != nil || got != want {
		t.Errorf("Attempt() = %v, %v; want the handler's credential", got, err)
	}
	got, err = Configure(nil).Attempt(context.Background(), func(context.Context) (*ConnectionInfo, error) { return nil, nil })
	if err != nil || got != nil {
		t.Errorf("Attempt() of an empty handler = %v, %v; want nil, nil", got, err)
	}
	boom := errors.New("boom")
	_, err = Configure(nil).Attempt(context.Background(), func(context.Context) (*ConnectionInfo, error) { return nil, boom })
	if !errors.Is(err, boom) {
		t.Errorf("Attempt() error = %v, want %v", err, boom)
	}
}

func TestAttemptValidates(t *testing.T) {
	_, err := Configure(nil).Attempt(context.Background(), func(context.Context) (*ConnectionInfo, error) {
		return &ConnectionInfo{Server: "not a url", Token: "secret-token"}, nil
	})
	if err == nil || !strings.Contains(err.Error(), "returned an invalid ConnectionInfo") || !strings.Contains(err.Error(), "Server") {
		t.Errorf("Attempt() error = %v, want a validation error naming Server", err)
	}
	if err != nil && strings.Contains(err.Error(), "secret-token") {
		t.Errorf("error %q reveals the token", err)
	}
}

func TestAttemptRecoversPanics(t *testing.T) {
	s := Configure(nil, ID("panicky"))
	_, err := s.Attempt(context.Background(), func(context.Context) (*ConnectionInfo, error) { panic("oops") })
	var pe *PanicError
	if !errors.As(err, &pe) {
		t.Fatalf("Attempt() error = %v, want a *PanicError", err)
	}
	if pe.Handler != "panicky" || pe.Value != "oops" {
		t.Errorf("PanicError = %+v, want handler panicky and value oops", pe)
	}
	if !strings.Contains(err.Error(), `"panicky" panicked with a value of type string`) || strings.Contains(err.Error(), "oops") || strings.Contains(err.Error(), "goroutine") {
		t.Errorf("error = %q, want the handler and the value's type, no value and no stack", err)
	}
	sentinel := errors.New("wrapped")
	_, err = s.Attempt(context.Background(), func(context.Context) (*ConnectionInfo, error) { panic(sentinel) })
	if !errors.Is(err, sentinel) {
		t.Errorf("Attempt() error = %v, want it to wrap the panic's error", err)
	}
}

func TestAttemptAbandonsAHandlerPastItsTimeout(t *testing.T) {
	release := make(chan struct{})
	returned := make(chan struct{})
	s := Configure(nil, Timeout(20*time.Millisecond))
	start := time.Now()
	_, err := s.Attempt(context.Background(), func(context.Context) (*ConnectionInfo, error) {
		defer close(returned)
		<-release // ignores its context
		return &ConnectionInfo{Server: "https://a"}, nil
	})
	if elapsed := time.Since(start); elapsed > 2*time.Second {
		t.Errorf("Attempt() took %v, want it to return at its timeout", elapsed)
	}
	if !errors.Is(err, ErrAbandoned) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Attempt() error = %v, want ErrAbandoned and DeadlineExceeded", err)
	}
	close(release)
	<-returned
}

func TestAttemptGivesTheHandlerItsDeadline(t *testing.T) {
	s := Configure(nil, Timeout(time.Minute))
	_, err := s.Attempt(context.Background(), func(ctx context.Context) (*ConnectionInfo, error) {
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

func TestAttemptStopsWithItsContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	started := make(chan struct{})
	done := make(chan error)
	go func() {
		_, err := Configure(nil).Attempt(ctx, func(ctx context.Context) (*ConnectionInfo, error) {
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
