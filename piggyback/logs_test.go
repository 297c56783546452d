package piggyback_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	crzap "sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/authvault/authvault/login"
	"github.com/authvault/authvault/piggyback"
	"github.com/authvault/authvault/testkit/testlog"
	"github.com/authvault/authvault/vault"
)

// quickstart is examples/quickstart's vault: a handler of one's own that
// gives nothing (no $SECRET_STORE) beside the fallback handlers, logging
// through controller-runtime's production zap logger into out. It returns
// the LoginError of its first Select.
func quickstart(t *testing.T, out *testlog.Writer) *vault.LoginError {
	t.Helper()
	v := vault.New(vault.Options{Logger: crzap.New(crzap.WriteTo(out)), KeepFallback: true})
	t.Cleanup(v.Close)
	v.OnLogin(func(context.Context) (*login.ConnectionInfo, error) { return nil, nil },
		login.ID("secret-store"), login.Retries(3), login.Timeout(30*time.Second))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cred, err := v.Select(ctx)
	var le *vault.LoginError
	if !errors.As(err, &le) {
		t.Fatalf("Select() = %v, %v; want a LoginError", cred, err)
	}
	return le
}

// The quickstart with nothing to log in with (outside a cluster, no
// --kubeconfig, no $KUBECONFIG, no ~/.kube/config, its own handler giving
// nothing): the error says what is missing, and promises no login that
// would not help. Before, it said four times that a handler "returned no
// credential (next login at …)", and the operator exited on it.
func TestNothingAnywhereSaysWhatIsMissing(t *testing.T) {
	home := piggyback.Isolate(t)
	var out testlog.Writer
	le := quickstart(t, &out)
	msg := le.Error()
	for _, want := range []string{
		"no in-cluster service account", "no --kubeconfig", "no $KUBECONFIG",
		filepath.Join(home, ".kube", "config"), `"secret-store"`,
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("LoginError = %s\nwant it to say %q", msg, want)
		}
	}
	if strings.Contains(msg, "next login") || strings.Contains(msg, "returned no credential") {
		t.Errorf("LoginError = %s\nwant no next login and no \"returned no credential\"", msg)
	}
	if strings.Contains(out.String(), "stacktrace") {
		t.Errorf("the log has a stack trace:\n%s", out.String())
	}
}

// The quickstart run with --kubeconfig naming a file that is not there:
// one line says so, naming the file, at INFO without a stack; the
// LoginError names that failure only (the other three handlers gave
// nothing) and fits a log line. Before: the failure's line at error level
// with a stack trace of the vault's goroutine (674 bytes), and a
// LoginError of every handler's outcome (over 600 bytes).
func TestQuickstartKubeconfigMissingIsOneLine(t *testing.T) {
	piggyback.Isolate(t)
	missing := filepath.Join(t.TempDir(), "config")
	piggyback.SetFlag(t, missing)
	var out testlog.Writer
	le := quickstart(t, &out)

	msg := le.Error()
	if !strings.Contains(msg, missing) {
		t.Errorf("LoginError = %s\nwant it to name %s", msg, missing)
	}
	for _, o := range le.Handlers {
		if o.Err != nil && strings.Contains(o.Err.Error(), missing) {
			continue
		}
		if strings.Contains(msg, strconv.Quote(o.Handler)) {
			t.Errorf("LoginError = %s\nwant no word of handler %q, which gave nothing", msg, o.Handler)
		}
	}
	if n := len(msg) - len(missing); n > 250 {
		t.Errorf("LoginError is %d bytes beside the path, want at most 250: %s", n, msg)
	}

	var naming []string
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		if strings.Contains(line, "stacktrace") || strings.Contains(line, `"level":"error"`) {
			t.Errorf("a line at error level or with a stack: %s", line)
		}
		if len(line)-len(missing) > 400 {
			t.Errorf("a line of %d bytes beside the path, want at most 400: %s", len(line), line)
		}
		if strings.Contains(line, missing) {
			naming = append(naming, line)
		}
	}
	if len(naming) != 1 || !strings.Contains(naming[0], `"msg":"login failed`) {
		t.Errorf("lines naming %s = %q, want one that says the login failed", missing, naming)
	}
}

// Each fallback says what it looked for, as the LoginError quotes it: a
// $KUBECONFIG that names no file, a pod without its token mounted
// (automountServiceAccountToken: false). The handlers exported on their
// own still return (nil, nil).
func TestDefaultsSayWhatIsMissing(t *testing.T) {
	for _, tt := range []struct {
		name  string
		setup func(t *testing.T, dir string) string // what the error must say
	}{
		{"$KUBECONFIG names no file", func(t *testing.T, dir string) string {
			path := filepath.Join(dir, "gone")
			t.Setenv("KUBECONFIG", path)
			return "no file of $KUBECONFIG (" + path + ")"
		}},
		{"no token mounted", func(t *testing.T, _ string) string {
			root, _ := piggyback.MountServiceAccount(t, "10.96.0.1", true)
			if err := os.Remove(filepath.Join(root, "token")); err != nil {
				t.Fatal(err)
			}
			return "no in-cluster service account token (" + filepath.Join(root, "token") + ")"
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			piggyback.Isolate(t)
			want := tt.setup(t, t.TempDir())
			v := vault.New(vault.Options{})
			defer v.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_, err := v.Select(ctx)
			if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "next login") {
				t.Errorf("Select() error = %v\nwant it to say %q, and no next login", err, want)
			}
			if info, err := piggyback.ServiceAccount(ctx); info != nil || err != nil {
				t.Errorf("ServiceAccount() = %v, %v; want (nil, nil), as documented", info, err)
			}
		})
	}
}
