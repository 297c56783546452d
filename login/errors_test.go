package login

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/go-logr/logr/funcr"
)

type secretPanic struct{ Token string }

// TestPanicErrorPrintsTypeOnly panics with values that hold a secret and
// checks that no printed form of the error shows it, only the value's type.
func TestPanicErrorPrintsTypeOnly(t *testing.T) {
	const secret = "tok-panic-123"
	for _, tc := range []struct {
		value    any
		wantType string
	}{
		{secret, "string"},
		{errors.New("bad token " + secret), "*errors.errorString"},
		{fmt.Errorf("wrapped: %w", errors.New(secret)), "*fmt.wrapError"},
		{secretPanic{Token: secret}, "login.secretPanic"},
		{&secretPanic{Token: secret}, "*login.secretPanic"},
		{[]byte(secret), "[]uint8"},
		{map[string]string{"token": secret}, "map[string]string"},
	} {
		t.Run(tc.wantType, func(t *testing.T) {
			// The vault turns a handler's panic into this error (its
			// callHandler test); here, every way of printing it.
			var err error = &PanicError{Handler: "panicky", Value: tc.value}
			pe := err.(*PanicError)
			asJSON, jerr := json.Marshal(pe)
			if jerr != nil {
				t.Fatal(jerr)
			}
			valueJSON, jerr := json.Marshal(*pe)
			if jerr != nil {
				t.Fatal(jerr)
			}
			var logged strings.Builder
			funcr.New(func(prefix, args string) { logged.WriteString(prefix + args) }, funcr.Options{}).
				Error(err, "login failed", "panic", pe, "value", *pe)
			outputs := map[string]string{
				"Error":     err.Error(),
				"%v":        fmt.Sprintf("%v", err),
				"%+v":       fmt.Sprintf("%+v", err),
				"%#v":       fmt.Sprintf("%#v", err),
				"%s":        fmt.Sprintf("%s", err),
				"%q":        fmt.Sprintf("%q", err),
				"value %v":  fmt.Sprintf("%v", *pe),
				"value %+v": fmt.Sprintf("%+v", *pe),
				"value %#v": fmt.Sprintf("%#v", *pe),
				"%w":        fmt.Errorf("vault: %w", err).Error(),
				"%w %+v":    fmt.Sprintf("%+v", fmt.Errorf("vault: %w", err)),
				"joined":    fmt.Sprintf("%+v", errors.Join(errors.New("other"), err)),
				"nested":    fmt.Sprintf("%+v", struct{ E *PanicError }{pe}),
				"json":      string(asJSON),
				"json val":  string(valueJSON),
				"logr":      logged.String(),
			}
			for name, out := range outputs {
				if strings.Contains(out, secret) {
					t.Errorf("%s = %s, reveals the panic value", name, out)
				}
				if !strings.Contains(out, tc.wantType) && !strings.Contains(out, strings.ReplaceAll(tc.wantType, `"`, `\"`)) {
					t.Errorf("%s = %s, want the value's type %s", name, out, tc.wantType)
				}
				if !strings.Contains(out, "panicky") {
					t.Errorf("%s = %s, want the handler's ID", name, out)
				}
			}
		})
	}
}
