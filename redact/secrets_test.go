package redact

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"testing"
)

func TestMask(t *testing.T) {
	for _, tc := range []struct {
		in      string
		secrets []string
		want    string
	}{
		{"token abc is revoked", []string{"abc"}, "token [redacted] is revoked"},
		{"abc, again abc", []string{"abc"}, "[redacted], again [redacted]"},
		{"nothing here", []string{"abc", ""}, "nothing here"},
		{"anything", nil, "anything"},
		{"", []string{"abc"}, ""},
		// The longest first: a password inside its basic auth's text.
		{"user:pw-long rejected", []string{"pw", "user:pw-long"}, "[redacted] rejected"},
	} {
		if got := Mask(tc.in, tc.secrets...); got != tc.want {
			t.Errorf("Mask(%q, %q) = %q, want %q", tc.in, tc.secrets, got, tc.want)
		}
	}
}

func TestSecrets(t *testing.T) {
	if Secrets(nil, "x") != nil {
		t.Fatal("Secrets(nil) != nil")
	}
	const token, password = "tok-secret-1", "pw-secret-2"
	orig := fmt.Errorf("upgrade: %w", errors.Join(fs.ErrPermission,
		errors.New("token "+token+" is revoked via http://u:"+password+"@proxy")))
	err := Secrets(orig, token)
	if !errors.Is(err, fs.ErrPermission) {
		t.Error("errors.Is does not see through Secrets")
	}
	for verb, out := range map[string]string{
		"Error": err.Error(),
		"%v":    fmt.Sprintf("%v", err),
		"%+v":   fmt.Sprintf("%+v", err),
		"%#v":   fmt.Sprintf("%#v", err),
		"%q":    fmt.Sprintf("%q", err),
		"%w":    fmt.Errorf("outer: %w", err).Error(),
	} {
		if strings.Contains(out, token) || strings.Contains(out, password) {
			t.Errorf("%s = %q, reveals a secret", verb, out)
		}
		if !strings.Contains(out, "token "+Marker+" is revoked") {
			t.Errorf("%s = %q, want the message with the token masked", verb, out)
		}
	}
}
