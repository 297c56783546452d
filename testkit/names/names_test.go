package names

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/authvault/authvault/login"
)

func TestInVault(t *testing.T) {
	serves := func(context.Context) (*login.ConnectionInfo, error) {
		return &login.ConnectionInfo{Server: "https://api.example:6443", Token: "t0ken"}, nil
	}
	fails := func(context.Context) (*login.ConnectionInfo, error) {
		return nil, login.Permanent(errors.New("mylogin: Options.Server is required"))
	}
	for _, tc := range []struct {
		what        string
		h           login.Handler
		name, label string
		text        string // in Text
	}{
		{"a named handler that serves", login.Named("token file /mnt/api", "token file", serves), "token file /mnt/api", "token file", `"handler"="token file /mnt/api"`},
		{"a named handler that fails", login.Named("mylogin prod", "mylogin", fails), "mylogin prod", "mylogin", "Options.Server is required"},
		{"a function", fails, "names.TestInVault.func2", "names.TestInVault.func2", `vault: no usable credential: handler "names.TestInVault.func2"`},
	} {
		seen := InVault(t, tc.h)
		if seen.Name != tc.name || seen.Label != tc.label {
			t.Errorf("%s: named %q, labelled %q; want %q, %q", tc.what, seen.Name, seen.Label, tc.name, tc.label)
		}
		if !strings.Contains(seen.Text, tc.text) {
			t.Errorf("%s: the vault's text does not say %s:\n%s", tc.what, tc.text, seen.Text)
		}
	}
}
