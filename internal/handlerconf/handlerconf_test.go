package handlerconf_test

import (
	"context"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/authvault/authvault/internal/handlerconf"
	"github.com/authvault/authvault/login"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func namedHandler(context.Context) (*login.ConnectionInfo, error) { return nil, nil }

func TestConfigureDefaults(t *testing.T) {
	s := handlerconf.Configure[login.Option](namedHandler)
	want := handlerconf.Settings{ID: "handlerconf_test.namedHandler", Label: "handlerconf_test.namedHandler", Retries: login.Unlimited, BackoffInitial: time.Second, BackoffMax: time.Minute}
	if s != want {
		t.Errorf("handlerconf.Configure() = %+v, want %+v", s, want)
	}
}

func TestConfigureOptions(t *testing.T) {
	s := handlerconf.Configure(namedHandler, login.ID("mine"), login.Retries(3), login.Backoff(time.Millisecond, time.Second), login.Timeout(5*time.Second))
	want := handlerconf.Settings{ID: "mine", Label: "mine", Retries: 3, BackoffInitial: time.Millisecond, BackoffMax: time.Second, Timeout: 5 * time.Second}
	if s != want {
		t.Errorf("handlerconf.Configure() = %+v, want %+v", s, want)
	}
}

func TestConfigureRepairsNonsense(t *testing.T) {
	s := handlerconf.Configure(namedHandler, login.Retries(-7), login.Backoff(-1, -1))
	if s.Retries != login.Unlimited || s.BackoffInitial != handlerconf.DefaultBackoffInitial || s.BackoffMax != handlerconf.DefaultBackoffInitial {
		t.Errorf("handlerconf.Configure() = %+v, want unlimited retries and a 1 s backoff", s)
	}
}

func TestFuncNameOfClosures(t *testing.T) {
	got := handlerconf.FuncName(func(context.Context) (*login.ConnectionInfo, error) { return nil, nil })
	if !strings.HasPrefix(got, "handlerconf_test.TestFuncNameOfClosures.func") {
		t.Errorf("handlerconf.FuncName() = %q, want the enclosing function's name", got)
	}
	var s source
	if got := handlerconf.FuncName(s.login); got != "handlerconf_test.source.login" {
		t.Errorf("handlerconf.FuncName(method value) = %q, want handlerconf_test.source.login", got)
	}
	if got := handlerconf.FuncName(nil); got != "handler" {
		t.Errorf("handlerconf.FuncName(nil) = %q, want handler", got)
	}
}

type source struct{}

func (source) login(context.Context) (*login.ConnectionInfo, error) { return nil, nil }

// login cannot name handlerconf's constant in its documentation without
// showing an internal package: the two are kept equal here.
func TestUnlimitedAgreesWithLogin(t *testing.T) {
	if handlerconf.Unlimited != login.Unlimited {
		t.Errorf("handlerconf.Unlimited = %d, login.Unlimited = %d", handlerconf.Unlimited, login.Unlimited)
	}
}

// login sets the Digest hook when it is loaded (the vault imports login, so
// it is set before any vault runs), and it is the digest behind a
// credential's Fingerprint: equal authentication material, equal digests;
// another token, another digest.
func TestDigestIsLoginsDigest(t *testing.T) {
	if handlerconf.Digest == nil {
		t.Fatal("handlerconf.Digest is nil once login is loaded")
	}
	a := &login.ConnectionInfo{Server: "https://a", Token: "t", DefaultNamespace: "x"}
	same := &login.ConnectionInfo{Server: "https://a", Token: "t", DefaultNamespace: "y", Priority: 3}
	other := &login.ConnectionInfo{Server: "https://a", Token: "u"}
	d := handlerconf.Digest(a)
	if got := hex.EncodeToString(d[:4]); got != a.Fingerprint() {
		t.Errorf("Digest() starts with %s, want the Fingerprint %s", got, a.Fingerprint())
	}
	if handlerconf.Digest(same) != d {
		t.Error("Digest() differs for the same authentication material")
	}
	if handlerconf.Digest(other) == d {
		t.Error("Digest() is equal for another token")
	}
}

func selfNamed(context.Context) (*login.ConnectionInfo, error) { return nil, nil }

func init() { handlerconf.NameFunc(selfNamed, "self named", "self") }

// A function given to NameFunc, and no closure of the same shape, goes by
// its name; login.ID still wins.
func TestConfigureNameFunc(t *testing.T) {
	if s := handlerconf.Configure[login.Option](selfNamed); s.ID != "self named" || s.Label != "self" {
		t.Errorf("ID %q, label %q; want self named, self", s.ID, s.Label)
	}
	if s := handlerconf.Configure(selfNamed, login.ID("mine")); s.ID != "mine" || s.Label != "mine" {
		t.Errorf("with login.ID: ID %q, label %q; want mine, mine", s.ID, s.Label)
	}
	if s := handlerconf.Configure[login.Option](namedHandler); s.ID != "handlerconf_test.namedHandler" {
		t.Errorf("another function: ID %q", s.ID)
	}
}
